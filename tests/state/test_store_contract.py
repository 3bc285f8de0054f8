"""The state store contract, held by both stores: the in-memory one and Redis (a real server).

Everything above the store (sessions, idempotency records, 450 handles, rate
limits, replica leases) relies on exactly these semantics, so each test runs
against both.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from gateway.errors import ErrorKind, GatewayError
from gateway.ownership import Shares, StoreFull, owned_key
from gateway.redis_store import RedisStore
from gateway.state import KeptFull, MemoryStore, StateStore
from tests.support import refused_port

DEADLINE_S = 5.0


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest, redis_url: str) -> AsyncIterator[StateStore]:
    caps = {"small": 3, "owned": 8, "pins": 3}
    bound = {"max_bytes": 4000, "shares": Shares(0.25)}  # an owner may hold 2 of "owned"'s 8 entries, 1000 bytes
    if request.param == "memory":
        made: StateStore = MemoryStore(max_entries=1000, caps=caps, **bound)  # type: ignore[arg-type]
    else:
        made = RedisStore(redis_url, prefix=f"test-{secrets.token_hex(4)}:", max_entries=1000, caps=caps, **bound)  # type: ignore[arg-type]
    yield made
    await made.close()


async def until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if await condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def test_values_round_trip_as_json(store: StateStore) -> None:
    value = {"status": "done", "n": 3, "nested": [1, 2.5, None, "x"], "flag": True}
    await store.set("ns:a", value, 60)
    assert await store.get("ns:a") == value
    assert await store.get("ns:missing") is None


async def test_add_creates_only_once(store: StateStore) -> None:
    results = await asyncio.gather(*(store.add("ns:once", {"by": i}, 60) for i in range(8)))
    assert results.count(True) == 1
    assert await store.get("ns:once") == {"by": results.index(True)}


async def test_delete_and_touch(store: StateStore) -> None:
    await store.set("ns:t", {"v": 1}, 60)
    assert await store.touch("ns:t", 60) is True
    await store.delete("ns:t")
    assert await store.get("ns:t") is None
    assert await store.touch("ns:t", 60) is False
    assert await store.add("ns:t", {"v": 2}, 60) is True  # gone means free again


async def test_entries_expire(store: StateStore) -> None:
    await store.set("ns:short", {"v": 1}, 0.05)
    await store.set("ns:long", {"v": 1}, 60)

    async def gone() -> bool:
        return await store.get("ns:short") is None

    await until(gone, "the short-lived entry to expire")
    assert await store.get("ns:long") == {"v": 1}
    assert await store.touch("ns:short", 60) is False


async def test_touch_extends_life(store: StateStore) -> None:
    await store.set("ns:kept", {"v": 1}, 0.3)
    started = time.monotonic()
    while time.monotonic() - started < 0.6:  # touched well within its life, it outlives its first TTL
        assert await store.touch("ns:kept", 0.3) is True
        await asyncio.sleep(0.05)
    assert await store.get("ns:kept") == {"v": 1}


async def test_each_namespace_has_its_own_bound(store: StateStore) -> None:
    await store.set("other:keep", {"v": 0}, 60)
    for index in range(10):
        await store.set(f"small:{index}", {"v": index}, 60 + index)
    held = [i for i in range(10) if await store.get(f"small:{i}") is not None]
    assert len(held) == 3
    assert held == [7, 8, 9]  # the newest stay; the oldest went first
    assert await store.get("other:keep") == {"v": 0}  # another namespace is never evicted


async def test_a_kept_namespace_refuses_a_new_entry_at_its_bounds_rather_than_evict(store: StateStore) -> None:
    """Approved pins: an upstream listing many tools must not push the approved definitions out."""
    for index in range(3):
        await store.set(f"pins:{index}", {"v": index}, 60 + index)
    with pytest.raises(KeptFull) as refused:
        await store.set("pins:new", {"v": 9}, 60)
    assert "'pins' entries are at their bounds (3 entries" in refused.value.failure.message
    with pytest.raises(KeptFull):
        await store.add("pins:new", {"v": 9}, 60)
    assert [await store.get(f"pins:{i}") for i in range(3)] == [{"v": 0}, {"v": 1}, {"v": 2}]
    await store.set("pins:0", {"v": "again"}, 60)  # an entry already held may be rewritten
    assert await store.get("pins:0") == {"v": "again"}
    await store.delete("pins:1")
    await store.set("pins:new", {"v": 9}, 60)  # room again
    for index in range(3):
        await store.delete(f"pins:{index}")
    await store.delete("pins:new")
    await store.set("pins:big0", {"v": "x" * 1800}, 60)
    await store.set("pins:big1", {"v": "x" * 1800}, 60)
    with pytest.raises(KeptFull):  # the namespace's bytes (4000) bound it as well
        await store.set("pins:big2", {"v": "x" * 1800}, 60)
    assert await store.get("pins:big0") == {"v": "x" * 1800}


async def test_a_token_bucket_grants_its_burst_then_says_how_long_to_wait(store: StateStore) -> None:
    waits = [await store.take("rate:p", rate=1.0, burst=3) for _ in range(4)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert 0.5 < waits[3] <= 1.0
    assert await store.take("rate:other", rate=1.0, burst=3) == 0.0  # buckets are separate


async def test_a_bucket_refills_at_its_rate(store: StateStore) -> None:
    assert await store.take("rate:fast", rate=50.0, burst=1) == 0.0
    wait = await store.take("rate:fast", rate=50.0, burst=1)
    assert 0 < wait <= 0.02 + 1e-6

    async def granted() -> bool:
        return await store.take("rate:fast", rate=50.0, burst=1) == 0.0

    await until(granted, "a token to come back")


async def test_concurrent_takes_never_exceed_the_burst(store: StateStore) -> None:
    waits = await asyncio.gather(*(store.take("rate:many", rate=0.01, burst=5) for _ in range(20)))
    assert sum(1 for w in waits if w == 0.0) == 5


async def test_an_unreachable_redis_is_a_clear_retryable_error() -> None:
    store = RedisStore(f"redis://127.0.0.1:{refused_port()}/0", prefix="gone:")
    try:
        for operation in (store.get("ns:a"), store.set("ns:a", {}, 1), store.take("rate:a", 1, 1)):
            with pytest.raises(GatewayError) as caught:
                await operation
            failure = caught.value.failure
            assert failure.kind == ErrorKind.UPSTREAM_UNAVAILABLE
            assert failure.can_retry and failure.retry_after_ms
            assert "state store is unreachable" in failure.message
    finally:
        await store.close()


# ---- entries owned by a principal (gateway.ownership): each owner its share, no one evicted by another ----


async def test_an_owner_over_its_share_loses_only_its_own_oldest_entries(store: StateStore) -> None:
    await store.set(owned_key("owned", "alice", "a1"), {"v": 1}, 60)
    for index in range(10):
        await store.set(owned_key("owned", "bob", f"b{index}"), {"v": index}, 60 + index)
    held = [i for i in range(10) if await store.get(owned_key("owned", "bob", f"b{i}")) is not None]
    assert held == [8, 9]  # bob's share: 2 of 8; his newest stay
    assert await store.get(owned_key("owned", "alice", "a1")) == {"v": 1}  # never evicted for bob


async def test_a_namespace_full_of_other_owners_refuses_rather_than_evicts(store: StateStore) -> None:
    for owner in ("o1", "o2", "o3", "o4"):  # four owners at their share fill the namespace (8)
        for index in range(2):
            await store.set(owned_key("owned", owner, str(index)), {"v": index}, 60)
    with pytest.raises(StoreFull) as refused:
        await store.set(owned_key("owned", "o5", "0"), {"v": 0}, 60)
    assert refused.value.failure.kind == ErrorKind.RATE_LIMITED and refused.value.failure.can_retry
    for owner in ("o1", "o2", "o3", "o4"):
        assert await store.get(owned_key("owned", owner, "1")) == {"v": 1}
    await store.delete(owned_key("owned", "o1", "0"))  # room again: the next one fits
    await store.set(owned_key("owned", "o5", "0"), {"v": 0}, 60)


async def test_an_owner_share_is_also_bounded_in_bytes(store: StateStore) -> None:
    await store.set(owned_key("owned", "alice", "keep"), {"v": "a" * 100}, 60)
    blob = "x" * 400  # an owner's share is 1000 bytes: two of these fit, a third pushes out the oldest
    for index in range(3):
        await store.set(owned_key("owned", "bob", str(index)), {"v": blob}, 60 + index)
    assert await store.get(owned_key("owned", "bob", "0")) is None
    assert await store.get(owned_key("owned", "bob", "2")) == {"v": blob}
    assert await store.get(owned_key("owned", "alice", "keep")) == {"v": "a" * 100}
    with pytest.raises(GatewayError) as refused:
        await store.set(owned_key("owned", "bob", "huge"), {"v": "y" * 2000}, 60)
    assert refused.value.failure.kind == ErrorKind.TOO_LARGE


async def test_an_owner_cannot_be_shifted_by_colons_in_its_name(store: StateStore) -> None:
    await store.set(owned_key("owned", "jwt:a:b", "c"), {"who": "a:b"}, 60)
    assert await store.get(owned_key("owned", "jwt:a", "b:c")) is None


async def test_keys_lists_the_live_keys_of_one_namespace(store: StateStore) -> None:
    await store.set("listed:a", 1, 60)
    await store.set("listed:b", 2, 0.05)
    await store.set(owned_key("listed", "jwt:alice", "s1"), 3, 60)
    await store.set("other:c", 4, 60)
    await until(lambda: _missing(store, "listed:b"), "the short-lived entry to expire")
    assert sorted(await store.keys("listed")) == sorted(["listed:a", owned_key("listed", "jwt:alice", "s1")])
    assert await store.keys("nothing-here") == []
    assert len(await store.keys("listed", limit=1)) == 1


async def test_owners_counts_each_principals_live_entries(store: StateStore) -> None:
    for owner, count in (("alice", 2), ("jwt:b:c", 1)):  # a name with colons, as a JWT subject has
        for n in range(count):
            await store.set(owned_key("owned", owner, f"s{n}"), n, 60)
    await store.set("owned:unowned", 0, 60)
    assert await store.owners("owned") == {"alice": 2, "jwt:b:c": 1}
    await store.delete(owned_key("owned", "jwt:b:c", "s0"))
    assert await store.owners("owned") == {"alice": 2}


async def _missing(store: StateStore, key: str) -> bool:
    return await store.get(key) is None
