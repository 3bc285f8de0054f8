"""What a client can make the MCP front keep is bounded in bytes, not only in count (issue 25, finding 6).

Before: one event store per endpoint bounded only in events (10,000), so 2,000 handshake-era calls answered
with a 4 MB error kept ~8 GB; the direct path remembered `_meta` verdicts keyed by the whole `_meta` JSON
(1,024 of any size). Now each session's events count against its principal's share of `max_events` and
`max_event_bytes`, and no memo keeps a key larger than `direct.MAX_KEY_BYTES`.
"""

from __future__ import annotations

import mcp_types as types

from adapters.mcp.server import direct
from adapters.mcp.server.sessions import EventLogs
from gateway.ownership import Shares


def big_answer(request_id: int, size: int) -> types.JSONRPCMessage:
    error = types.ErrorData(code=-32603, message="x" * size)
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


def test_event_logs_are_bounded_in_bytes_whatever_the_count() -> None:
    logs = EventLogs(max_events=10_000, max_bytes=16 * 1024 * 1024, shares=Shares(1.0))
    for index in range(200):  # 200 answers of 1 MB each: 200 MB if kept
        logs.store("alice", f"session-{index % 7}", f"stream-{index}", big_answer(index, 1024 * 1024))
    assert logs.bytes <= 16 * 1024 * 1024
    assert 0 < len(logs) <= 16


def test_one_principal_s_events_never_push_out_another_s() -> None:
    logs = EventLogs(max_events=100, max_bytes=1024 * 1024, shares=Shares(0.25))
    kept = logs.store("alice", "alice-session", "stream-a", big_answer(1, 1000))
    for index in range(500):
        logs.store("bob", f"bob-{index % 3}", f"stream-{index}", big_answer(index, 10_000))
    assert logs._held.bytes_of("bob") <= 1024 * 1024 // 4  # bob's share of the bytes
    assert logs._held.count("alice") == 1  # alice's one event was never pushed out for bob's
    assert kept in logs._logs["alice-session"].by_id


def test_event_ids_are_random() -> None:
    logs = EventLogs(max_events=100, max_bytes=1024 * 1024, shares=Shares(1.0))
    ids = [logs.store("", "s1", "stream", big_answer(i, 10)) for i in range(50)]
    assert len(set(ids)) == 50 and all(len(i) >= 22 for i in ids)  # 128 random bits each
    assert not any(i.isdigit() for i in ids)


async def test_replay_answers_nothing_for_an_id_of_another_session() -> None:
    logs = EventLogs(max_events=100, max_bytes=1024 * 1024, shares=Shares(1.0))
    theirs = logs.store("", "s1", "stream", None)
    logs.store("", "s1", "stream", big_answer(2, 10))
    logs.store("", "s2", "other", None)
    sent: list[object] = []

    async def send(message: object) -> None:
        sent.append(message)

    assert await logs.replay("s2", theirs, send) is None
    assert sent == []
    assert await logs.replay("s1", theirs, send) == "stream"
    assert len(sent) == 1


def test_a_forgotten_session_takes_its_events_with_it() -> None:
    logs = EventLogs(max_events=100, max_bytes=1024 * 1024, shares=Shares(1.0))
    for index in range(10):
        logs.store("alice", "s1", "stream", big_answer(index, 1000))
    assert len(logs) == 10
    logs.forget("s1")
    assert len(logs) == 0 and logs.bytes == 0


def test_the_direct_path_remembers_no_large_client_key() -> None:
    direct._metas.clear()
    big = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "pad": "x" * (direct.MAX_KEY_BYTES + 1)}
    direct._meta_is_valid("2026-07-28", big)
    assert direct._metas == {}
    small = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    direct._meta_is_valid("2026-07-28", small)
    assert len(direct._metas) == 1
    for index in range(direct.MAX_REMEMBERED * 3):
        direct._meta_is_valid("2026-07-28", {**small, "n": index})
    assert len(direct._metas) <= direct.MAX_REMEMBERED
    assert sum(len(key[1]) for key in direct._metas) <= direct.MAX_REMEMBERED * direct.MAX_KEY_BYTES
