"""A deliberately broken HTTP server for fault tests, on raw asyncio sockets.

Discovery requests (paths ending in /load, /tools, /get_available_tools, /worker/tools)
get `--document` (a JSON file) so that tools exist; every other request misbehaves as
`--mode` says: hang (accept, never answer), slow (answer after --delay seconds),
reset (send half a response, then reset the connection), html (an HTML error page),
error500 (HTTP 500 with a JSON body that is no protocol's), wrong (a valid JSON body
of another protocol).

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


def make_handler(mode: str, delay: float, document: bytes) -> Handler:
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
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            if not writer.transport.is_closing():
                writer.close()

    return handle


async def serve(port: int, mode: str, delay: float, document: bytes) -> None:
    server = await asyncio.start_server(make_handler(mode, delay, document), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", required=True, choices=["hang", "slow", "reset", "html", "error500", "wrong"])
    parser.add_argument("--delay", type=float, default=2.0)
    parser.add_argument("--document", required=True, help="JSON file answered to discovery requests")
    args = parser.parse_args()
    with open(args.document, "rb") as handle:
        document = json.dumps(json.load(handle)).encode()
    asyncio.run(serve(args.port, args.mode, args.delay, document))


if __name__ == "__main__":
    main()
