"""Sessions over the state store: unguessable ids, idle expiry, owned entries forgotten on release."""

from __future__ import annotations

import pytest

import gateway.state
from gateway.model import Principal
from gateway.ownership import Shares
from gateway.sessions import SessionRegistry
from gateway.state import MemoryStore


class FakeClock:
    """Stands in for the store's clock so that idle expiry is tested without waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(gateway.state, "time", fake)
    return fake


async def test_ids_are_unguessable_and_distinct() -> None:
    registry = SessionRegistry(MemoryStore(), front="toolserver", idle_s=60)
    ids = {(await registry.create(None)).id for _ in range(200)}
    assert len(ids) == 200
    for session_id in ids:
        # 43 URL-safe base64 characters carry 256 random bits (>= 128 required).
        assert len(session_id) == 43
        assert registry.well_formed(session_id)


async def test_idle_sessions_expire_and_use_keeps_them_alive(clock: FakeClock) -> None:
    registry = SessionRegistry(MemoryStore(), front="toolserver", idle_s=60)
    session = await registry.create(None)
    clock.now += 50
    assert await registry.get(session.id, None) is not None  # used: the idle timer restarts
    clock.now += 50
    assert await registry.get(session.id, None) is not None
    clock.now += 61
    assert await registry.get(session.id, None) is None


async def test_release_forgets_the_session_and_what_it_owned() -> None:
    store = MemoryStore()
    registry = SessionRegistry(store, front="toolserver", idle_s=60)
    session = await registry.create(None)
    await store.set("handle:1", {"x": 1}, 60)
    await store.set("handle:2", {"x": 2}, 60)
    await registry.own(session, "handle:1")
    await registry.own(session, "handle:2")
    await registry.disown(session, "handle:2")
    released = await registry.release(session.id, None)
    assert released is not None and released.owned == ["handle:1"]
    assert await store.get("handle:1") is None
    assert await store.get("handle:2") == {"x": 2}  # disowned: not the session's to delete
    assert await registry.get(session.id, None) is None
    assert await registry.release(session.id, None) is None


@pytest.mark.parametrize("odd", ["", "short", "a" * 200, "bad id with spaces", "../../etc", "id;x=1", "\u00e9" * 20])
async def test_ids_we_never_issue_are_unknown(odd: str) -> None:
    registry = SessionRegistry(MemoryStore(), front="toolserver", idle_s=60)
    assert await registry.get(odd, None) is None
    assert await registry.release(odd, None) is None


async def test_a_session_belongs_to_its_principal_and_front() -> None:
    store = MemoryStore()
    toolserver = SessionRegistry(store, front="toolserver", idle_s=60)
    jsonrpc = SessionRegistry(store, front="jsonrpc", idle_s=60)
    alice, bob = Principal("alice"), Principal("bob")
    session = await toolserver.create(alice)
    assert (await toolserver.get(session.id, alice)) is not None
    # Another principal, or no principal, gets exactly what an unknown id gets.
    assert await toolserver.get(session.id, bob) is None
    assert await toolserver.get(session.id, None) is None
    assert await toolserver.release(session.id, bob) is None
    # Another front never sees it, even for the same principal.
    assert await jsonrpc.get(session.id, alice) is None
    assert (await toolserver.release(session.id, alice)) is not None


async def test_each_kind_of_entry_has_its_own_bound() -> None:
    store = MemoryStore(max_entries=5)
    sessions = SessionRegistry(store, front="toolserver", idle_s=60)
    kept = [await sessions.create(None) for _ in range(3)]
    for index in range(50):  # a flood of another kind of entry
        await store.set(f"oxp:call:{index}", {"n": index}, 60)
    assert store.count("oxp") == 5
    for session in kept:
        assert await sessions.get(session.id, None) is not None


async def test_a_principal_creating_sessions_without_end_pushes_out_only_its_own() -> None:
    store = MemoryStore(max_entries=20, shares=Shares(0.25))
    registry = SessionRegistry(store, front="toolserver", idle_s=60)
    alice, bob = Principal("alice"), Principal("bob")
    hers = await registry.create(alice)
    his = [await registry.create(bob) for _ in range(60)]
    assert await registry.get(hers.id, alice) is not None
    kept = [s for s in his if await registry.get(s.id, bob) is not None]
    assert kept == his[-5:]  # bob's share of 20 is 5: his newest
