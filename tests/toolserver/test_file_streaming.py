"""Files through a `toolserver` backend stream both ways, in bounded memory, up to `limits.max_upload_bytes`.

Issue 26, item 4: a 96 MiB upload was taken, but its download answered 503 because the
answer was buffered under `limits.max_upstream_response_bytes` (16 MiB). Here a real
`toolplex serve` fronts a real node double (the Manager of tests/upstreams, which spools
uploads to disk as FastAPI does and answers downloads with a FileResponse): 96 MiB go up
and come back, byte for byte (sha256), while the gateway process's resident memory is
sampled with psutil and must grow by far less than the file. The same holds for the
gateway's own workspaces (no `toolserver` backend), whose downloads are FileResponses.

In-process, against the same double and against a raw socket upstream, the upstream's
answer is closed however the download ends (sent whole, its client gone, the upstream
failing mid-way), and an answer past the limit is refused or cut, never buffered.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import psutil
import pytest
from starlette.requests import ClientDisconnect

from adapters.toolserver.backend import ToolServerBackend
from gateway.app import create_app
from gateway.config import parse_config
from tests.support import python_server, served_gateway

MIB = 1024 * 1024
BIG = 96 * MIB  # under the default limits.max_upload_bytes (100 MiB), six times max_upstream_response_bytes
CHUNK = MIB
MAX_GROWTH = 32 * MIB  # the gateway may grow by a third of the file at most (measured: a few MiB)
WAIT_S = 60.0  # bound on any one transfer


# ---- 96 MiB each way through a real gateway ----


@pytest.fixture(scope="module")
def node() -> Iterator[str]:
    with python_server("tests.upstreams.toolserver_manager") as port:
        yield f"http://127.0.0.1:{port}"


def write_file(path: Path, size: int) -> str:
    """`size` random bytes written in chunks (never whole in this process's memory); their sha256."""
    digest = hashlib.sha256()
    with path.open("wb") as target:
        for start in range(0, size, CHUNK):
            piece = os.urandom(min(CHUNK, size - start))
            digest.update(piece)
            target.write(piece)
    return digest.hexdigest()


class Multipart:
    """A `multipart/form-data` body with one `file` part (and the `filename` part XAgent's client adds),
    read from disk as it is sent."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.boundary = secrets.token_hex(16)
        name = path.name
        self.head = (
            f'--{self.boundary}\r\nContent-Disposition: form-data; name="filename"\r\n\r\n{name}\r\n'
            f'--{self.boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        self.tail = f"\r\n--{self.boundary}--\r\n".encode()

    @property
    def headers(self) -> dict[str, str]:
        size = len(self.head) + self.path.stat().st_size + len(self.tail)
        return {"Content-Type": f"multipart/form-data; boundary={self.boundary}", "Content-Length": str(size)}

    def __iter__(self) -> Iterator[bytes]:
        yield self.head
        with self.path.open("rb") as source:
            while piece := source.read(CHUNK):
                yield piece
        yield self.tail


class PeakMemory:
    """The highest resident set size of a process, sampled from another thread until stopped."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak = self.process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)


def upload(client: httpx.Client, path: Path) -> httpx.Response:
    body = Multipart(path)
    return client.post("/upload_file", content=iter(body), headers=body.headers)


def download(client: httpx.Client, name: str) -> tuple[httpx.Response, int, str]:
    """The answer (its body streamed, not kept), the number of bytes and their sha256."""
    digest = hashlib.sha256()
    size = 0
    with client.stream("POST", "/download_file", json={"file_path": f"workspace/{name}"}) as answer:
        for piece in answer.iter_bytes():
            digest.update(piece)
            size += len(piece)
    return answer, size, digest.hexdigest()


BACKENDS = {
    "node": "  - {{name: node, kind: toolserver, url: '{node}'}}",  # passed through to the node's workspace
    "own": '  - {{name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}}',  # the gateway's
}


@pytest.mark.parametrize("workspace", list(BACKENDS))
def test_96_mib_go_up_and_come_back_through_the_gateway_in_bounded_memory(
    node: str, tmp_path: Path, workspace: str
) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text("backends:\n" + BACKENDS[workspace].format(node=node) + "\n")
    big = tmp_path / "big.bin"
    expected = write_file(big, BIG)
    warm = tmp_path / "warm.bin"
    write_file(warm, 2 * MIB)
    with served_gateway(config) as (url, process), httpx.Client(base_url=url, timeout=WAIT_S) as client:
        client.cookies.set("node_id", client.post("/get_cookie").cookies["node_id"])
        # Warm up every code path (imports, pools, buffers) before the baseline is taken.
        assert upload(client, warm).status_code == 200
        assert download(client, "warm.bin")[0].status_code == 200
        baseline = psutil.Process(process.pid).memory_info().rss

        started = time.monotonic()
        with PeakMemory(process.pid) as memory:
            uploaded = upload(client, big)
            answer, size, digest = download(client, "big.bin")
        elapsed = time.monotonic() - started

    growth = memory.peak - baseline
    shown = f"gateway RSS {baseline / MIB:.1f} MiB, peak +{growth / MIB:.1f} MiB"
    print(f"\n{workspace} workspace: 96 MiB up and down in {elapsed:.1f} s; {shown}")
    assert (uploaded.status_code, uploaded.json()) == (200, {"message": "Upload Success!"})
    assert answer.status_code == 200, answer.headers
    assert answer.headers["content-length"] == str(BIG)  # the node's own length, passed on (or the gateway's)
    assert answer.headers["content-disposition"].endswith('filename="big.bin"')
    assert (size, digest) == (BIG, expected)
    assert growth < MAX_GROWTH, f"the gateway grew by {growth / MIB:.1f} MiB moving 96 MiB each way"


# ---- in-process: the upstream's answer is closed however the download ends ----


async def asgi_post(
    app: Any, path: str, body: bytes, *, leave_after: int | None = None, spec: str = "2.3"
) -> tuple[int, dict[bytes, bytes], bytes, bool]:
    """POST `body` to the app as a server of ASGI `spec` would; with `leave_after`, the client goes away
    once that many body bytes arrived (2.3: `receive` says so; 2.4: `send` raises, as uvicorn's will).
    Returns the status, headers, body and whether the answer was complete."""
    gone = asyncio.Event()
    sent = False
    status, headers, received, complete = 0, {}, bytearray(), False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, headers, complete
        if gone.is_set() and spec >= "2.4":
            raise OSError("the client went away")
        if message["type"] == "http.response.start":
            status, headers = message["status"], dict(message["headers"])
        elif message["type"] == "http.response.body":
            received.extend(message.get("body", b""))
            complete = not message.get("more_body", False)
            if leave_after is not None and len(received) >= leave_after:
                gone.set()
                # A real server's send yields to the loop: without this, a body already buffered from the
                # node could all be sent before the disconnect listener ever ran (a flaky "complete").
                await asyncio.sleep(0)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": spec},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    with contextlib.suppress(ClientDisconnect):  # how a 2.4 app says its client went away
        await asyncio.wait_for(app(scope, receive, send), WAIT_S)
    return status, headers, bytes(received), complete


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Response]:
    """Every upstream answer the backend hands to the front for a file request."""
    answers: list[httpx.Response] = []
    operate = ToolServerBackend.operate

    async def recording(self: ToolServerBackend, *args: Any, **kwargs: Any) -> httpx.Response:
        answer = await operate(self, *args, **kwargs)
        answers.append(answer)
        return answer

    monkeypatch.setattr(ToolServerBackend, "operate", recording)
    return answers


async def test_the_upstream_answer_is_closed_when_the_download_ends_or_its_client_goes_away(
    node: str, opened: list[httpx.Response]
) -> None:
    text = f"backends:\n  - {{name: node, kind: toolserver, url: '{node}'}}\n"
    app = create_app(parse_config(text, "files.yaml", env=dict(os.environ)))
    content = os.urandom(8 * MIB)  # far more than the sockets between here and the node hold
    async with app.lifespan():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver", timeout=WAIT_S) as client:
            stored = await client.post("/upload_file", files={"file": ("part.bin", content)})
            assert stored.status_code == 200
        assert len(opened) == 1 and opened[0].is_closed  # the upload's answer, once sent

        wanted = orjson.dumps({"file_path": "part.bin"})
        status, headers, body, complete = await asgi_post(app, "/download_file", wanted)
        assert (status, body, complete) == (200, content, True)
        assert headers[b"content-length"] == str(len(content)).encode() and opened[1].is_closed

        for spec in ("2.3", "2.4"):  # Starlette skips its background task after a 2.4 disconnect
            status, _, body, complete = await asgi_post(app, "/download_file", wanted, leave_after=1, spec=spec)
            assert status == 200 and not complete and len(body) < len(content)
            assert opened[-1].is_closed  # the client went away: the node's answer was closed, not left to the GC


async def test_an_upload_refused_for_a_lost_node_session_is_sent_again_whole_from_the_spool(node: str) -> None:
    """The node forgot the session (403 invalid node_id: refused, never run): the backend takes a new
    cookie and sends the spooled body once more, from its first byte."""
    text = f"backends:\n  - {{name: node, kind: toolserver, url: '{node}'}}\n"
    app = create_app(parse_config(text, "files.yaml", env=dict(os.environ)))
    first, second = os.urandom(3 * MIB), os.urandom(5 * MIB)
    async with app.lifespan():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver", timeout=WAIT_S) as client:
            assert (await client.post("/upload_file", files={"file": ("a.bin", first)})).status_code == 200
            async with httpx.AsyncClient(base_url=node, timeout=WAIT_S) as manager:
                for node_id in (await manager.get("/debug/nodes")).json():  # gone behind the gateway's back
                    await manager.post("/release_session", headers={"Cookie": f"node_id={node_id}"})
                stored = await client.post("/upload_file", files={"file": ("b.bin", second)})
                assert stored.status_code == 200, stored.text
                assert len((await manager.get("/debug/nodes")).json()) == 1  # one new node: sent once more
            back = await client.post("/download_file", json={"file_path": "b.bin"})
            assert back.content == second
            gone = await client.post("/download_file", json={"file_path": "a.bin"})
            assert gone.status_code == 500  # the new node starts empty (the node's own answer)


# ---- in-process, against a raw upstream: cut mid-way, and past the limit ----


LISTING = orjson.dumps({"available_tools": [], "tools_json": []})


def http_answer(body: bytes, *, length: int | None = None, status: str = "200 OK") -> bytes:
    declared = len(body) if length is None else length
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/octet-stream\r\nContent-Length: {declared}\r\n"
    return (head + "Connection: close\r\n\r\n").encode() + body


@pytest.fixture
async def raw_node() -> AsyncIterator[tuple[str, list[str]]]:
    """A bare node on raw sockets: it lists no tools; `/download_file` answers what the body's `file_path`
    names: `cut` (declares 4 MiB, sends 1 MiB, resets), `declared` (declares 1 GiB), `chunked` (an
    endless chunked body). Yields its URL and the paths it was asked for."""
    asked: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            length = next(
                (int(v) for k, _, v in (x.partition(":") for x in lines[1:]) if k.lower() == "content-length"), 0
            )
            body = await reader.readexactly(length) if length else b""
            asked.append(path)
            if path.endswith("/get_available_tools"):
                writer.write(http_answer(LISTING))
            elif not path.endswith("/download_file"):
                writer.write(http_answer(b'{"detail": "Not Found"}', status="404 Not Found"))
            else:
                mode = orjson.loads(body)["file_path"]
                if mode == "cut":
                    writer.write(http_answer(b"x" * MIB, length=4 * MIB))
                    await writer.drain()
                    writer.transport.abort()
                    return
                if mode == "declared":
                    writer.write(http_answer(b"", length=1 << 30))
                else:
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n")
                    writer.write(b"Connection: close\r\n\r\n")
                    piece = b"y" * 65536
                    while True:
                        writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        await writer.drain()  # raises once the gateway stopped reading and closed
            await writer.drain()
            writer.close()
        except (ConnectionError, asyncio.IncompleteReadError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", asked
    finally:
        server.close()


async def test_an_answer_cut_upstream_is_cut_for_the_client_and_counted_against_the_breaker(
    raw_node: tuple[str, list[str]], opened: list[httpx.Response]
) -> None:
    url, _ = raw_node
    text = f"backends:\n  - {{name: node, kind: toolserver, url: '{url}', retries: 0}}\n"
    app = create_app(parse_config(text, "files.yaml", env=dict(os.environ)))
    async with app.lifespan():
        status, headers, body, complete = await asgi_post(app, "/download_file", b'{"file_path": "cut"}')
        breaker = app.gateway.backends["node"].upstream.breaker
    assert status == 200 and headers[b"content-length"] == str(4 * MIB).encode()
    assert len(body) < 4 * MIB and not complete  # never a whole-looking answer
    assert opened[0].is_closed and breaker.failures == 1


async def test_a_file_answer_past_the_upload_limit_is_refused_or_cut(
    raw_node: tuple[str, list[str]], opened: list[httpx.Response]
) -> None:
    url, _ = raw_node
    text = f"limits: {{max_upload_bytes: {2 * MIB}}}\nbackends:\n  - {{name: node, kind: toolserver, url: '{url}'}}\n"
    app = create_app(parse_config(text, "files.yaml", env=dict(os.environ)))
    async with app.lifespan():
        status, _, body, complete = await asgi_post(app, "/download_file", b'{"file_path": "declared"}')
        assert status == 503 and complete  # said up front: refused before a byte is read
        assert "limits.max_upload_bytes" in orjson.loads(body)["detail"]
        status, _, body, complete = await asgi_post(app, "/download_file", b'{"file_path": "chunked"}')
        assert status == 200 and not complete  # found out mid-way: cut at the limit
        assert 2 * MIB - 65536 <= len(body) <= 2 * MIB
        assert len(opened) == 1 and opened[0].is_closed  # the declared one never reached the front
