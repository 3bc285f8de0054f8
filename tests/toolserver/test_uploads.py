"""The streaming multipart reader of `/upload_file` and the workspace bounds, without HTTP."""

from __future__ import annotations

import io
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from adapters.toolserver import uploads
from gateway.config.models import WorkspacesSettings
from gateway.errors import GatewayError
from gateway.workspaces import WorkspaceId, Workspaces


def encoded(files: dict[str, tuple[str | None, bytes]]) -> tuple[bytes, str]:
    """A body exactly as requests/httpx encode `files=` (the XAgent client's library does the same)."""
    request = httpx.Request("POST", "http://x/upload_file", files=files)
    return request.read(), request.headers["content-type"]


async def chunks_of(body: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


@pytest.mark.parametrize("chunk", [1, 7, 70, 4096, 10**7])
async def test_the_file_part_arrives_whole_whatever_the_chunking(chunk: int) -> None:
    content = b"line one\r\n--not a boundary\r\n" + bytes(range(256)) * 40
    body, content_type = encoded({"file": ("notes.bin", content), "filename": (None, b"notes.bin")})
    target = io.BytesIO()
    saved = await uploads.save_file_part(chunks_of(body, chunk), content_type, target, limit=len(content))
    assert (saved.filename, saved.size, target.getvalue()) == ("notes.bin", len(content), content)


async def test_the_limit_stops_the_copy() -> None:
    body, content_type = encoded({"file": ("big.bin", b"x" * 5000)})
    with pytest.raises(uploads.TooLarge):
        await uploads.save_file_part(chunks_of(body, 512), content_type, io.BytesIO(), limit=4999)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"{}", "application/json"),
        (b"no boundary here", "multipart/form-data; boundary=abc"),
        (
            b'--abc\r\nContent-Disposition: form-data; name="other"\r\n\r\nx\r\n--abc--\r\n',
            "multipart/form-data; boundary=abc",
        ),
        (
            b'--abc\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\nunfinished',
            "multipart/form-data; boundary=abc",
        ),
    ],
)
async def test_bodies_without_a_whole_file_part_are_refused(body: bytes, content_type: str) -> None:
    with pytest.raises(uploads.BadUpload):
        await uploads.save_file_part(chunks_of(body, 8), content_type, io.BytesIO(), limit=100)


def part(headers: list[str], content: bytes, boundary: bytes = b"abc") -> bytes:
    """One part, delimiter first, written by hand to shape what httpx would not send."""
    return b"--" + boundary + b"\r\n" + "".join(f"{h}\r\n" for h in headers).encode() + b"\r\n" + content + b"\r\n"


FILE_HEADER = 'Content-Disposition: form-data; name="file"; filename="a.txt"'
MULTIPART = "multipart/form-data; boundary=abc"


async def refused(body: bytes, content_type: str | None = MULTIPART, chunk: int = 8) -> str:
    with pytest.raises(uploads.BadUpload) as caught:
        await uploads.save_file_part(chunks_of(body, chunk), content_type, io.BytesIO(), limit=100)
    return str(caught.value)


@pytest.mark.parametrize("chunk", [1, 5000])
async def test_part_headers_past_the_byte_bound_are_refused(chunk: int) -> None:
    padding = [f"X-Pad-{n}: {'p' * 3000}" for n in range(6)]  # 18,000 header bytes in 7 lines
    body = part([FILE_HEADER, *padding], b"x") + b"--abc--\r\n"
    assert "headers are too long" in await refused(body, chunk=chunk)


async def test_one_endless_header_line_is_refused_within_the_bound() -> None:
    body = b"--abc\r\nContent-Disposition: form-data; name=" + b"n" * 10**6
    consumed = 0

    async def counted() -> AsyncIterator[bytes]:
        nonlocal consumed
        async for chunk in chunks_of(body, 1024):
            consumed += len(chunk)
            yield chunk

    with pytest.raises(uploads.BadUpload):
        await uploads.save_file_part(counted(), MULTIPART, io.BytesIO(), limit=10**7)
    assert consumed <= uploads.MAX_HEADER_BYTES + 2048  # stopped at the bound, not at the end of the body


async def test_too_many_part_headers_are_refused() -> None:
    body = part([FILE_HEADER, *(f"X-H{n}: v" for n in range(uploads.MAX_PART_HEADERS))], b"x") + b"--abc--\r\n"
    assert "header" in (await refused(body)).lower()


async def test_too_many_parts_are_refused() -> None:
    others = b"".join(part([f'Content-Disposition: form-data; name="f{n}"'], b"v") for n in range(uploads.MAX_PARTS))
    body = part([FILE_HEADER], b"x") + others + b"--abc--\r\n"
    assert f"more than {uploads.MAX_PARTS} multipart parts" in await refused(body)


async def test_a_body_cut_short_anywhere_is_refused() -> None:
    body, content_type = encoded({"file": ("a.txt", b"0123456789" * 5), "filename": (None, b"a.txt")})
    for cut in range(len(body) - len(b"--\r\n")):  # every prefix short of the closing delimiter's "--"
        with pytest.raises(uploads.BadUpload):
            await uploads.save_file_part(chunks_of(body[:cut], 16), content_type, io.BytesIO(), limit=1000)


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "multipart/form-data",
        "multipart/mixed; boundary=abc",
        f"multipart/form-data; boundary={'b' * 201}",
    ],
)
async def test_content_types_without_a_usable_boundary_are_refused(content_type: str | None) -> None:
    body = part([FILE_HEADER], b"x") + b"--abc--\r\n"
    assert "multipart/form-data" in await refused(body, content_type)


async def test_past_the_limit_reading_stops_at_once() -> None:
    pulled = 0

    async def endless_file() -> AsyncIterator[bytes]:
        nonlocal pulled
        for n in range(1000):  # a bound on the test itself; the reader must stop long before
            pulled += 1
            yield b"--abc\r\n" + FILE_HEADER.encode() + b"\r\n\r\n" if n == 0 else b"x" * 64

    target = io.BytesIO()
    with pytest.raises(uploads.TooLarge):
        await uploads.save_file_part(endless_file(), MULTIPART, target, limit=100)
    assert pulled == 3 and len(target.getvalue()) <= 100  # the headers, 64 bytes, then 128 > 100


async def test_other_parts_are_dropped_but_bounded_by_the_overhead() -> None:
    pulled = 0

    async def endless_field() -> AsyncIterator[bytes]:
        nonlocal pulled
        for n in range(1000):
            pulled += 1
            yield b'--abc\r\nContent-Disposition: form-data; name="filename"\r\n\r\n' if n == 0 else b"y" * 100

    with pytest.raises(uploads.TooLarge):
        await uploads.save_file_part(endless_field(), MULTIPART, io.BytesIO(), limit=10, overhead=1000)
    assert pulled < 12


async def test_only_the_first_file_part_is_kept_and_names_keep_their_utf8() -> None:
    body = (
        part(['Content-Disposition: form-data; name="filename"'], b"ignored")
        + part(['Content-Disposition: form-data; name="file"; filename="../r\u00e9sum\u00e9.txt"'], b"first")
        + part(['Content-Disposition: form-data; name="file"; filename="second.txt"'], b"second")
        + b"--abc--\r\n"
    )
    target = io.BytesIO()
    saved = await uploads.save_file_part(chunks_of(body, 3), MULTIPART, target, limit=100)
    assert (saved.filename, saved.size, target.getvalue()) == ("r\u00e9sum\u00e9.txt", 5, b"first")


@pytest.mark.parametrize(
    ("raw", "safe"), [("../../etc/passwd", "passwd"), ("a\\b\\c.txt", "c.txt"), ("..", ""), ("", "")]
)
def test_client_file_names_lose_their_directories(raw: str, safe: str) -> None:
    assert uploads.safe_filename(raw) == safe


def test_workspaces_are_bounded_in_count_and_idle_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spaces = Workspaces(WorkspacesSettings(root=str(tmp_path / "root"), max_workspaces=2, idle_s=60))
    first = spaces.directory(WorkspaceId("", "a"))
    spaces.directory(WorkspaceId("", "b"))
    spaces.directory(WorkspaceId("", "c"))  # one too many: the least recently used goes
    assert not first.exists() and len(spaces) == 2
    now = time.monotonic()
    monkeypatch.setattr(time, "monotonic", lambda: now + 120)
    fresh = spaces.directory(WorkspaceId("", "d"))  # the others were idle for longer than idle_s
    assert len(spaces) == 1 and fresh.exists()
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == [fresh.name]
    spaces.close()
    assert list((tmp_path / "root").iterdir()) == []  # a configured root stays, emptied


def test_a_configured_root_is_cleared_of_earlier_runs_only(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / ("ws-" + "0" * 32)).mkdir(parents=True)
    (root / "keep-me").mkdir()
    spaces = Workspaces(WorkspacesSettings(root=str(root)))
    assert sorted(p.name for p in spaces.root.iterdir()) == ["keep-me"]
    spaces.close()


def test_room_counts_what_is_written(tmp_path: Path) -> None:
    spaces = Workspaces(WorkspacesSettings(root=str(tmp_path), max_bytes_per_workspace=100))
    key = WorkspaceId("", "k")
    spaces.resolve(key, "a.txt").write_bytes(b"x" * 60)
    assert spaces.room(key) == 40
    assert spaces.room(key, replacing=spaces.resolve(key, "a.txt")) == 100
    with pytest.raises(GatewayError):
        spaces.resolve(key, "../escape")
    spaces.close()
