"""Sessions over the state store: unguessable ids, idle expiry, owned entries forgotten on release."""

from __future__ import annotations

import pytest

import gateway.state
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
    registry = SessionRegistry(MemoryStore(), idle_s=60)
    ids = {(await registry.create("toolserver")).id for _ in range(200)}
    assert len(ids) == 200
    for session_id in ids:
        # 43 URL-safe base64 characters carry 256 random bits (>= 128 required).
        assert len(session_id) == 43
        assert registry.well_formed(session_id)


async def test_idle_sessions_expire_and_use_keeps_them_alive(clock: FakeClock) -> None:
    registry = SessionRegistry(MemoryStore(), idle_s=60)
    session = await registry.create("toolserver")
    clock.now += 50
    assert await registry.get(session.id) is not None  # used: the idle timer restarts
    clock.now += 50
    assert await registry.get(session.id) is not None
    clock.now += 61
    assert await registry.get(session.id) is None


async def test_release_forgets_the_session_and_what_it_owned() -> None:
    store = MemoryStore()
    registry = SessionRegistry(store, idle_s=60)
    session = await registry.create("toolserver")
    await store.set("handle:1", {"x": 1}, 60)
    await store.set("handle:2", {"x": 2}, 60)
    await registry.own(session.id, "handle:1")
    await registry.own(session.id, "handle:2")
    await registry.disown(session.id, "handle:2")
    released = await registry.release(session.id)
    assert released is not None and released.owned == ["handle:1"]
    assert await store.get("handle:1") is None
    assert await store.get("handle:2") == {"x": 2}  # disowned: not the session's to delete
    assert await registry.get(session.id) is None
    assert await registry.release(session.id) is None


@pytest.mark.parametrize("odd", ["", "short", "a" * 200, "bad id with spaces", "../../etc", "id;x=1", "\u00e9" * 20])
async def test_ids_we_never_issue_are_unknown(odd: str) -> None:
    registry = SessionRegistry(MemoryStore(), idle_s=60)
    assert await registry.get(odd) is None
    assert await registry.release(odd) is None
