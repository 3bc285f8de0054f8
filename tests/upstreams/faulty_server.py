"""A deliberately broken HTTP server for fault tests, on raw asyncio sockets.

Discovery requests (paths ending in /load, /tools, /get_available_tools, /worker/tools)
get `--document` (a JSON file) so that tools exist; every other request misbehaves as
`--mode` says: hang (accept, never answer), slow (answer after --delay seconds),
reset (send half a response, then reset the connection), html (an HTML error page),
error500 (HTTP 500 with a JSON body that is no protocol's), wrong (a valid JSON body
of another protocol), download (a valid answer that is not JSON: raw bytes as a
ToolServerNode `/download_file` sends them), huge (a JSON answer of --size bytes,
chunked, without a Content-Length).

    python -m tests.upstreams.faulty_server --port P --mode hang --document doc.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import struct
from collections.abc import Awaitable, Callable

DISCOVERY_SUFFIXES = ("/load", "/tools", "/get_available_tools", "/worker/tools", "/get_cookie")


def http(status: str, body: bytes, content_type: str = "application/json") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
    return (head + "Connection: close\r\n\r\n").encode() + body


async def read_request(reader: asyncio.StreamReader) -> str:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next((int(v) for k, _, v in (ln.partition(":") for ln in lines[1:]) if k.lower() == "content-length"), 0)
    if length:
        await reader.readexactly(length)
    return lines[0].split(" ")[1]


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
CHUNK = 64 * 1024


async def send_huge(writer: asyncio.StreamWriter, size: int) -> None:
    """A chunked JSON body of `size` bytes, written as fast as the reader takes it."""
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    writer.write(b'6\r\n{"x":"\r\n')
    sent = 6
    filler = b"x" * CHUNK
    while sent < size:
        piece = filler[: min(CHUNK, size - sent)]
        writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        sent += len(piece)
        await writer.drain()  # raises once the client stopped reading and closed
    writer.write(b'2\r\n"}\r\n0\r\n\r\n')


def make_handler(mode: str, delay: float, document: bytes, size: int = 0) -> Handler:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            path = (await read_request(reader)).split("?")[0]
            if path.endswith(DISCOVERY_SUFFIXES):
                writer.write(http("200 OK", document))
            elif mode == "hang":
                await asyncio.sleep(3600)
            elif mode == "slow":
                await asyncio.sleep(delay)
                writer.write(http("200 OK", b'{"jsonrpc":"2.0","result":{"late":true},"error":null,"id":"x"}'))
            elif mode == "reset":
                writer.write(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"res')
                await writer.drain()
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
                return
            elif mode == "html":
                page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
                writer.write(http("200 OK", page, "text/html"))
            elif mode == "error500":
                writer.write(http("500 Internal Server Error", b'{"oops": "something broke"}'))
            elif mode == "wrong":
                writer.write(http("200 OK", b'{"items": [], "unrelated": {"protocol": "something else"}}'))
            elif mode == "download":
                data = bytes(range(256)) * 4  # not JSON, not text
                head = f"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {len(data)}\r\n"
                head += 'Content-Disposition: attachment; filename="data.bin"\r\nConnection: close\r\n\r\n'
                writer.write(head.encode() + data)
            elif mode == "huge":
                await send_huge(writer, size)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            if not writer.transport.is_closing():
                writer.close()

    return handle


async def serve(port: int, mode: str, delay: float, document: bytes, size: int) -> None:
    server = await asyncio.start_server(make_handler(mode, delay, document, size), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    modes = ["hang", "slow", "reset", "html", "error500", "wrong", "download", "huge"]
    parser.add_argument("--mode", required=True, choices=modes)
    parser.add_argument("--delay", type=float, default=2.0)
    parser.add_argument("--size", type=int, default=64 * 1024 * 1024, help="bytes of the 'huge' answer")
    parser.add_argument("--document", required=True, help="JSON file answered to discovery requests")
    args = parser.parse_args()
    with open(args.document, "rb") as handle:
        document = json.dumps(json.load(handle)).encode()
    asyncio.run(serve(args.port, args.mode, args.delay, document, args.size))


if __name__ == "__main__":
    main()
