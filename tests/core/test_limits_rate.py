"""Rate limits (`limits.rate`): token buckets per principal and per backend, in the state store.

The limiter itself against a real `MemoryStore` (a bucket's state is the
store's; the clock is the store's own, moved by hand where refilling matters),
then the pipeline: where the stage sits, and that with no bucket configured
there is no stage and the store is never asked.
"""

from __future__ import annotations

from typing import Any

import pytest

import gateway.state
from gateway.config import parse_config
from gateway.config.models import BucketSettings
from gateway.errors import ConfigError, ErrorKind, GatewayError
from gateway.limits import Bucket, RateLimiter
from gateway.model import CallContext, Principal
from gateway.state import MemoryStore
from tests.support import BUILTIN_BACKENDS, call_tool, started_gateway

SLOW = Bucket(rate=0.001, burst=2)  # two calls, then one token every 1000 s: nothing refills during a test


class CountingStore(MemoryStore):
    """A MemoryStore that records every bucket asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.taken: list[str] = []

    async def take(self, key: str, rate: float, burst: float) -> float:
        self.taken.append(key)
        return await super().take(key, rate, burst)


class FakeTime:
    """Stands for the `time` module inside gateway.state: a clock moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


async def refused(limiter: RateLimiter, principal: str, backend: str) -> GatewayError:
    with pytest.raises(GatewayError) as raised:
        await limiter.admit(principal, backend)
    return raised.value


# ---- the limiter ----


async def test_each_principal_has_its_own_bucket() -> None:
    limiter = RateLimiter(MemoryStore(), per_principal=SLOW)
    for _ in range(2):
        await limiter.admit("a", "math")
    error = await refused(limiter, "a", "math")
    failure = error.failure
    assert failure.kind is ErrorKind.RATE_LIMITED and failure.can_retry
    assert failure.message.startswith("Caller 'a' is over its rate limit of 0.001 calls/s (burst 2); retry in ")
    assert failure.retry_after_ms is not None and 0 < failure.retry_after_ms <= 1_000_000
    assert failure.developer_message == "limits.rate.per_principal"
    await limiter.admit("b", "math")  # another principal is not held up
    await limiter.admit("b", "text")


async def test_principal_names_cannot_collide_in_the_store() -> None:
    """`a:b` and its quoted form are two principals: names are URL-quoted into the key."""
    store = CountingStore()
    limiter = RateLimiter(store, per_principal=Bucket(rate=0.001, burst=1))
    await limiter.admit("a:b", "x")
    await limiter.admit("a%3Ab", "x")
    await limiter.admit("", "x")  # auth off: everyone is the anonymous principal
    assert store.taken == ["rate:principal:a%3Ab", "rate:principal:a%253Ab", "rate:principal:"]
    assert "This caller is over its rate limit" in (await refused(limiter, "", "x")).failure.message


async def test_a_backend_bucket_is_shared_by_every_principal_and_overrides_win() -> None:
    limiter = RateLimiter(MemoryStore(), per_backend=SLOW, backends={"text": Bucket(rate=0.001, burst=1)})
    await limiter.admit("a", "math")
    await limiter.admit("b", "math")
    error = await refused(limiter, "c", "math")
    assert error.failure.message.startswith("Backend 'math' is over its rate limit of 0.001 calls/s (burst 2)")
    assert error.failure.developer_message == "limits.rate.per_backend"
    await limiter.admit("a", "text")
    error = await refused(limiter, "b", "text")  # its own bucket: one call
    assert error.failure.developer_message == "limits.rate.backends.text"
    await limiter.admit("a", "time")  # every backend has its own bucket


async def test_the_principal_is_asked_first_and_its_token_is_spent_when_the_backend_refuses() -> None:
    store = CountingStore()
    limiter = RateLimiter(store, per_principal=SLOW, per_backend=Bucket(rate=0.001, burst=1))
    await limiter.admit("a", "math")
    assert "Backend 'math'" in (await refused(limiter, "a", "math")).failure.message
    assert store.taken == ["rate:principal:a", "rate:backend:math"] * 2
    assert "Caller 'a'" in (await refused(limiter, "a", "text")).failure.message  # both of a's tokens are gone
    assert store.taken[-1] == "rate:principal:a"  # refused by its own bucket: the backend's is not touched


async def test_a_bucket_refills_after_the_wait_it_announced(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeTime()
    monkeypatch.setattr(gateway.state, "time", clock)  # the store's clock only, not the event loop's
    limiter = RateLimiter(MemoryStore(), per_principal=Bucket(rate=2, burst=3))
    for _ in range(3):
        await limiter.admit("a", "x")
    assert (await refused(limiter, "a", "x")).failure.retry_after_ms == 500  # 2 tokens per second
    clock.now += 0.25
    assert (await refused(limiter, "a", "x")).failure.retry_after_ms == 250  # half a token back
    clock.now += 0.25
    await limiter.admit("a", "x")
    clock.now += 60  # a long quiet spell refills to the burst, no more
    for _ in range(3):
        await limiter.admit("a", "x")
    await refused(limiter, "a", "x")


def test_burst_defaults_to_the_rate_rounded_up() -> None:
    assert Bucket.of(BucketSettings(rate_per_s=2.5)) == Bucket(rate=2.5, burst=3)
    assert Bucket.of(BucketSettings(rate_per_s=0.2)) == Bucket(rate=0.2, burst=1)
    assert Bucket.of(BucketSettings(rate_per_s=10, burst=20)) == Bucket(rate=10, burst=20)


# ---- the configuration ----


def limits_of(yaml: str) -> Any:
    return parse_config(yaml + BUILTIN_BACKENDS, "test.yaml").settings.limits


def test_no_rate_is_configured_by_default() -> None:
    limits = limits_of("")
    assert not limits.rate.enabled and RateLimiter.from_settings(limits, MemoryStore()) is None


def test_the_settings_become_buckets() -> None:
    limits = limits_of(
        "limits:\n  rate:\n    per_principal: {rate_per_s: 10, burst: 20}\n"
        "    per_backend: {rate_per_s: 5}\n    backends: {math: {rate_per_s: 1, burst: 4}}\n"
    )
    limiter = RateLimiter.from_settings(limits, MemoryStore())
    assert limiter is not None
    assert (limiter.per_principal, limiter.per_backend) == (Bucket(10, 20), Bucket(5, 5))
    assert limiter.bucket_of("math") == Bucket(1, 4) and limiter.bucket_of("text") == Bucket(5, 5)


@pytest.mark.parametrize(
    ("yaml", "problem"),
    [
        (
            "limits: {rate: {backends: {nope: {rate_per_s: 1}}}}\n",
            "limits.rate.backends names no configured backend: nope",
        ),
        ("limits: {rate: {per_principal: {rate_per_s: 0}}}\n", "limits.rate.per_principal.rate_per_s: 0 is less than"),
        ("limits: {rate: {per_backend: {rate_per_s: 1, burst: 0}}}\n", "limits.rate.per_backend.burst: 0 is less"),
        ("limits: {rate: {per_backend: {burst: 3}}}\n", "limits.rate.per_backend: 'rate_per_s' is a required property"),
        ("limits: {rate: {per_user: {rate_per_s: 1}}}\n", "limits.rate.per_user: unknown key 'per_user'"),
    ],
)
def test_bad_rate_settings_are_configuration_errors(yaml: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        limits_of(yaml)
    assert any(problem in line for line in raised.value.problems), raised.value.problems


# ---- in the pipeline ----


async def test_without_buckets_there_is_no_stage_and_no_store_call() -> None:
    gateway = await started_gateway(BUILTIN_BACKENDS)
    try:
        store = CountingStore()
        gateway.store = store  # whatever the pipeline would ask, it would ask this one now
        gateway._publish(gateway.catalog)  # a new snapshot, built with the store above
        assert gateway.pipeline.rates is None
        assert "_rate" not in [stage.__name__ for stage in gateway.pipeline.stages]
        for _ in range(5):
            assert (await call_tool(gateway, "Math_Add", {"a": 1, "b": 2})).value == 3
        assert store.taken == []
    finally:
        await gateway.close()


async def test_the_rate_stage_comes_after_permissions_and_before_requirements() -> None:
    config = "limits: {rate: {per_principal: {rate_per_s: 0.001, burst: 1}}}\n" + BUILTIN_BACKENDS
    gateway = await started_gateway(config)
    try:
        names = [stage.__name__ for stage in gateway.pipeline.stages]
        assert "_checks_and_rate" in names  # resolve, permissions, rate, requirements: one stage, in that order
        restricted = Principal(name="restricted", tools=("Math_*",))
        for _ in range(3):  # refused as forbidden, never as rate_limited: no token spent
            outcome = await call_tool(gateway, "Text_WordCount", {"text": "a b"}, context=context_of(restricted))
            assert outcome.error is not None and outcome.error.kind is ErrorKind.FORBIDDEN
        assert (await call_tool(gateway, "Math_Add", {"a": 1, "b": 2}, context=context_of(restricted))).value == 3
        outcome = await call_tool(gateway, "Math_Add", {"a": 1, "b": 2}, context=context_of(restricted))
        assert outcome.error is not None and outcome.error.kind is ErrorKind.RATE_LIMITED
        not_found = await call_tool(gateway, "Math_Nothing", {}, context=context_of(restricted))
        assert not_found.error is not None and not_found.error.kind is ErrorKind.NOT_FOUND  # resolved first
    finally:
        await gateway.close()


async def test_a_reload_applies_new_rates_and_keeps_the_buckets() -> None:
    gateway = await started_gateway(BUILTIN_BACKENDS)
    try:
        assert (await call_tool(gateway, "Math_Add", {"a": 1, "b": 2})).value == 3
        limited = "limits: {rate: {per_backend: {rate_per_s: 0.001, burst: 1}}}\n" + BUILTIN_BACKENDS
        assert await gateway.reload(parse_config(limited, "reloaded.yaml"))
        assert (await call_tool(gateway, "Math_Add", {"a": 1, "b": 2})).value == 3
        outcome = await call_tool(gateway, "Math_Add", {"a": 1, "b": 2})
        assert outcome.error is not None and outcome.error.kind is ErrorKind.RATE_LIMITED
        assert (await call_tool(gateway, "Time_Now", {"timezone": "UTC"})).error is None  # another backend
        assert await gateway.reload(parse_config(BUILTIN_BACKENDS, "unlimited.yaml"))
        assert (await call_tool(gateway, "Math_Add", {"a": 1, "b": 2})).value == 3
    finally:
        await gateway.close()


def context_of(principal: Principal) -> CallContext:
    return CallContext(principal=principal)
