"""The state store in Redis (`state.store: redis`): what replicas share, and what survives a restart.

Same contract as `MemoryStore`: JSON values, a time to live on every entry,
and bounds per namespace (the key up to its first `:`) in entries and bytes, so
a flood of one kind of entry never evicts another kind; keys owned by a
principal (`gateway.ownership.owned_key`) are bounded per owner within their
namespace, and a namespace full of other owners' entries refuses a new one.
Each namespace keeps an index (a sorted set of its keys by expiry), a hash of
each entry's size and a hash of bytes per owner's space; each owner's space has
an index of its own. A write past a bound drops the entries closest to
expiring, which, since use extends an entry's life, are the least recently used
ones (an owner's own, or the unowned namespace's); a kept namespace (`gateway.state.KEPT`: pins) evicts
nothing and refuses a new entry at its bounds instead. Writes, bounds and token
buckets are Lua scripts, so each is one atomic round trip whatever the number of
replicas. (The scripts reach an owner's index by name: one Redis server or a
primary, not a cluster.)

Redis being unreachable is not a bug of ours: every operation turns it into
a `GatewayError` (upstream_unavailable, retry in a second) that each front
answers in its own protocol.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
import redis.asyncio as redis
import structlog
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisError

from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.ownership import WHOLE, Shares, StoreFull, owner_of_space, space_of, too_large
from gateway.state import DEFAULT_MAX_BYTES, KEPT, KeptFull, bucket_ttl

log = structlog.get_logger("toolplex.state")

SOCKET_TIMEOUT_S = 2.0  # one command; a Redis slower than this is treated as unreachable
RETRIES = 2  # per command, after the first try (exponential backoff, capped below)
UNREACHABLE_RETRY_MS = 1000

# Shared by the scripts below: what an entry of the namespace is and how it goes.
# KEYS[2] namespace index (zset key -> expiry ms), KEYS[3] sizes (hash key -> bytes),
# KEYS[4] bytes (hash space -> bytes; '' -> the namespace's whole). ARGV[1] the key prefix.
_COMMON = """
local prefix = ARGV[1]
local function space_of(key)
  local rest = string.sub(key, #prefix + 1)
  local colon = string.find(rest, ':', 1, true)
  if not colon then return rest, false end
  local ns = string.sub(rest, 1, colon - 1)
  local tail = string.sub(rest, colon + 1)
  if string.sub(tail, 1, 1) == '~' then
    local second = string.find(tail, ':', 1, true)
    if second then return ns .. ':' .. string.sub(tail, 1, second - 1), true end
  end
  return ns, false
end
local function drop(key)
  local size = tonumber(redis.call('HGET', KEYS[3], key) or '0')
  local space, owned = space_of(key)
  redis.call('DEL', key)
  redis.call('ZREM', KEYS[2], key)
  if owned then redis.call('ZREM', prefix .. 'index:' .. space, key) end
  redis.call('HDEL', KEYS[3], key)
  if size ~= 0 then
    redis.call('HINCRBY', KEYS[4], space, -size)
    redis.call('HINCRBY', KEYS[4], '', -size)
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, key in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 256)) do drop(key) end
"""

# KEYS: entry, namespace index, sizes, bytes, the owner's space index (= the namespace index when unowned).
# ARGV: prefix, value, ttl ms, size, only-if-absent (1/0), namespace cap (entries), namespace cap (bytes),
# space cap (entries), space cap (bytes), kept (1/0: never evict). Returns 1 if written, 0 if present (add), -1 when
# the namespace is full of other owners' entries, -2 when the value alone is over the space's bytes, -3 when a kept
# namespace is at its bounds.
_WRITE = (
    _COMMON
    + """
local ttl = tonumber(ARGV[3])
local size = tonumber(ARGV[4])
local ns_cap, ns_bytes_cap = tonumber(ARGV[6]), tonumber(ARGV[7])
local sp_cap, sp_bytes_cap = tonumber(ARGV[8]), tonumber(ARGV[9])
local space, owned = space_of(KEYS[1])
local exists = redis.call('EXISTS', KEYS[1]) == 1
if ARGV[5] == '1' and exists then return 0 end
if not exists and redis.call('HEXISTS', KEYS[3], KEYS[1]) == 1 then drop(KEYS[1]) end
if size > sp_bytes_cap then return -2 end
local old = tonumber(redis.call('HGET', KEYS[3], KEYS[1]) or '-1')
local grows, extra = 1, size
if old >= 0 then grows, extra = 0, size - old end
local function ns_count() return redis.call('ZCARD', KEYS[2]) end
local function bytes_of(name) return tonumber(redis.call('HGET', KEYS[4], name) or '0') end
if ARGV[10] == '1' and (ns_count() + grows > ns_cap or bytes_of('') + extra > ns_bytes_cap) then return -3 end
if owned then
  local others = redis.call('ZCARD', KEYS[5]) - (old >= 0 and 1 or 0)
  local others_bytes = bytes_of(space) - (old >= 0 and old or 0)
  if ns_count() - others + grows > ns_cap or bytes_of('') - others_bytes + extra > ns_bytes_cap then return -1 end
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
redis.call('ZADD', KEYS[2], now + ttl, KEYS[1])
if owned then redis.call('ZADD', KEYS[5], now + ttl, KEYS[1]) end
redis.call('HSET', KEYS[3], KEYS[1], size)
if extra ~= 0 then
  redis.call('HINCRBY', KEYS[4], space, extra)
  redis.call('HINCRBY', KEYS[4], '', extra)
end
local cap, bytes_cap = ns_cap, ns_bytes_cap
if owned then cap, bytes_cap = sp_cap, sp_bytes_cap end
for _ = 1, 10000 do
  local count = redis.call('ZCARD', KEYS[5])
  local over = count > cap or bytes_of(space) > bytes_cap or ns_count() > ns_cap or bytes_of('') > ns_bytes_cap
  if not over then break end
  local victim = nil
  for _, key in ipairs(redis.call('ZRANGE', KEYS[5], 0, 1)) do
    if key ~= KEYS[1] and victim == nil then victim = key end
  end
  if victim == nil then break end
  drop(victim)
end
for _, key in ipairs({KEYS[2], KEYS[3], KEYS[4], KEYS[5]}) do
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
return 1
"""
)

# KEYS: entry, namespace index, sizes, bytes, space index. ARGV: prefix, ttl ms. Returns 1 if the entry exists.
_TOUCH = (
    _COMMON
    + """
local ttl = tonumber(ARGV[2])
if redis.call('PEXPIRE', KEYS[1], ttl) == 0 then return 0 end
redis.call('ZADD', KEYS[2], 'XX', now + ttl, KEYS[1])
redis.call('ZADD', KEYS[5], 'XX', now + ttl, KEYS[1])
for _, key in ipairs({KEYS[2], KEYS[3], KEYS[4], KEYS[5]}) do
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
return 1
"""
)

# KEYS: entry, namespace index, sizes, bytes. ARGV: prefix.
_DELETE = (
    _COMMON
    + """
drop(KEYS[1])
return 1
"""
)

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
        max_bytes: int = DEFAULT_MAX_BYTES,
        shares: Shares | None = None,
        kept: frozenset[str] = KEPT,
    ) -> None:
        self.url = url
        self.kept = kept
        self.prefix = prefix
        self._max = max_entries
        self.max_bytes = max_bytes
        self.shares = shares if shares is not None else WHOLE
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
        self._delete = self._redis.register_script(_DELETE)
        self._take = self._redis.register_script(_TAKE)

    def cap(self, namespace: str) -> int:
        return self._caps.get(namespace, self._max)

    def _key(self, key: str) -> str:
        return self.prefix + key

    def _keys(self, key: str) -> list[str]:
        """The entry, its namespace's index, sizes and bytes, and its owner's space index (the namespace's
        index for an unowned key): what the scripts read and write."""
        namespace, owned = space_of(key)
        index = f"{self.prefix}index:{namespace}"
        space = f"{self.prefix}index:{owned}" if owned else index
        return [self._key(key), index, f"{self.prefix}sizes:{namespace}", f"{self.prefix}bytes:{namespace}", space]

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
        namespace, owned = space_of(key)
        cap = self.cap(namespace)
        space_cap, space_bytes = (
            (self.shares.of(cap), self.shares.of(self.max_bytes)) if owned else (cap, self.max_bytes)
        )
        args = [
            self.prefix,
            encoded,
            ttl_ms,
            len(encoded),
            1 if only_if_absent else 0,
            cap,
            self.max_bytes,
            space_cap,
            space_bytes,
            1 if namespace in self.kept else 0,
        ]
        try:
            written = int(await self._write(keys=self._keys(key), args=args))
        except (RedisError, OSError) as exc:
            raise unreachable(exc) from None
        if written == -1:
            raise StoreFull(f"entries of kind {namespace!r} in the state store", cap)
        if written == -3:
            raise KeptFull(namespace, cap, self.max_bytes)
        if written == -2:
            raise too_large(f"state entries ({namespace})", len(encoded), space_bytes)
        return written == 1

    async def set(self, key: str, value: Any, ttl: float) -> None:
        await self._put(key, value, ttl, only_if_absent=False)

    async def add(self, key: str, value: Any, ttl: float) -> bool:
        return await self._put(key, value, ttl, only_if_absent=True)

    async def delete(self, key: str) -> None:
        try:
            await self._delete(keys=self._keys(key)[:4], args=[self.prefix])
        except (RedisError, OSError) as exc:
            raise unreachable(exc) from None

    async def touch(self, key: str, ttl: float) -> bool:
        try:
            touched = await self._touch(keys=self._keys(key), args=[self.prefix, max(1, int(ttl * 1000))])
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

    async def bytes(self, namespace: str) -> int:
        """Bytes of one namespace's entries now (as JSON)."""
        try:
            return int(await self._redis.hget(f"{self.prefix}bytes:{namespace}", "") or 0)
        except (RedisError, OSError) as exc:
            raise unreachable(exc) from None

    async def count(self, namespace: str) -> int:
        """Entries of one namespace now (its index, expired ones included until the next write)."""
        try:
            return int(await self._redis.zcard(f"{self.prefix}index:{namespace}"))
        except (RedisError, OSError) as exc:
            raise unreachable(exc) from None

    async def keys(self, namespace: str, limit: int = 10_000) -> list[str]:
        """Live keys from the namespace's index (its scores are expiry times, in Redis' clock; ours is close)."""
        now_ms = int(time.time() * 1000)
        try:
            raw = await self._redis.zrangebyscore(
                f"{self.prefix}index:{namespace}", f"({now_ms}", "+inf", start=0, num=limit
            )
        except (RedisError, OSError) as exc:
            raise unreachable(exc) from None
        cut = len(self.prefix)
        return [(k.decode() if isinstance(k, bytes) else k)[cut:] for k in raw]

    async def owners(self, namespace: str) -> dict[str, int]:
        """Each owner's space is in the namespace's bytes hash; its index counts its live entries."""
        now_ms = int(time.time() * 1000)
        try:
            spaces = [
                s.decode() if isinstance(s, bytes) else s
                for s in await self._redis.hkeys(f"{self.prefix}bytes:{namespace}")
            ]
            owned = [(space, owner) for space in spaces if (owner := owner_of_space(space)) is not None]
            async with self._redis.pipeline(transaction=False) as pipe:
                for space, _ in owned:
                    pipe.zcount(f"{self.prefix}index:{space}", f"({now_ms}", "+inf")
                counted = await pipe.execute() if owned else []
        except (RedisError, OSError) as exc:
            raise unreachable(exc) from None
        return {owner: int(n) for (_, owner), n in zip(owned, counted, strict=True) if int(n)}

    async def close(self) -> None:
        try:
            await self._redis.aclose()
        except (RedisError, OSError):  # closing a connection that is already gone
            log.debug("state_store_close_failed")
