"""A tiny DNS server on loopback, standing in for Docker's embedded DNS (127.0.0.11) in the loopback stack test.

Docker answers a compose service's name with one A record per replica; nginx's `server gateway:8080
resolve` follows that answer. This server does the same for the names it is given, and the answer can
change while nginx runs (a scale-up), which is what `resolve` is there for.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Iterator

TYPE_A = 1
CLASS_IN = 1
MAX_LIFETIME_S = 600.0  # the serving loop ends by itself even if a test forgets to stop it


class LoopbackDNS:
    """Answers A queries for `records` (name -> addresses) on 127.0.0.1 over UDP; other names get NXDOMAIN."""

    def __init__(self, records: dict[str, list[str]], ttl: int = 1) -> None:
        self.records = {name.rstrip(".").lower(): list(addresses) for name, addresses in records.items()}
        self.ttl = ttl
        self.queries = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self.port = int(self._sock.getsockname()[1])
        self._thread = threading.Thread(target=self._serve, name="loopback-dns", daemon=True)

    def set(self, name: str, addresses: list[str]) -> None:
        """Change the answer for `name` (what Docker does when a service is scaled)."""
        with self._lock:
            self.records[name.rstrip(".").lower()] = list(addresses)

    def _serve(self) -> None:
        deadline = time.monotonic() + MAX_LIFETIME_S
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                query, peer = self._sock.recvfrom(512)
            except TimeoutError:
                continue
            except OSError:
                return
            reply = self.answer(query)
            if reply is not None:
                self.queries += 1
                self._sock.sendto(reply, peer)

    def answer(self, query: bytes) -> bytes | None:
        """The reply to one query; None for a datagram that is not a single-question query."""
        if len(query) < 12:
            return None
        ident, flags, qdcount = struct.unpack("!HHH", query[:6])
        if flags & 0x8000 or qdcount != 1:
            return None
        labels: list[str] = []
        offset = 12
        while offset < len(query) and query[offset] != 0:
            length = query[offset]
            if length & 0xC0:  # no compression in a question
                return None
            labels.append(query[offset + 1 : offset + 1 + length].decode("ascii", "replace"))
            offset += 1 + length
        end = offset + 5
        if end > len(query):
            return None
        qtype, _qclass = struct.unpack("!HH", query[offset + 1 : end])
        question = query[12:end]
        name = ".".join(labels).lower()
        with self._lock:
            addresses = self.records.get(name)
        rd = flags & 0x0100
        if addresses is None:
            return struct.pack("!HHHHHH", ident, 0x8000 | 0x0400 | rd | 0x0080 | 3, 1, 0, 0, 0) + question
        answers = addresses if qtype == TYPE_A else []  # AAAA etc.: the name exists, no such record
        header = struct.pack("!HHHHHH", ident, 0x8000 | 0x0400 | rd | 0x0080, 1, len(answers), 0, 0)
        body = b"".join(
            struct.pack("!HHHIH", 0xC00C, TYPE_A, CLASS_IN, self.ttl, 4) + socket.inet_aton(address)
            for address in answers
        )
        return header + question + body

    def __enter__(self) -> LoopbackDNS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()


@contextlib.contextmanager
def loopback_dns(records: dict[str, list[str]]) -> Iterator[LoopbackDNS]:
    with LoopbackDNS(records) as dns:
        yield dns
