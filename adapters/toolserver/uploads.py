"""Streaming `multipart/form-data` for `/upload_file`: the `file` part goes to disk as it arrives.

The parsing is python-multipart's streaming `MultipartParser` (the one Starlette
uses), fed each chunk as it arrives; this module only decides what to keep. The
body is never held whole in memory: the first `file` part's bytes are written to
the target as the parser hands them over, other parts (the XAgent client also
sends a `filename` part) are dropped. Every count is bounded: the body's bytes
(`limit` plus `overhead`, checked before a chunk is parsed), the file part's
bytes (`limit`), each part's header lines and bytes, and the parts.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, BinaryIO

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

MAX_HEADER_BYTES = 16 * 1024
MAX_PART_HEADERS = 8
MAX_PARTS = 16
MAX_BOUNDARY_CHARS = 200


class TooLarge(Exception):
    """The file part (or the body) passed the byte limit."""


class BadUpload(Exception):
    """Not a multipart body with a `file` part; the message says what is wrong."""


@dataclass
class Saved:
    filename: str
    size: int


def boundary_of(content_type: str | None) -> bytes:
    """The boundary of a `multipart/form-data` Content-Type; BadUpload for anything else."""
    media, options = parse_options_header(content_type)
    boundary = options.get(b"boundary", b"")
    if media != b"multipart/form-data" or not 0 < len(boundary) <= MAX_BOUNDARY_CHARS:
        raise BadUpload("the body must be multipart/form-data with a 'file' part")
    return boundary


def safe_filename(raw: str | None) -> str:
    """The base name of what the client called the file; '' when nothing usable is left."""
    name = PurePosixPath((raw or "").replace("\\", "/")).name.strip()
    return "" if name in ("", ".", "..") or "\x00" in name else name


def _disposition(raw: bytes | None) -> tuple[str | None, str | None]:
    """(name, filename) of a part's Content-Disposition; clients send both as UTF-8."""
    if raw is None:
        return None, None
    _, options = parse_options_header(raw.decode("latin-1"))  # latin-1 keeps the raw bytes as they are
    name, filename = options.get(b"name"), options.get(b"filename")
    return (
        name.decode("utf-8", errors="replace") if name is not None else None,
        filename.decode("utf-8", errors="replace") if filename is not None else None,
    )


class _Parts:
    """The parser's callbacks: the first `file` part's bytes go to `target`; the rest is counted and dropped."""

    def __init__(self, target: BinaryIO, limit: int) -> None:
        self.target = target
        self.limit = limit
        self.parts = 0
        self.headers = 0
        self.header_bytes = 0
        self.field = bytearray()
        self.value = bytearray()
        self.disposition: bytes | None = None
        self.keeping = False
        self.saved: Saved | None = None
        self.ended = False

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_part_begin": self.on_part_begin,
            "on_header_begin": self.on_header_begin,
            "on_header_field": self.on_header_field,
            "on_header_value": self.on_header_value,
            "on_header_end": self.on_header_end,
            "on_headers_finished": self.on_headers_finished,
            "on_part_data": self.on_part_data,
            "on_part_end": self.on_part_end,
            "on_end": self.on_end,
        }

    def on_part_begin(self) -> None:
        self.parts += 1
        if self.parts > MAX_PARTS:
            raise BadUpload(f"more than {MAX_PARTS} multipart parts")
        self.headers = self.header_bytes = 0
        self.disposition = None

    def on_header_begin(self) -> None:
        self.headers += 1
        if self.headers > MAX_PART_HEADERS:
            raise BadUpload(f"a multipart part has more than {MAX_PART_HEADERS} headers")
        self.field.clear()
        self.value.clear()

    def _header_data(self, into: bytearray, data: bytes, start: int, end: int) -> None:
        self.header_bytes += end - start
        if self.header_bytes > MAX_HEADER_BYTES:
            raise BadUpload("a multipart part's headers are too long")
        into += data[start:end]

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_data(self.field, data, start, end)

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._header_data(self.value, data, start, end)

    def on_header_end(self) -> None:
        if self.field.strip().lower() == b"content-disposition":
            self.disposition = bytes(self.value)

    def on_headers_finished(self) -> None:
        name, filename = _disposition(self.disposition)
        self.keeping = self.saved is None and name == "file"
        if self.keeping:
            self.saved = Saved(safe_filename(filename), 0)

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if not self.keeping or self.saved is None:
            return
        self.saved.size += end - start
        if self.saved.size > self.limit:
            raise TooLarge()
        self.target.write(memoryview(data)[start:end])

    def on_part_end(self) -> None:
        self.keeping = False

    def on_end(self) -> None:
        self.ended = True


async def save_file_part(
    chunks: AsyncIterator[bytes], content_type: str | None, target: BinaryIO, limit: int, overhead: int = 1024 * 1024
) -> Saved:
    """Write the `file` part's bytes to `target`; returns its client-given name and size.

    Reading stops at the closing delimiter, or at once on TooLarge or BadUpload.
    """
    parts = _Parts(target, limit)
    parser = MultipartParser(boundary_of(content_type), parts.callbacks())
    total = 0
    async for chunk in chunks:
        total += len(chunk)
        if total > limit + overhead:
            raise TooLarge()
        try:
            await asyncio.to_thread(parser.write, chunk)  # the file part is written as it parses: off the loop
        except FormParserError as exc:
            raise BadUpload(f"the body is not valid multipart/form-data ({exc})") from None
        if parts.ended:
            break
    if not parts.ended:
        raise BadUpload("the multipart body ends early" if parts.parts else "no multipart boundary found in the body")
    if parts.saved is None:
        raise BadUpload("the multipart body has no 'file' part")
    return parts.saved
