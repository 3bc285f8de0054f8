"""The state store in Redis (`state.store: redis`): what replicas share, and what survives a restart.

Same contract as `MemoryStore`: JSON values, a time to live on every entry,
and a bound per namespace (the key up to its first `:`), so a flood of one
kind of entry never evicts another kind. Each namespace keeps an index (a
sorted set of its keys by expiry); a write past the bound drops the entries
closest to expiring, which, since use extends an entry's life, are the least
recently used ones. Writes, bounds and token buckets are Lua scripts, so each
is one atomic round trip whatever the number of replicas.

Redis being unreachable is not a bug of ours: every operation turns it into
a `GatewayError` (upstream_unavailable, retry in a second) that each front
answers in its own protocol.
"""

from __future__ import annotations

from typing import Any

import orjson
import redis.asyncio as redis
import structlog
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisError

from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.state import bucket_ttl, namespace_of

log = structlog.get_logger("toolplex.state")

SOCKET_TIMEOUT_S = 2.0  # one command; a Redis slower than this is treated as unreachable
RETRIES = 2  # per command, after the first try (exponential backoff, capped below)
UNREACHABLE_RETRY_MS = 1000

# KEYS: entry, namespace index. ARGV: value, ttl ms, cap, only-if-absent (1/0). Returns 1 if written.
_WRITE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
if ARGV[4] == '1' then
  if not redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl, 'NX') then return 0 end
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
end
redis.call('ZADD', KEYS[2], now + ttl, KEYS[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[3])
if over > 0 then
  local oldest = redis.call('ZRANGE', KEYS[2], 0, over)
  local dropped = 0
  for _, key in ipairs(oldest) do
    if dropped < over and key ~= KEYS[1] then
      redis.call('DEL', key)
      redis.call('ZREM', KEYS[2], key)
      dropped = dropped + 1
    end
  end
end
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
"""

# KEYS: entry, namespace index. ARGV: ttl ms. Returns 1 if the entry exists (its life extended).
_TOUCH = """
if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 0 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[2], 'XX', now + tonumber(ARGV[1]), KEYS[1])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[2], ARGV[1]) end
return 1
"""

# KEYS: bucket. ARGV: rate per second, burst, ttl ms. Returns 0 when a token was taken, else the wait in µs.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'stamp')
local tokens = tonumber(state[1]) or burst
local stamp = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - stamp) * rate)
local wait = 0
if tokens < 1 then
  wait = math.ceil((1 - tokens) / rate * 1000000)
else
  tokens = tokens - 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'stamp', tostring(now))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return wait
"""


def unreachable(exc: Exception) -> GatewayError:
    """What a caller is told when the shared store cannot answer (never a traceback)."""
    return GatewayError(
        Failure(
            kind=ErrorKind.UPSTREAM_UNAVAILABLE,
            message="The gateway's state store is unreachable; try again shortly",
            developer_message=f"Redis: {type(exc).__name__}",
            can_retry=True,
            retry_after_ms=UNREACHABLE_RETRY_MS,
        )
    )


class RedisStore:
    """`StateStore` over one Redis database; see the module docstring."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "toolplex:",
        max_entries: int = 100_000,
        caps: dict[str, int] | None = None,
        client: redis.Redis | None = None,
    ) -> None:
        self.url = url
        self.prefix = prefix
        self._max = max_entries
        self._caps = dict(caps or {})
        self._redis = client or redis.Redis.from_url(
            url,
            socket_timeout=SOCKET_TIMEOUT_S,
            socket_connect_timeout=SOCKET_TIMEOUT_S,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), RETRIES),
            retry_on_error=[ConnectionError, TimeoutError],
            health_check_interval=30,
        )
        self._write = self._redis.register_script(_WRITE)
        self._touch = self._redis.register_script(_TOUCH)
        self._take = self._redis.register_script(_TAKE)

    def cap(self, namespace: str) -> int:
        return self._caps.get(namespace, self._max)

    def _key(self, key: str) -> str:
        return self.prefix + key

    def _index(self, key: str) -> str:
        return f"{self.prefix}index:{namespace_of(key)}"

    async def ping(self) -> None:
        """Raise `GatewayError` when Redis does not answer (start-up and readiness ask this)."""
        try:
            await self._redis.ping()
        except (RedisError, OSError) as exc:
            raise unreachable(exc) from None

    async def get(self, key: str) -> Any | None:
        try:
            raw = await self._redis.get(self._key(key))
        except (RedisError, OSError) as exc:
            raise unreachable(exc) from None
        return None if raw is None else orjson.loads(raw)

    async def _put(self, key: str, value: Any, ttl: float, *, only_if_absent: bool) -> bool:
        encoded = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
        ttl_ms = max(1, int(ttl * 1000))
        keys = [self._key(key), self._index(key)]
        args = [encoded, ttl_ms, self.cap(namespace_of(key)), 1 if only_if_absent else 0]
        try:
            return bool(await self._write(keys=keys, args=args))
        except (RedisError, OSError) as exc:
            raise unreachable(exc) from None

    async def set(self, key: str, value: Any, ttl: float) -> None:
        await self._put(key, value, ttl, only_if_absent=False)

    async def add(self, key: str, value: Any, ttl: float) -> bool:
        return await self._put(key, value, ttl, only_if_absent=True)

    async def delete(self, key: str) -> None:
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(self._key(key))
                pipe.zrem(self._index(key), self._key(key))
                await pipe.execute()
        except (RedisError, OSError) as exc:
            raise unreachable(exc) from None

    async def touch(self, key: str, ttl: float) -> bool:
        try:
            touched = await self._touch(keys=[self._key(key), self._index(key)], args=[max(1, int(ttl * 1000))])
        except (RedisError, OSError) as exc:
            raise unreachable(exc) from None
        return bool(touched)

    async def take(self, key: str, rate: float, burst: float) -> float:
        ttl_ms = max(1, int(bucket_ttl(rate, burst) * 1000))
        try:
            wait_us = await self._take(keys=[self._key(key)], args=[repr(rate), repr(burst), ttl_ms])
        except (RedisError, OSError) as exc:
            raise unreachable(exc) from None
        return int(wait_us) / 1_000_000

    async def count(self, namespace: str) -> int:
        """Entries of one namespace now (its index, expired ones included until the next write)."""
        try:
            return int(await self._redis.zcard(f"{self.prefix}index:{namespace}"))
        except (RedisError, OSError) as exc:
            raise unreachable(exc) from None

    async def close(self) -> None:
        try:
            await self._redis.aclose()
        except (RedisError, OSError):  # closing a connection that is already gone
            log.debug("state_store_close_failed")
