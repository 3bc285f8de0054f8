"""The drivers of the cross-caller matrix (tests/security/test_cross_caller_matrix.py).

One driver per (front, stateful feature). Alice owns some state; Bob, another principal, goes for it:

- `create(env)` makes Alice's state and answers a `Ref`: the ids it is known by (`ids`), the text of
  Alice's that must never reach Bob (`secrets`), and what `intact` needs (`keep`);
- `attempts` are Bob's requests, each aimed at one id of the `Ref` (`key`): Alice's very id ("id"), or
  one guessed from it or from nothing ("guess"). The test sends each twice, once at Alice's id and once
  at the same id of `unknown(ref)` (a fresh `Ref`, every id random, never issued): the two answers must
  have the same shape (status, kind, body with every id of its own `Ref` and the volatile fields masked),
  and Bob's must hold none of Alice's secrets;
- `flood(env)` makes Bob's own entries, several times the bound of the store the feature lives in, and
  checks the flood really filled Bob's share (his own first entry is gone, or his last ones refused);
- `intact(env, ref)` proves Alice's state is still there and still works; `cleanup` lets it go.

`Front`s speak the six fronts: ToolServerNode (`/execute_tool`, cookie sessions), JSON-RPC (`/rpc`,
`context.sessionId`), OpenTool (`/opentool/call`), OXP (`/tools/call`), MCP at 2025-11-25 (sessions) and
MCP at 2026-07-28 (stateless), each as raw HTTP (the exact answer matters: it is what is compared).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import secrets
import string
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.cookiejar import DefaultCookiePolicy
from typing import Any

import httpx

ALICE_KEY = f"alice-{secrets.token_hex(12)}"
BOB_KEY = f"bob-{secrets.token_hex(12)}"
KEYS = {"alice": ALICE_KEY, "bob": BOB_KEY}

# The bounds the gateways are configured with (test_cross_caller_matrix.py writes them into the YAML).
SHARE = 0.25  # limits.principal_share (its default): each principal's share of every bound
STATE_MAX_ENTRIES = 40  # state.max_entries: per namespace (ToolServerNode sessions, 450 handles, OXP call records)
MAX_WORKSPACES = 8  # workspaces.max_workspaces
MCP_MAX_SESSIONS = 8  # fronts.mcp.max_sessions
MCP_MAX_EVENTS = 40  # fronts.mcp.max_events
CACHE_MAX_ENTRIES = 8  # cache.max_entries of the cached backends
OXP_MAX_RECORDS = 8  # fronts.oxp.retention_max_entries
MAX_HELD_CALLS = 4  # max_held_calls of the handshake-era MCP backend
NODE_MAX_SESSIONS = 8  # max_sessions of the toolserver backend
CONTINUATIONS = NODE_MAX_SESSIONS * 10  # the toolserver backend's pending continuations (10 per session)
FLOOD_TIMES = 3  # a flood makes this many times the bound of Bob's own entries
TASK_FLOOD = 12  # Bob's tasks in a flood (the gateway keeps no task: no bound of its own to exceed)
FOLLOW = 20  # a call slower than a front's patience is collected, at most this many times


def share(bound: int) -> int:
    return max(1, math.floor(bound * SHARE))


WAIT_S = 20.0  # bound on every request
STREAM_S = 3.0  # a GET stream that says nothing for this long is read no further
MCP_HANDSHAKE = "2025-11-25"
MCP_MODERN = "2026-07-28"
BOTH = "application/json, text/event-stream"
TASKS = "io.modelcontextprotocol/tasks"
HELD_PREFIX = "toolplex-held."
COLLECT = "Toolplex_collect_result"
RELAY = "Toolplex_continue_node"  # the toolserver backend's relay of an upstream 450 (backend `node`)
URLSAFE = string.ascii_letters + string.digits + "-_"
# Fields whose values differ from one answer to the next whoever asks (masked before answers are compared).
VOLATILE = frozenset(
    {
        *("callId", "call_id", "io.toolplex/callId", "duration", "durationMs"),  # each call's own
        *("serial", "node"),  # the run (tests/security/matrix_upstream.py) and upstream node that answered
        *("iso", "unix"),  # the time (Time_Now), new on each run
        *("createdAt", "lastUpdatedAt"),  # a task's times
        "id",  # the JSON-RPC request id echoed (each MCP request has its own)
    }
)


@dataclass
class Env:
    """The gateways under test and one HTTP client that keeps no cookies (every request names its session)."""

    main: str  # local workspaces, 450 handles, call ids, caches, every MCP feature
    nodes: str  # the ToolServerNode front passing files through to a `toolserver` backend (a Manager double)
    http: httpx.Client


def client() -> httpx.Client:
    http = httpx.Client(timeout=WAIT_S, limits=httpx.Limits(max_connections=64, max_keepalive_connections=32))
    http.cookies.jar.set_policy(DefaultCookiePolicy(allowed_domains=[]))  # a Set-Cookie is read, never kept
    return http


def auth(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[who]}"}


def parallel(work: Callable[[Any], Any], items: Iterable[Any], workers: int = 8) -> list[Any]:
    """`work` over `items` on a few threads (the HTTP client is thread-safe); results in order."""
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(work, items))


# ---- answers, and what may differ between two of them ----


@dataclass
class Answer:
    """What one request was answered: status, kind of body, the body (JSON, SSE messages, a zip's names),
    and all it said as text (a zip's members decompressed), for the leak check."""

    status: int
    kind: str
    body: Any
    text: str


def sse_messages(text: str) -> list[Any]:
    """The JSON messages of an SSE body (events without data, such as priming events, left out)."""
    found = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in block.split("\n") if line.startswith("data:"))
        if data.strip():
            try:
                found.append(json.loads(data))
            except ValueError:
                found.append(data)
    return found


def sse_ids(text: str) -> list[str]:
    return [line[3:].strip() for line in text.replace("\r\n", "\n").split("\n") if line.startswith("id:")]


def answer_of(response: httpx.Response, text: str | None = None) -> Answer:
    ctype = response.headers.get("content-type", "").split(";")[0].strip()
    raw = text if text is not None else response.content.decode("utf-8", "replace")
    if ctype == "application/json":
        try:
            return Answer(response.status_code, "json", json.loads(raw), raw)
        except ValueError:
            return Answer(response.status_code, "text", raw, raw)
    if ctype == "text/event-stream":
        return Answer(response.status_code, "sse", sse_messages(raw), raw)
    if ctype == "application/zip":
        with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
            names = sorted(archive.namelist())
            inside = "\n".join(archive.read(name).decode("utf-8", "replace") for name in names)
        return Answer(response.status_code, "zip", names, "\n".join(names) + "\n" + inside)
    return Answer(response.status_code, ctype or "none", raw, raw)


def shape(answer: Answer, ids: Iterable[str]) -> tuple[int, str, Any]:
    """The answer with the ids of its own request masked and the volatile fields blanked: what must not
    tell Alice's id from an unknown one."""
    masks = sorted((i for i in ids if i), key=len, reverse=True)

    def mask(value: Any) -> Any:
        if isinstance(value, str):
            if value[:1] in ("{", "["):  # JSON inside a string (JSON-RPC's `output`): masked as JSON
                with contextlib.suppress(ValueError):
                    return {"<json>": mask(json.loads(value))}
            for i in masks:
                value = value.replace(i, "<id>")
            return value
        if isinstance(value, dict):
            return {k: "<volatile>" if k in VOLATILE else mask(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mask(v) for v in value]
        return value

    return answer.status, answer.kind, mask(answer.body)


def read_stream(
    http: httpx.Client,
    method: str,
    url: str,
    headers: dict[str, str],
    until: Callable[[str], bool] | None = None,
    body: Any = None,
    quiet_s: float = STREAM_S,
) -> Answer:
    """A streamed answer read until it ends, until `until(text so far)`, until it says nothing for `quiet_s`
    (an SSE stream may stay open for what comes next), or for `WAIT_S` in all (keep-alive pings included):
    bounded, whatever the server does."""
    said: list[str] = []
    timeout = httpx.Timeout(WAIT_S, read=quiet_s)
    with http.stream(method, url, headers=headers, json=body, timeout=timeout) as response:
        deadline = time.monotonic() + WAIT_S
        try:
            for chunk in response.iter_text():
                said.append(chunk)
                if (until is not None and until("".join(said))) or time.monotonic() > deadline:
                    break
        except httpx.ReadTimeout:
            pass  # quiet for STREAM_S: it has nothing more to say now
        return answer_of(response, "".join(said))


def values_of(body: Any, key: str) -> list[Any]:
    """Every value of `key` anywhere in a body (JSON inside strings too, as JSON-RPC's `output` holds it)."""
    if isinstance(body, str) and body[:1] in ("{", "["):
        with contextlib.suppress(ValueError):
            return values_of(json.loads(body), key)
    if isinstance(body, dict):
        return [v for k, v in body.items() if k == key] + [x for v in body.values() for x in values_of(v, key)]
    if isinstance(body, list):
        return [x for v in body for x in values_of(v, key)]
    return []


def without(answer: Answer, own: str) -> Answer:
    """The answer with an id of Bob's own (new on each request) masked, so two of his answers compare."""
    text = answer.text.replace(own, "<own>")
    body = json.loads(json.dumps(answer.body).replace(own, "<own>"))
    return Answer(answer.status, answer.kind, body, text)


# ---- ids: fresh ones of a given shape, and guesses ----


def fresh_like(value: str) -> str:
    """A random id of the shape of `value` (its alphabet and length; a known prefix kept)."""
    for prefix in (HELD_PREFIX, "v1.", "ws-"):
        if value.startswith(prefix):
            return prefix + fresh_like(value[len(prefix) :])
    if value and all(c in "0123456789abcdef" for c in value):
        return secrets.token_hex(len(value))[: len(value)]
    return "".join(secrets.choice(URLSAFE) for _ in value)


def neighbour(value: str) -> str:
    """Alice's id with its last character changed: a lookup by prefix or by hash bucket would find hers."""
    alphabet = "0123456789abcdef" if all(c in "0123456789abcdef" for c in value) else URLSAFE
    return value[:-1] + next(c for c in alphabet if c != value[-1])


def shorter(value: str) -> str:
    return value[:-1]


def swapped(value: str) -> str:
    """Alice's id in the other case: a case-insensitive lookup would find hers."""
    return value.swapcase()


def sequential(_value: str) -> str:
    return "1"


def id_bits(value: str) -> float:
    """Bits of an id, at the entropy of its alphabet (hex 4 bits a character, URL-safe base64 6); known
    fixed prefixes count nothing."""
    for prefix in (HELD_PREFIX, "v1."):
        if value.startswith(prefix):
            value = value[len(prefix) :]
    hexadecimal = all(c in "0123456789abcdef" for c in value)
    return len(value) * (4 if hexadecimal else 6)


# ---- the fronts ----


@dataclass
class Called:
    ok: bool
    value: Any
    answer: Answer


class Front:
    """One front as a client speaks it: a tool call, and the session it may carry (its id named by the caller)."""

    name = ""
    context = ""  # `CallContext.front` of its calls: part of a session's key (workspaces, upstream node sessions)
    sessions = False  # the caller names a session on each request

    def open(self, env: Env, base: str, who: str) -> str | None:
        return None

    def close(self, env: Env, base: str, who: str, session: str | None) -> None:
        return None

    @contextlib.contextmanager
    def session_for(self, env: Env, base: str, who: str) -> Iterator[str | None]:
        """A session of `who`'s own for a few requests, let go after (None where the front needs none)."""
        session = self.open(env, base, who) if self.needs_session else None
        try:
            yield session
        finally:
            if session is not None:
                self.close(env, base, who, session)

    needs_session = False  # no request without one (the handshake era)

    def call(
        self, env: Env, base: str, who: str, tool: str, arguments: dict[str, Any], session: str | None = None
    ) -> Called:
        raise NotImplementedError


def with_cookie(headers: dict[str, str], node_id: str | None) -> dict[str, str]:
    return headers if node_id is None else {**headers, "Cookie": f"node_id={node_id}"}


class ToolServerFront(Front):
    name = context = "toolserver"
    sessions = True

    def open(self, env: Env, base: str, who: str) -> str | None:
        answer = env.http.post(f"{base}/get_cookie", headers=auth(who))
        assert answer.status_code == 200, answer.text
        return answer.cookies["node_id"]

    def close(self, env: Env, base: str, who: str, session: str | None) -> None:
        if session is not None:
            env.http.post(f"{base}/release_session", headers=with_cookie(auth(who), session))

    def call(
        self, env: Env, base: str, who: str, tool: str, arguments: dict[str, Any], session: str | None = None
    ) -> Called:
        body = {"tool_name": tool, "arguments": arguments}
        headers = with_cookie(auth(who), session)
        answer = answer_of(env.http.post(f"{base}/execute_tool", json=body, headers=headers))
        for _ in range(FOLLOW):  # slower than the patience (a busy machine): collected, as XAgent does
            if not (answer.status == 450 and answer.body["detail"].get("next_calling") == COLLECT):
                break
            again = {"tool_name": COLLECT, "arguments": answer.body["detail"]["arguments"]}
            answer = answer_of(env.http.post(f"{base}/execute_tool", json=again, headers=headers))
        value = answer.body
        if isinstance(value, dict) and value.get("type") == "simple":
            value = value["data"]
        return Called(answer.status == 200, value, answer)


class JsonRpcFront(Front):
    name, context = "jsonrpc", "jsonrpc"
    sessions = True

    def open(self, env: Env, base: str, who: str) -> str | None:
        return f"s-{secrets.token_hex(16)}"  # the client names its sessions itself

    def call(
        self, env: Env, base: str, who: str, tool: str, arguments: dict[str, Any], session: str | None = None
    ) -> Called:
        params: dict[str, Any] = {"tool": tool, "parameters": arguments}
        if session is not None:
            params["context"] = {"sessionId": session}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": params}
        answer = answer_of(env.http.post(f"{base}/rpc", json=body, headers=auth(who)))
        result = answer.body.get("result") if isinstance(answer.body, dict) else None
        return Called(result is not None, (result or {}).get("metadata", {}).get("value"), answer)


class OpenToolFront(Front):
    name, context = "opentool", "opentool"

    def call(
        self, env: Env, base: str, who: str, tool: str, arguments: dict[str, Any], session: str | None = None
    ) -> Called:
        body = {"jsonrpc": "2.0", "method": tool, "params": arguments, "id": "1"}
        answer = answer_of(env.http.post(f"{base}/opentool/call", json=body, headers=auth(who)))
        ok = answer.status == 200 and isinstance(answer.body, dict) and answer.body.get("error") is None
        value = answer.body.get("result") if ok else None
        if isinstance(value, dict) and set(value) == {"result"}:
            value = value["result"]
        return Called(ok, value, answer)


def pending(answer: Answer) -> bool:
    """An OXP answer saying the call is still running (its call_id collects it)."""
    error = answer.body.get("error") if isinstance(answer.body, dict) else None
    return isinstance(error, dict) and "still running" in str(error.get("message"))


def qualified(tool: str) -> str:
    toolkit, _, name = tool.partition("_")
    return f"{toolkit}.{name}"


class OxpFront(Front):
    name, context = "oxp", "oxp"

    def call(
        self,
        env: Env,
        base: str,
        who: str,
        tool: str,
        arguments: dict[str, Any],
        session: str | None = None,
        call_id: str | None = None,
        follow: bool = True,
    ) -> Called:
        body: dict[str, Any] = {"tool_id": qualified(tool), "input": arguments}
        if call_id is not None:
            body["call_id"] = call_id
        answer = answer_of(env.http.post(f"{base}/tools/call", json=body, headers=auth(who)))
        for _ in range(FOLLOW if follow else 0):  # still running after the patience: collected by its call_id
            if not (isinstance(answer.body, dict) and answer.body.get("success") is False and pending(answer)):
                break
            body["call_id"] = answer.body["call_id"]
            answer = answer_of(env.http.post(f"{base}/tools/call", json=body, headers=auth(who)))
        ok = answer.status == 200 and isinstance(answer.body, dict) and answer.body.get("success") is True
        return Called(ok, answer.body.get("value") if ok else None, answer)


def mcp_result(answer: Answer) -> dict[str, Any]:
    """The JSON-RPC response in an MCP answer (JSON, or the response event of an SSE stream)."""
    messages = answer.body if answer.kind == "sse" else [answer.body]
    for message in messages:
        if isinstance(message, dict) and ("result" in message or "error" in message):
            return message
    return {}


def mcp_value(message: dict[str, Any]) -> Any:
    result = message.get("result")
    if not isinstance(result, dict) or result.get("isError"):
        return None
    if "structuredContent" in result:
        return result["structuredContent"]
    content = result.get("content") or [{}]
    return content[0].get("text")


def request_id() -> str:
    """A JSON-RPC request id of its own (requests in flight on one MCP session must not share one)."""
    return f"r-{secrets.token_hex(6)}"


def handshake_headers(who: str, session: str | None = None, accept: str = BOTH) -> dict[str, str]:
    headers = {**auth(who), "Accept": accept, "MCP-Protocol-Version": MCP_HANDSHAKE}
    if session is not None:
        headers["Mcp-Session-Id"] = session
    return headers


class McpHandshakeFront(Front):
    """MCP at 2025-11-25: `initialize` opens a session (`Mcp-Session-Id`), every request then names it."""

    name, context = "mcp-2025-11-25", "mcp"
    sessions = True
    needs_session = True

    def open(self, env: Env, base: str, who: str) -> str | None:
        params = {
            "protocolVersion": MCP_HANDSHAKE,
            "capabilities": {},
            "clientInfo": {"name": "cross-caller-matrix", "version": "1"},
        }
        body = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": params}
        answer = env.http.post(f"{base}/mcp", json=body, headers=handshake_headers(who))
        assert answer.status_code == 200, answer.text
        session = answer.headers["mcp-session-id"]
        done = env.http.post(
            f"{base}/mcp",
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=handshake_headers(who, session),
        )
        assert done.status_code == 202, done.text
        return session

    def close(self, env: Env, base: str, who: str, session: str | None) -> None:
        if session is not None:
            env.http.delete(f"{base}/mcp", headers=handshake_headers(who, session))

    def post(self, env: Env, base: str, who: str, session: str | None, body: dict[str, Any]) -> Answer:
        headers = handshake_headers(who, session)
        return read_stream(env.http, "POST", f"{base}/mcp", headers, body=body, quiet_s=WAIT_S)

    def call(
        self, env: Env, base: str, who: str, tool: str, arguments: dict[str, Any], session: str | None = None
    ) -> Called:
        if session is None:  # no request without a session: one of the caller's own for this call
            with self.session_for(env, base, who) as own:
                return self.call(env, base, who, tool, arguments, own)
        params = {"name": tool, "arguments": arguments}
        body = {"jsonrpc": "2.0", "id": request_id(), "method": "tools/call", "params": params}
        answer = self.post(env, base, who, session, body)
        value = mcp_value(mcp_result(answer))
        return Called(answer.status == 200 and value is not None, value, answer)


def modern_post(
    env: Env,
    base: str,
    who: str,
    method: str,
    params: dict[str, Any],
    name: str | None = None,
    capabilities: dict[str, Any] | None = None,
) -> Answer:
    """One 2026-07-28 request (the `_meta` envelope, `Mcp-Method`, `Mcp-Name`), always with request id 1."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MCP_MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "cross-caller-matrix", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
    }
    headers = {**auth(who), "Accept": BOTH, "MCP-Protocol-Version": MCP_MODERN, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    body = {"jsonrpc": "2.0", "id": request_id(), "method": method, "params": {**params, "_meta": meta}}
    return read_stream(env.http, "POST", f"{base}/mcp", headers, body=body, quiet_s=WAIT_S)


class McpModernFront(Front):
    """MCP at 2026-07-28: stateless, every request self-contained."""

    name, context = "mcp-2026-07-28", "mcp"

    def call(
        self, env: Env, base: str, who: str, tool: str, arguments: dict[str, Any], session: str | None = None
    ) -> Called:
        answer = modern_post(env, base, who, "tools/call", {"name": tool, "arguments": arguments}, tool)
        value = mcp_value(mcp_result(answer))
        return Called(answer.status == 200 and value is not None, value, answer)


TOOLSERVER, JSONRPC, OPENTOOL, OXP = ToolServerFront(), JsonRpcFront(), OpenToolFront(), OxpFront()
MCP_OLD, MCP_NEW = McpHandshakeFront(), McpModernFront()
FRONTS: tuple[Front, ...] = (TOOLSERVER, JSONRPC, OPENTOOL, OXP, MCP_OLD, MCP_NEW)


# ---- drivers ----


@dataclass
class Ref:
    """Alice's state as Bob might aim at it: its ids, her secrets, and what `intact` checks against."""

    ids: dict[str, str]
    secrets: list[str] = field(default_factory=list)
    keep: dict[str, Any] = field(default_factory=dict)


Send = Callable[[Env, Ref, str], Answer]


@dataclass(frozen=True)
class Attempt:
    """One of Bob's requests at one id of Alice's: `send(env, ref, target)`.

    `how` is "id" (Alice's own id, as it leaked) or "guess" (an id made up, from hers or from nothing);
    `key` names the id of the `Ref` aimed at, `guess` turns it into the guessed one. `hidden` names ids
    that must not show in Bob's answer either (a listing must not name Alice's file)."""

    name: str
    how: str
    send: Send
    key: str
    guess: Callable[[str], str] | None = None
    hidden: tuple[str, ...] = ()

    def target(self, ref: Ref) -> str:
        value = ref.ids[self.key]
        return self.guess(value) if self.guess is not None else value

    @property
    def label(self) -> str:
        guessed = f"-{self.guess.__name__}" if self.guess is not None else ""
        return f"{self.name}-by-{self.how}{guessed}"


class Driver:
    """One (front, feature) of the matrix; see the module docstring."""

    feature = ""
    front: Front
    on_nodes = False  # served by the gateway with the `toolserver` backend
    issued: tuple[str, ...] = ()  # ids the gateway hands out (must be random: >= 128 bits, never twice)
    floods = True  # has a flood of Bob's own entries to try
    attempts: tuple[Attempt, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.feature}@{self.front_label}"

    @property
    def front_label(self) -> str:
        return self.front.name

    def base(self, env: Env) -> str:
        return env.nodes if self.on_nodes else env.main

    def create(self, env: Env) -> Ref:
        raise NotImplementedError

    def unknown(self, ref: Ref) -> Ref:
        """A `Ref` of the same shape nobody was ever given: every id fresh."""
        return Ref({k: fresh_like(v) if v else v for k, v in ref.ids.items()}, [], dict(ref.keep))

    def intact(self, env: Env, ref: Ref) -> None:
        raise NotImplementedError

    def flood(self, env: Env) -> None:
        raise NotImplementedError

    def cleanup(self, env: Env, ref: Ref) -> None:
        return None

    def leaks(self, ref: Ref, attempt: Attempt, answer: Answer) -> list[str]:
        """What of Alice's Bob's answer holds."""
        found = [s for s in ref.secrets if s and s in answer.text]
        return found + [ref.ids[k] for k in attempt.hidden if ref.ids[k] and ref.ids[k] in answer.text]


# -- workspaces: the FileSystemEnv tools, in the call's session workspace or the principal's default one --


def workspace_dir(owner: str, name: str) -> str:
    """The directory name gateway/workspaces.py gives a workspace: Bob can compute Alice's (he cannot reach it)."""
    return "ws-" + hashlib.sha256(f"{owner}\x00{name}".encode()).hexdigest()[:32]


def session_key(front: Front, who: str, session: str | None) -> str:
    return f"{front.context}/{who}/{session}" if session is not None else f"default/{who}"


class WorkspaceDriver(Driver):
    """Alice's file in her workspace (her session's, or her default one), through the FileSystemEnv tools: the
    gateway's own, or (`upstream`) those of another Toolplex behind a `jsonrpc` backend (`Inner_*`), whose
    workspace is chosen by the `sessionId` the backend sends it (see `drivers`)."""

    def __init__(self, front: Front, with_session: bool, upstream: bool = False) -> None:
        self.front = front
        self.with_session = with_session
        self.upstream = upstream
        self.feature = "upstream-workspaces" if upstream else "workspaces"
        self.toolkit = "Inner" if upstream else "FileSystemEnv"
        self.floods = not upstream  # the inner gateway's bound is its own: one principal there (the backend)
        attempts = [
            Attempt("read", "guess", self._read_own, "file"),
            Attempt("write", "guess", self._write_own, "file"),
        ]
        if not upstream:  # the directory the gateway names Alice's workspace (upstream: the inner one's)
            attempts.insert(1, Attempt("read", "guess", self._read_own, "dir", guess=climb))
        if with_session:
            attempts[:0] = [
                Attempt("read", "id", self._read_in, "session"),
                Attempt("write", "id", self._write_in, "session"),
                Attempt("list", "id", self._list_in, "session", hidden=("file",)),
            ]
        self.attempts = tuple(attempts)

    @property
    def front_label(self) -> str:
        return self.front.name + ("" if self.with_session or not self.front.sessions else "-no-session")

    def create(self, env: Env) -> Ref:
        base = self.base(env)
        session = self.front.open(env, base, "alice") if self.with_session else None
        file, content = f"notes-{secrets.token_hex(6)}.txt", f"alice's notes {secrets.token_hex(8)}"
        written = self.front.call(
            env, base, "alice", f"{self.toolkit}_write_to_file", {"filepath": file, "content": content}, session
        )
        assert written.ok, written.answer
        directory = workspace_dir("alice", session_key(self.front, "alice", session))
        ref = Ref({"session": session or "", "file": file, "dir": directory}, [content], {"content": content})
        self.intact(env, ref)
        return ref

    def _read(self, env: Env, session: str | None, path: str) -> Answer:
        args = {"filepath": path}
        return self.front.call(env, self.base(env), "bob", f"{self.toolkit}_read_from_file", args, session).answer

    def _read_in(self, env: Env, ref: Ref, target: str) -> Answer:
        return self._read(env, target, ref.ids["file"])

    def _read_own(self, env: Env, ref: Ref, target: str) -> Answer:
        path = f"../{target}/{ref.ids['file']}" if target.startswith("ws-") else target
        return self._read(env, None, path)

    def _write(self, env: Env, session: str | None, path: str) -> Answer:
        args = {"filepath": path, "content": "bob was here", "truncating": True}
        return self.front.call(env, self.base(env), "bob", f"{self.toolkit}_write_to_file", args, session).answer

    def _write_in(self, env: Env, ref: Ref, target: str) -> Answer:
        return self._write(env, target, ref.ids["file"])

    def _write_own(self, env: Env, ref: Ref, target: str) -> Answer:
        return self._write(env, None, target)

    def _list_in(self, env: Env, ref: Ref, target: str) -> Answer:
        tool = f"{self.toolkit}_print_filesys_struture"
        return self.front.call(env, self.base(env), "bob", tool, {}, target).answer

    def intact(self, env: Env, ref: Ref) -> None:
        session = ref.ids["session"] or None
        args = {"filepath": ref.ids["file"]}
        read = self.front.call(env, self.base(env), "alice", f"{self.toolkit}_read_from_file", args, session)
        assert read.ok and ref.keep["content"] in str(read.value), f"Alice's file is gone or changed: {read.answer}"

    def flood(self, env: Env) -> None:
        """Bob's fresh sessions, each with a file: `FLOOD_TIMES` x max_workspaces workspaces. Through this front
        where it lets a caller name new sessions, else through JSON-RPC's (the workspaces are one store)."""
        front = self.front if self.front in (TOOLSERVER, JSONRPC) else JSONRPC
        base, sessions = self.base(env), []
        try:
            for _ in range(FLOOD_TIMES * MAX_WORKSPACES):  # one after the other: each its newest when written
                sessions.append(front.open(env, base, "bob"))
                args = {"filepath": "flood.txt", "content": f"bob's {sessions[-1]}"}
                written = front.call(env, base, "bob", "FileSystemEnv_write_to_file", args, sessions[-1])
                assert written.ok, written.answer

            def read(session: str | None) -> bool:
                return front.call(
                    env, base, "bob", "FileSystemEnv_read_from_file", {"filepath": "flood.txt"}, session
                ).ok

            kept = share(MAX_WORKSPACES)  # his newest ones; his older ones went, whatever else holds his sessions
            assert read(sessions[-1]) and not read(sessions[-kept - 1]), "Bob's flood stayed within his share"
        finally:
            for session in sessions:
                front.close(env, base, "bob", session)

    def cleanup(self, env: Env, ref: Ref) -> None:
        self.front.close(env, self.base(env), "alice", ref.ids["session"] or None)


# -- the ToolServerNode front's own file endpoints (local workspaces) and their pass-through to a node --


def upload(env: Env, base: str, headers: dict[str, str], name: str, content: bytes) -> httpx.Response:
    return env.http.post(
        f"{base}/upload_file", files={"file": (name, content), "filename": (None, name)}, headers=headers
    )


def download(env: Env, base: str, headers: dict[str, str], name: str) -> httpx.Response:
    return env.http.post(f"{base}/download_file", json={"file_path": name}, headers=headers)


class FilesDriver(Driver):
    """Alice's uploaded file: in her session's workspace (`node_id` cookie) or her default one; in the
    gateway's own workspaces or, `on_nodes`, passed through to her node session of the `toolserver` backend."""

    front = TOOLSERVER

    def __init__(self, on_nodes: bool, with_session: bool) -> None:
        self.on_nodes = on_nodes
        self.with_session = with_session
        self.feature = "file-passthrough" if on_nodes else "workspace-files"
        self.issued = ("node_id",) if with_session else ()
        attempts = [
            Attempt("download", "guess", self._download_own, "file"),
            Attempt("download-in-own-session", "guess", self._download_in_own_session, "file"),
            Attempt("upload", "guess", self._upload_own, "file"),
            Attempt("list", "guess", self._structure, "file", hidden=("file",)),
            Attempt("zip", "guess", self._zip, "file", hidden=("file",)),
        ]
        if not on_nodes:
            attempts.append(Attempt("download", "guess", self._download_own, "dir", guess=climb))
        if with_session:
            attempts[:0] = [
                Attempt("download", "id", self._download_in, "node_id"),
                Attempt("upload", "id", self._upload_in, "node_id"),
                Attempt("evict", "id", self._release, "node_id"),
            ]
        self.attempts = tuple(attempts)

    @property
    def front_label(self) -> str:
        return "toolserver" + ("" if self.with_session else "-no-session")

    def create(self, env: Env) -> Ref:
        base = self.base(env)
        node_id = TOOLSERVER.open(env, base, "alice") if self.with_session else None
        name, content = f"report-{secrets.token_hex(6)}.txt", f"alice's upload {secrets.token_hex(8)}"
        answer = upload(env, base, with_cookie(auth("alice"), node_id), name, content.encode())
        assert answer.status_code == 200, answer.text
        directory = workspace_dir("alice", session_key(TOOLSERVER, "alice", node_id))
        ref = Ref({"node_id": node_id or "", "file": name, "dir": directory}, [content], {"content": content})
        self.intact(env, ref)
        return ref

    def unknown(self, ref: Ref) -> Ref:
        fresh = super().unknown(ref)
        fresh.ids["file"] = f"report-{secrets.token_hex(6)}.txt"
        return fresh

    def _download_in(self, env: Env, ref: Ref, target: str) -> Answer:
        return answer_of(download(env, self.base(env), with_cookie(auth("bob"), target), ref.ids["file"]))

    def _download_own(self, env: Env, ref: Ref, target: str) -> Answer:
        path = f"../{target}/{ref.ids['file']}" if target.startswith("ws-") else target
        return answer_of(download(env, self.base(env), auth("bob"), path))

    def _download_in_own_session(self, env: Env, ref: Ref, target: str) -> Answer:
        base = self.base(env)
        with toolserver_session(env, base, "bob") as own:
            return answer_of(download(env, base, with_cookie(auth("bob"), own), target))

    def _upload_in(self, env: Env, ref: Ref, target: str) -> Answer:
        headers = with_cookie(auth("bob"), target)
        return answer_of(upload(env, self.base(env), headers, ref.ids["file"], b"bob's bytes"))

    def _upload_own(self, env: Env, ref: Ref, target: str) -> Answer:
        return answer_of(upload(env, self.base(env), auth("bob"), target, b"bob's bytes"))

    def _release(self, env: Env, ref: Ref, target: str) -> Answer:
        return answer_of(env.http.post(f"{self.base(env)}/release_session", headers=with_cookie(auth("bob"), target)))

    def _structure(self, env: Env, ref: Ref, target: str) -> Answer:
        return answer_of(env.http.post(f"{self.base(env)}/get_workspace_structure", headers=auth("bob")))

    def _zip(self, env: Env, ref: Ref, target: str) -> Answer:
        return answer_of(env.http.post(f"{self.base(env)}/download_workspace", headers=auth("bob")))

    def intact(self, env: Env, ref: Ref) -> None:
        headers = with_cookie(auth("alice"), ref.ids["node_id"] or None)
        answer = download(env, self.base(env), headers, ref.ids["file"])
        assert (answer.status_code, answer.text) == (200, ref.keep["content"]), (
            f"Alice's file is gone: HTTP {answer.status_code} {answer.text[:200]!r}"
        )

    def flood(self, env: Env) -> None:
        """Bob's fresh sessions, each with an upload: `FLOOD_TIMES` x the bound (workspaces, node sessions)."""
        base, cookies = self.base(env), []
        bound = NODE_MAX_SESSIONS if self.on_nodes else MAX_WORKSPACES
        kept = share(NODE_MAX_SESSIONS - 1) if self.on_nodes else share(MAX_WORKSPACES)  # his newest ones stay
        try:
            for _ in range(FLOOD_TIMES * bound):  # one after the other: each session its newest when used
                cookies.append(str(TOOLSERVER.open(env, base, "bob")))
                answer = upload(env, base, with_cookie(auth("bob"), cookies[-1]), "flood.txt", cookies[-1].encode())
                assert answer.status_code == 200, answer.text

            def holds(node_id: str) -> bool:
                return download(env, base, with_cookie(auth("bob"), node_id), "flood.txt").content == node_id.encode()

            assert holds(cookies[-1]) and not holds(cookies[-kept - 1]), "Bob's flood stayed within his share"
        finally:
            parallel(lambda node_id: TOOLSERVER.close(env, base, "bob", node_id), cookies)

    def cleanup(self, env: Env, ref: Ref) -> None:
        TOOLSERVER.close(env, self.base(env), "alice", ref.ids["node_id"] or None)


def climb(directory: str) -> str:
    """Alice's workspace directory (computed as the gateway names it): the request climbs to it with
    `../<directory>/<her file>`."""
    return directory


@contextlib.contextmanager
def toolserver_session(env: Env, base: str, who: str) -> Iterator[str | None]:
    session = TOOLSERVER.open(env, base, who)
    try:
        yield session
    finally:
        TOOLSERVER.close(env, base, who, session)


# -- the result cache: a backend that forwards the caller's credentials, and one whose entries are shared --


class CacheDriver(Driver):
    """Alice's cached answer of `Echo_Me` (an `http` backend with `forward_authorization: true` and a cache):
    the upstream answers the Authorization it received and a serial number per run."""

    feature = "cache"

    def __init__(self, front: Front) -> None:
        self.front = front
        self.attempts = (Attempt("read", "id", self._read, "tag"),)

    def _me(self, env: Env, who: str, tag: str, session: str | None = None) -> Called:
        return self.front.call(env, self.base(env), who, "Echo_Me", {"tag": tag}, session)

    def create(self, env: Env) -> Ref:
        tag = f"t-{secrets.token_hex(8)}"
        with self.front.session_for(env, self.base(env), "alice") as session:
            first = self._me(env, "alice", tag, session)
        assert first.ok and first.value["auth"] == f"Bearer {ALICE_KEY}", first.answer
        ref = Ref({"tag": tag}, [ALICE_KEY], {"serial": first.value["serial"]})
        self.intact(env, ref)  # cached: the same run's answer again
        return ref

    def _read(self, env: Env, ref: Ref, target: str) -> Answer:
        return self._me(env, "bob", target).answer

    def leaks(self, ref: Ref, attempt: Attempt, answer: Answer) -> list[str]:
        found = super().leaks(ref, attempt, answer)
        if "serial" in ref.keep and ref.keep["serial"] in values_of(answer.body, "serial"):
            found.append(f"Alice's run (serial {ref.keep['serial']})")
        return found

    def intact(self, env: Env, ref: Ref) -> None:
        with self.front.session_for(env, self.base(env), "alice") as session:
            again = self._me(env, "alice", ref.ids["tag"], session)
        assert again.ok and again.value["auth"] == f"Bearer {ALICE_KEY}", again.answer
        assert again.value["serial"] == ref.keep["serial"], f"Alice's cached answer is gone: {again.value}"

    def flood(self, env: Env) -> None:
        tags = [f"flood-{secrets.token_hex(6)}" for _ in range(FLOOD_TIMES * CACHE_MAX_ENTRIES)]
        base = self.base(env)
        with self.front.session_for(env, base, "bob") as session:
            first = self._me(env, "bob", tags[0], session)
            assert first.ok, first.answer
            parallel(lambda tag: self._me(env, "bob", tag, session), tags[1:], workers=4)
            again = self._me(env, "bob", tags[0], session)
            last, last_again = self._me(env, "bob", tags[-1], session), self._me(env, "bob", tags[-1], session)
        assert again.value["serial"] != first.value["serial"], "Bob's flood stayed within his share of the cache"
        assert last.value["serial"] == last_again.value["serial"], "Bob's newest answer is not cached"


class SharedCacheDriver(Driver):
    """Alice's cached `Math_Add` (a backend that forwards nothing of the caller: one entry for everyone, by
    design; owned by the caller whose call made it). Only its eviction is Bob's to try: a flood of his own."""

    feature = "cache-shared-entries"
    front = JSONRPC

    def _add(self, env: Env, who: str, a: int, b: int) -> dict[str, Any]:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tool.execute",
            "params": {"tool": "Math_Add", "parameters": {"a": a, "b": b}},
        }
        answer = env.http.post(f"{self.base(env)}/rpc", json=body, headers=auth(who)).json()
        assert "result" in answer, answer
        return answer["result"]["metadata"]  # type: ignore[no-any-return]

    def create(self, env: Env) -> Ref:
        a, b = secrets.randbelow(10**9), secrets.randbelow(10**9)
        assert self._add(env, "alice", a, b)["cached"] is False
        ref = Ref({}, [], {"a": a, "b": b})
        self.intact(env, ref)
        return ref

    def intact(self, env: Env, ref: Ref) -> None:
        again = self._add(env, "alice", ref.keep["a"], ref.keep["b"])
        assert again["cached"] is True and again["value"] == ref.keep["a"] + ref.keep["b"], again

    def flood(self, env: Env) -> None:
        pairs = [(secrets.randbelow(10**9), -secrets.randbelow(10**9)) for _ in range(FLOOD_TIMES * CACHE_MAX_ENTRIES)]
        assert self._add(env, "bob", *pairs[0])["cached"] is False
        parallel(lambda pair: self._add(env, "bob", *pair), pairs[1:], workers=4)
        assert self._add(env, "bob", *pairs[0])["cached"] is False, "Bob's flood stayed within his share of the cache"
        self._add(env, "bob", *pairs[-1])  # his newest now (the flood's threads end in any order)
        assert self._add(env, "bob", *pairs[-1])["cached"] is True, "Bob's newest answer is not cached"


# -- OXP call ids: idempotency keys scoped to their caller --


class CallIdDriver(Driver):
    """Alice's finished call, recorded under her `call_id` (`Echo_Run`: never cached, a new serial per run)."""

    feature = "call-ids"
    front = OXP
    attempts = ()

    def __init__(self) -> None:
        self.attempts = (
            Attempt("replay", "id", self._replay, "call_id"),
            Attempt("conflict", "id", self._conflict, "call_id"),
        )

    def _run(self, env: Env, who: str, call_id: str, tag: str, sleep: float = 0, follow: bool = True) -> Called:
        args: dict[str, Any] = {"tag": tag} | ({"sleep": sleep} if sleep else {})
        return OXP.call(env, self.base(env), who, "Echo_Run", args, call_id=call_id, follow=follow)

    def create(self, env: Env) -> Ref:
        call_id, tag = secrets.token_hex(16), f"t-{secrets.token_hex(8)}"
        first = self._run(env, "alice", call_id, tag)
        assert first.ok and first.value["auth"] == f"Bearer {ALICE_KEY}", first.answer
        ref = Ref({"call_id": call_id, "tag": tag}, [ALICE_KEY], {"serial": first.value["serial"]})
        self.intact(env, ref)
        return ref

    def _replay(self, env: Env, ref: Ref, target: str) -> Answer:
        return self._run(env, "bob", target, ref.ids["tag"]).answer

    def _conflict(self, env: Env, ref: Ref, target: str) -> Answer:
        return self._run(env, "bob", target, ref.ids["tag"] + "-other").answer

    def leaks(self, ref: Ref, attempt: Attempt, answer: Answer) -> list[str]:
        found = super().leaks(ref, attempt, answer)
        if "serial" in ref.keep and ref.keep["serial"] in values_of(answer.body, "serial"):
            found.append(f"Alice's run (serial {ref.keep['serial']})")
        return found

    def intact(self, env: Env, ref: Ref) -> None:
        again = self._run(env, "alice", ref.ids["call_id"], ref.ids["tag"])
        assert again.ok and again.value["serial"] == ref.keep["serial"], f"Alice's call record is gone: {again.answer}"

    def flood(self, env: Env) -> None:
        calls = [(secrets.token_hex(16), f"flood-{n}") for n in range(FLOOD_TIMES * STATE_MAX_ENTRIES)]
        first = self._run(env, "bob", *calls[0])
        assert first.ok, first.answer
        parallel(lambda call: self._run(env, "bob", *call), calls[1:])
        again = self._run(env, "bob", *calls[0])
        assert again.ok and again.value["serial"] != first.value["serial"], "Bob's flood stayed within his share"
        assert self._run(env, "bob", *calls[-1]).ok


class HopCallIdDriver(Driver):
    """Alice's call recorded under her `call_id` by `main` and, through its `oxp` backend, by another Toolplex
    that sees every caller of `main` as one (`Hop_Now`: the time, new on each run). The id the backend sends
    upstream must be scoped to her: Bob's same `call_id` is a new call there too."""

    feature = "call-ids-upstream"
    front = OXP
    floods = False  # the inner gateway's records are its own, under one principal (the backend)

    def __init__(self) -> None:
        self.attempts = (
            Attempt("replay", "id", self._replay, "call_id"),
            Attempt("conflict", "id", self._conflict, "call_id"),
        )

    def _now(self, env: Env, who: str, call_id: str, zone: str = "UTC") -> Called:
        return OXP.call(env, self.base(env), who, "Hop_Now", {"timezone": zone}, call_id=call_id)

    def create(self, env: Env) -> Ref:
        call_id = secrets.token_hex(16)
        first = self._now(env, "alice", call_id)
        assert first.ok and first.value["iso"], first.answer
        ref = Ref({"call_id": call_id}, [first.value["iso"]], {"iso": first.value["iso"]})
        self.intact(env, ref)
        return ref

    def _replay(self, env: Env, ref: Ref, target: str) -> Answer:
        return self._now(env, "bob", target).answer

    def _conflict(self, env: Env, ref: Ref, target: str) -> Answer:
        return self._now(env, "bob", target, "Europe/Paris").answer

    def intact(self, env: Env, ref: Ref) -> None:
        again = self._now(env, "alice", ref.ids["call_id"])
        assert again.ok and again.value["iso"] == ref.keep["iso"], f"Alice's call record is gone: {again.answer}"


class RunningCallIdDriver(CallIdDriver):
    """Alice's call still running after OXP's patience, under her `call_id`: a retry of hers collects it."""

    feature = "call-ids-running"
    floods = False  # the flood of call ids is CallIdDriver's
    SLEEP_S = 3.0  # longer than OXP's patience (0.5 s)

    def __init__(self) -> None:
        self.attempts = (Attempt("collect", "id", self._collect, "call_id"),)

    def create(self, env: Env) -> Ref:
        call_id, tag = secrets.token_hex(16), f"t-{secrets.token_hex(8)}"
        waiting = self._run(env, "alice", call_id, tag, sleep=self.SLEEP_S, follow=False)
        assert pending(waiting.answer), waiting.answer
        return Ref({"call_id": call_id, "tag": tag}, [ALICE_KEY], {})

    def _collect(self, env: Env, ref: Ref, target: str) -> Answer:
        return self._run(env, "bob", target, ref.ids["tag"], sleep=self.SLEEP_S, follow=False).answer

    def intact(self, env: Env, ref: Ref) -> None:
        done = self._run(env, "alice", ref.ids["call_id"], ref.ids["tag"], sleep=self.SLEEP_S)  # waits for her run
        assert done.ok, f"Alice's running call is gone: {done.answer}"
        assert done.value["auth"] == f"Bearer {ALICE_KEY}" and done.value["tag"] == ref.ids["tag"], done.value


# -- ToolServerNode sessions, and the 450 result handles of their calls --


def collect(env: Env, base: str, who: str, handle: str, node_id: str | None = None) -> Answer:
    body = {"tool_name": COLLECT, "arguments": {"handle": handle}}
    return answer_of(env.http.post(f"{base}/execute_tool", json=body, headers=with_cookie(auth(who), node_id)))


def slow_call(env: Env, base: str, who: str, node_id: str | None, seconds: float) -> str:
    """A Demo_Sleep still running after the front's patience: its 450 handle."""
    body = {"tool_name": "Demo_Sleep", "arguments": {"seconds": seconds}}
    answer = env.http.post(f"{base}/execute_tool", json=body, headers=with_cookie(auth(who), node_id))
    assert answer.status_code == 450, answer.text
    return answer.json()["detail"]["arguments"]["handle"]  # type: ignore[no-any-return]


def still_running_or_done(answer: Answer, handle: str, seconds: float) -> bool:
    """A collect of a handle whose call was not disturbed: 450 with that handle again, or the result."""
    if answer.status == 450:
        return answer.body["detail"]["arguments"]["handle"] == handle  # type: ignore[no-any-return]
    return answer.status == 200 and answer.body == {"type": "simple", "data": {"slept": seconds}}


class ToolServerSessionDriver(Driver):
    """Alice's `node_id` session, with a call of hers running in it."""

    feature = "sessions"
    front = TOOLSERVER
    issued = ("node_id",)
    SLEEP_S = 4.0

    def __init__(self) -> None:
        self.attempts = tuple(
            [
                Attempt("read", "id", self._post("get_available_tools"), "node_id"),
                Attempt("run", "id", self._run, "node_id"),
                Attempt("cancel", "id", self._post("close_session"), "node_id"),
                Attempt("evict", "id", self._post("release_session"), "node_id"),
                Attempt("resume", "id", self._post("reconnect_session"), "node_id"),
                Attempt("evict-beside-own-cookie", "id", self._smuggled(hers_first=False), "node_id"),
                Attempt("evict-before-own-cookie", "id", self._smuggled(hers_first=True), "node_id"),
            ]
            + [Attempt("read", "guess", self._post("get_available_tools"), "node_id", guess=g) for g in GUESSES]
        )

    def _post(self, path: str) -> Send:
        def send(env: Env, ref: Ref, target: str) -> Answer:
            return answer_of(env.http.post(f"{self.base(env)}/{path}", headers=with_cookie(auth("bob"), target)))

        send.__name__ = path
        return send

    def _run(self, env: Env, ref: Ref, target: str) -> Answer:
        return TOOLSERVER.call(env, self.base(env), "bob", "Math_Add", {"a": 1, "b": 2}, target).answer

    def _smuggled(self, hers_first: bool) -> Send:
        """`/release_session` with two `node_id` cookies, Bob's own and the target: whichever one a layer reads,
        only Bob's may be released."""

        def send(env: Env, ref: Ref, target: str) -> Answer:
            base = self.base(env)
            own = str(TOOLSERVER.open(env, base, "bob"))
            pair = (target, own) if hers_first else (own, target)
            headers = {**auth("bob"), "Cookie": f"node_id={pair[0]}; node_id={pair[1]}"}
            try:
                return without(answer_of(env.http.post(f"{base}/release_session", headers=headers)), own)
            finally:
                TOOLSERVER.close(env, base, "bob", own)

        send.__name__ = "release_session"
        return send

    def create(self, env: Env) -> Ref:
        base = self.base(env)
        node_id = TOOLSERVER.open(env, base, "alice")
        handle = slow_call(env, base, "alice", node_id, self.SLEEP_S)
        return Ref({"node_id": str(node_id), "handle": handle}, [], {})

    def intact(self, env: Env, ref: Ref) -> None:
        base, node_id = self.base(env), ref.ids["node_id"]
        added = TOOLSERVER.call(env, base, "alice", "Math_Add", {"a": 1, "b": 2}, node_id)
        assert added.ok and added.value == 3, f"Alice's session is gone: {added.answer}"
        collected = collect(env, base, "alice", ref.ids["handle"], node_id)
        assert still_running_or_done(collected, ref.ids["handle"], self.SLEEP_S), (
            f"Alice's running call was disturbed: {collected}"
        )

    def flood(self, env: Env) -> None:
        base = self.base(env)
        cookies = parallel(lambda _: TOOLSERVER.open(env, base, "bob"), range(FLOOD_TIMES * STATE_MAX_ENTRIES))
        try:
            first = TOOLSERVER.call(env, base, "bob", "Math_Add", {"a": 1, "b": 2}, cookies[0])
            assert first.answer.status == 403, f"Bob's flood stayed within his share: {first.answer}"
            assert TOOLSERVER.call(env, base, "bob", "Math_Add", {"a": 1, "b": 2}, cookies[-1]).ok
        finally:
            parallel(lambda node_id: TOOLSERVER.close(env, base, "bob", node_id), cookies)

    def cleanup(self, env: Env, ref: Ref) -> None:
        TOOLSERVER.close(env, self.base(env), "alice", ref.ids["node_id"])


GUESSES = (neighbour, shorter, swapped, sequential)


class HandleDriver(Driver):
    """Alice's 450 result handle of a call still running, made in her session or without one."""

    feature = "450-handles"
    front = TOOLSERVER
    issued = ("handle",)
    SLEEP_S = 4.0

    def __init__(self, with_session: bool) -> None:
        self.with_session = with_session
        attempts = [
            Attempt("collect", "id", self._collect, "handle"),
            Attempt("collect-in-own-session", "id", self._collect_in_own_session, "handle"),
        ] + [Attempt("collect", "guess", self._collect, "handle", guess=g) for g in (neighbour, shorter, swapped)]
        if with_session:
            attempts += [
                Attempt("collect-with-her-cookie", "id", self._collect_with_cookie, "node_id"),
                Attempt("cancel", "id", self._close, "node_id"),
            ]
        self.attempts = tuple(attempts)

    @property
    def front_label(self) -> str:
        return "toolserver" + ("" if self.with_session else "-no-session")

    def create(self, env: Env) -> Ref:
        base = self.base(env)
        node_id = TOOLSERVER.open(env, base, "alice") if self.with_session else None
        handle = slow_call(env, base, "alice", node_id, self.SLEEP_S)
        return Ref({"handle": handle, "node_id": node_id or ""}, [], {})

    def _collect(self, env: Env, ref: Ref, target: str) -> Answer:
        return collect(env, self.base(env), "bob", target)

    def _collect_in_own_session(self, env: Env, ref: Ref, target: str) -> Answer:
        base = self.base(env)
        with toolserver_session(env, base, "bob") as own:
            return collect(env, base, "bob", target, own)

    def _collect_with_cookie(self, env: Env, ref: Ref, target: str) -> Answer:
        return collect(env, self.base(env), "bob", ref.ids["handle"], target)

    def _close(self, env: Env, ref: Ref, target: str) -> Answer:
        return answer_of(env.http.post(f"{self.base(env)}/close_session", headers=with_cookie(auth("bob"), target)))

    def intact(self, env: Env, ref: Ref) -> None:
        collected = collect(env, self.base(env), "alice", ref.ids["handle"], ref.ids["node_id"] or None)
        assert still_running_or_done(collected, ref.ids["handle"], self.SLEEP_S), (
            f"Alice's handle is gone or her call was disturbed: {collected}"
        )

    def flood(self, env: Env) -> None:
        """Bob's calls still running after the patience, in a session of his: `FLOOD_TIMES` x the store's bound
        of 450 handles (a few threads: the runs end soon after, within Bob's concurrency limit)."""
        base = self.base(env)
        with toolserver_session(env, base, "bob") as own:
            first = slow_call(env, base, "bob", own, 0.5)
            flood = range(FLOOD_TIMES * STATE_MAX_ENTRIES)
            parallel(lambda _: slow_call(env, base, "bob", own, 0.5), flood, workers=12)
            newest = slow_call(env, base, "bob", own, 0.5)  # after every other one: his newest
            again, last = collect(env, base, "bob", first, own), collect(env, base, "bob", newest, own)
        assert again.status == 404, f"Bob's flood stayed within his share: his first handle answers {again}"
        assert last.status in (200, 450), last

    def cleanup(self, env: Env, ref: Ref) -> None:
        TOOLSERVER.close(env, self.base(env), "alice", ref.ids["node_id"] or None)


# -- MCP: handshake-era sessions and their SSE resumption --


class McpSessionDriver(Driver):
    """Alice's 2025-11-25 session (`Mcp-Session-Id`)."""

    feature = "sessions"
    front = MCP_OLD
    issued = ("session",)

    def __init__(self) -> None:
        self.attempts = tuple(
            [
                Attempt("read", "id", self._list, "session"),
                Attempt("run", "id", self._call, "session"),
                Attempt("evict", "id", self._delete, "session"),
                Attempt("resume", "id", self._get, "session"),
                Attempt("evict-beside-own-session", "id", self._smuggled(hers_first=False), "session"),
                Attempt("evict-before-own-session", "id", self._smuggled(hers_first=True), "session"),
            ]
            + [Attempt("read", "guess", self._list, "session", guess=g) for g in (neighbour, shorter, swapped)]
        )

    def _list(self, env: Env, ref: Ref, target: str) -> Answer:
        return MCP_OLD.post(env, self.base(env), "bob", target, {"jsonrpc": "2.0", "id": 7, "method": "tools/list"})

    def _call(self, env: Env, ref: Ref, target: str) -> Answer:
        return MCP_OLD.call(env, self.base(env), "bob", "Math_Add", {"a": 1, "b": 2}, target).answer

    def _delete(self, env: Env, ref: Ref, target: str) -> Answer:
        return answer_of(env.http.delete(f"{self.base(env)}/mcp", headers=handshake_headers("bob", target)))

    def _smuggled(self, hers_first: bool) -> Send:
        """A DELETE naming two sessions (two `Mcp-Session-Id` headers), Bob's own and the target: whichever one
        a layer reads, only Bob's may end."""

        def send(env: Env, ref: Ref, target: str) -> Answer:
            base = self.base(env)
            own = str(MCP_OLD.open(env, base, "bob"))
            pair = (target, own) if hers_first else (own, target)
            headers = [*handshake_headers("bob").items(), *(("Mcp-Session-Id", session) for session in pair)]
            try:
                return without(answer_of(env.http.delete(f"{base}/mcp", headers=headers)), own)
            finally:
                MCP_OLD.close(env, base, "bob", own)

        send.__name__ = "delete"
        return send

    def _get(self, env: Env, ref: Ref, target: str) -> Answer:
        headers = handshake_headers("bob", target, "text/event-stream")
        return read_stream(env.http, "GET", f"{self.base(env)}/mcp", headers)

    def create(self, env: Env) -> Ref:
        session = MCP_OLD.open(env, self.base(env), "alice")
        ref = Ref({"session": str(session)}, [], {})
        self.intact(env, ref)
        return ref

    def intact(self, env: Env, ref: Ref) -> None:
        added = MCP_OLD.call(env, self.base(env), "alice", "Math_Add", {"a": 1, "b": 2}, ref.ids["session"])
        assert added.ok and added.value == "3", f"Alice's session is gone: {added.answer}"

    def flood(self, env: Env) -> None:
        base, opened = self.base(env), []
        try:
            for _ in range(FLOOD_TIMES * MCP_MAX_SESSIONS):
                params = {
                    "protocolVersion": MCP_HANDSHAKE,
                    "capabilities": {},
                    "clientInfo": {"name": "bob", "version": "1"},
                }
                body = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": params}
                answer = env.http.post(f"{base}/mcp", json=body, headers=handshake_headers("bob"))
                if answer.status_code == 200:
                    opened.append(answer.headers["mcp-session-id"])
            assert 1 <= len(opened) <= share(MCP_MAX_SESSIONS), f"Bob opened {len(opened)} sessions"
            MCP_OLD.close(env, base, "alice", MCP_OLD.open(env, base, "alice"))  # Alice may still open one more
        finally:
            for session in opened:
                MCP_OLD.close(env, base, "bob", session)

    def cleanup(self, env: Env, ref: Ref) -> None:
        MCP_OLD.close(env, self.base(env), "alice", ref.ids["session"])


class SseDriver(Driver):
    """Alice's SSE events (a `tools/call` answered on a 2025-11-25 session), kept for `Last-Event-ID` resumption."""

    feature = "sse-resumption"
    front = MCP_OLD
    issued = ("event", "response_event")

    def __init__(self) -> None:
        self.attempts = tuple(
            [
                Attempt("replay", "id", self._replay_own, "event"),
                Attempt("replay-after-response", "id", self._replay_own, "response_event"),
                Attempt("replay-in-her-session", "id", self._replay_hers, "session"),
            ]
            + [Attempt("replay", "guess", self._replay_own, "event", guess=g) for g in GUESSES]
        )

    def create(self, env: Env) -> Ref:
        base = self.base(env)
        session = str(MCP_OLD.open(env, base, "alice"))
        tag, a, b = f"alice-{secrets.token_hex(6)}", 10**9 + secrets.randbelow(10**9), 10**9 + secrets.randbelow(10**9)
        body = {
            "jsonrpc": "2.0",
            "id": tag,
            "method": "tools/call",
            "params": {"name": "Math_Add", "arguments": {"a": a, "b": b}},
        }
        response = MCP_OLD.post(env, base, "alice", session, body)
        ids = sse_ids(response.text)
        assert response.kind == "sse" and len(ids) >= 2 and str(a + b) in response.text, response
        ref = Ref({"session": session, "event": ids[0], "response_event": ids[-1]}, [tag, str(a + b)], {"tag": tag})
        self.intact(env, ref)
        return ref

    def _replay(self, env: Env, session: str, last: str, who: str = "bob") -> Answer:
        headers = {**handshake_headers(who, session, "text/event-stream"), "Last-Event-ID": last}
        return read_stream(env.http, "GET", f"{self.base(env)}/mcp", headers)

    def _replay_own(self, env: Env, ref: Ref, target: str) -> Answer:
        base = self.base(env)
        with MCP_OLD.session_for(env, base, "bob") as own:
            return self._replay(env, str(own), target)

    def _replay_hers(self, env: Env, ref: Ref, target: str) -> Answer:
        return self._replay(env, target, ref.ids["event"])

    def intact(self, env: Env, ref: Ref) -> None:
        headers = {
            **handshake_headers("alice", ref.ids["session"], "text/event-stream"),
            "Last-Event-ID": ref.ids["event"],
        }
        tag = ref.keep["tag"]
        replayed = read_stream(env.http, "GET", f"{self.base(env)}/mcp", headers, until=lambda text: tag in text)
        assert replayed.status == 200 and tag in replayed.text, f"Alice's events are gone: {replayed}"

    def flood(self, env: Env) -> None:
        """Bob's own events: `FLOOD_TIMES` x max_events of them (two per call: its priming event and its answer)."""
        base = self.base(env)
        with MCP_OLD.session_for(env, base, "bob") as own:

            def call(n: int) -> list[str]:
                body = {
                    "jsonrpc": "2.0",
                    "id": f"bob-{n}",
                    "method": "tools/call",
                    "params": {"name": "Math_Add", "arguments": {"a": n, "b": 1}},
                }
                return sse_ids(MCP_OLD.post(env, base, "bob", own, body).text)

            first = call(0)
            parallel(call, range(1, FLOOD_TIMES * MCP_MAX_EVENTS // 2 + 1))
            again = self._replay(env, str(own), first[0])
        assert '"bob-0"' not in again.text, "Bob's flood stayed within his share: his first events are kept"

    def cleanup(self, env: Env, ref: Ref) -> None:
        MCP_OLD.close(env, self.base(env), "alice", ref.ids["session"])


# -- MCP at 2026-07-28: held calls (a handshake-era upstream's question) and the tasks extension --

ASKS = {"elicitation": {}}
HELD_TOOL = "legacy_test_elicitation"  # the reference server's tool that asks its client (backend `legacy`)


def accept(name: str) -> dict[str, Any]:
    return {"q0": {"action": "accept", "content": {"username": name, "email": f"{name}@example.com"}}}


class HeldDriver(Driver):
    """Alice's held call: a 2026-07-28 `tools/call` whose handshake-era upstream asked her a question."""

    feature = "held-calls"
    front = MCP_NEW
    issued = ("state",)

    def __init__(self) -> None:
        self.attempts = tuple(
            [
                Attempt("resume", "id", self._retry(own_arguments=False), "state"),
                Attempt("resume-other-arguments", "id", self._retry(own_arguments=True), "state"),
            ]
            + [
                Attempt("resume", "guess", self._retry(own_arguments=False), "state", guess=g)
                for g in (neighbour, shorter, bare)
            ]
        )

    def _ask(self, env: Env, who: str, message: str, state: str | None = None, answer: Any = None) -> Answer:
        params: dict[str, Any] = {"name": HELD_TOOL, "arguments": {"message": message}}
        if state is not None:
            params |= {"requestState": state, "inputResponses": answer}
        return modern_post(env, self.base(env), who, "tools/call", params, HELD_TOOL, ASKS)

    def _retry(self, own_arguments: bool) -> Send:
        def send(env: Env, ref: Ref, target: str) -> Answer:
            message = "bob's own question" if own_arguments else ref.ids["message"]
            return self._ask(env, "bob", message, target, accept("bob"))

        send.__name__ = "retry"
        return send

    def create(self, env: Env) -> Ref:
        message = f"alice-{secrets.token_hex(6)}?"
        result = mcp_result(self._ask(env, "alice", message)).get("result", {})
        assert result.get("resultType") == "input_required", result
        return Ref({"state": result["requestState"], "message": message}, [], {"open": True})

    def intact(self, env: Env, ref: Ref) -> None:
        name = f"alice-{secrets.token_hex(4)}"
        done = mcp_result(self._ask(env, "alice", ref.ids["message"], ref.ids["state"], accept(name)))
        ref.keep["open"] = False
        assert name in json.dumps(done.get("result")), f"Alice's held call is gone: {done}"

    def flood(self, env: Env) -> None:
        """`FLOOD_TIMES` x max_held_calls questions left unanswered by Bob: beyond his share they are refused."""
        held = []
        try:
            for n in range(FLOOD_TIMES * MAX_HELD_CALLS):
                result = mcp_result(self._ask(env, "bob", f"bob {n}?")).get("result", {})
                if result.get("resultType") == "input_required":
                    held.append((f"bob {n}?", result["requestState"]))
                    asked = result["inputRequests"]["q0"]["params"]["message"]
                    assert asked == f"bob {n}?", f"Bob was asked {asked!r}, not his own call's question"
            assert 1 <= len(held) <= share(MAX_HELD_CALLS), f"Bob holds {len(held)} calls"
        finally:
            for message, state in held:
                self._ask(env, "bob", message, state, {"q0": {"action": "decline"}})

    def cleanup(self, env: Env, ref: Ref) -> None:
        if ref.keep.get("open"):  # not answered yet: let it go
            self._ask(env, "alice", ref.ids["message"], ref.ids["state"], {"q0": {"action": "decline"}})


def bare(value: str) -> str:
    return HELD_PREFIX


TASK_TOOL = "modern_slow_compute"  # the reference server's task-running tool (backend `modern`, 2026-07-28)
WITH_TASKS = {"extensions": {TASKS: {}}}


class TaskDriver(Driver):
    """Alice's task (the tasks extension, relayed from the reference server), still working."""

    feature = "tasks"
    front = MCP_NEW
    issued = ("task",)

    def __init__(self) -> None:
        self.attempts = tuple(
            [
                Attempt("read", "id", self._task("tasks/get"), "task"),
                Attempt("cancel", "id", self._task("tasks/cancel"), "task"),
                Attempt("update", "id", self._task("tasks/update"), "task"),
            ]
            + [
                Attempt("read", "guess", self._task("tasks/get"), "task", guess=g)
                for g in (neighbour, shorter, upstream_shaped)
            ]
        )

    def _task(self, method: str) -> Send:
        def send(env: Env, ref: Ref, target: str) -> Answer:
            params: dict[str, Any] = {"taskId": target} | ({"inputResponses": {}} if method == "tasks/update" else {})
            return modern_post(env, self.base(env), "bob", method, params, target, WITH_TASKS)

        send.__name__ = method.replace("/", "_")
        return send

    def _start(self, env: Env, who: str, label: str) -> str:
        params = {"name": TASK_TOOL, "arguments": {"seconds": 60, "label": label}}
        result = mcp_result(modern_post(env, self.base(env), who, "tools/call", params, TASK_TOOL, WITH_TASKS))
        assert result.get("result", {}).get("resultType") == "task", result
        return result["result"]["taskId"]  # type: ignore[no-any-return]

    def _get(self, env: Env, who: str, task: str, method: str = "tasks/get") -> dict[str, Any]:
        return mcp_result(modern_post(env, self.base(env), who, method, {"taskId": task}, task, WITH_TASKS))

    def create(self, env: Env) -> Ref:
        label = f"alice-{secrets.token_hex(6)}"
        ref = Ref({"task": self._start(env, "alice", label)}, [label], {})
        self.intact(env, ref)
        return ref

    def intact(self, env: Env, ref: Ref) -> None:
        task = self._get(env, "alice", ref.ids["task"]).get("result", {})
        assert task.get("status") == "working", f"Alice's task is gone or was cancelled: {task}"

    def flood(self, env: Env) -> None:
        """Bob's own tasks; the gateway keeps none (ids are sealed), so there is no bound to exceed: the
        upstream's (1024 tasks) is the upstream's."""
        tasks = parallel(lambda n: self._start(env, "bob", f"bob-{n}"), range(TASK_FLOOD))
        parallel(lambda task: self._get(env, "bob", task, "tasks/cancel"), tasks)

    def cleanup(self, env: Env, ref: Ref) -> None:
        self._get(env, "alice", ref.ids["task"], "tasks/cancel")


def upstream_shaped(_value: str) -> str:
    """What the upstream's own task ids look like (32 hex digits): the gateway must not take one as an id."""
    return secrets.token_hex(16)


# -- the `toolserver` backend: upstream node sessions per caller, and its 450 continuations --


class NodeSessionDriver(Driver):
    """Alice's upstream node session (`EchoEnv_echo` answers the node's id): her session's, or her default one."""

    feature = "node-sessions"
    on_nodes = True

    def __init__(self, front: Front, with_session: bool) -> None:
        self.front = front
        self.with_session = with_session
        attempts = [Attempt("run", "guess", self._echo_own, "session")]
        if with_session:
            attempts.insert(0, Attempt("run", "id", self._echo_in, "session"))
        self.attempts = tuple(attempts)

    @property
    def front_label(self) -> str:
        return self.front.name + ("" if self.with_session or not self.front.sessions else "-no-session")

    def _echo(self, env: Env, who: str, session: str | None) -> Called:
        return self.front.call(env, self.base(env), who, "EchoEnv_echo", {"text": who}, session)

    def _echo_in(self, env: Env, ref: Ref, target: str) -> Answer:
        return self._echo(env, "bob", target).answer

    def _echo_own(self, env: Env, ref: Ref, target: str) -> Answer:
        return self._echo(env, "bob", None).answer

    def create(self, env: Env) -> Ref:
        session = self.front.open(env, self.base(env), "alice") if self.with_session else None
        echoed = self._echo(env, "alice", session)
        assert echoed.ok and echoed.value["node"], echoed.answer
        return Ref({"session": session or ""}, [echoed.value["node"]], {"node": echoed.value["node"]})

    def intact(self, env: Env, ref: Ref) -> None:
        again = self._echo(env, "alice", ref.ids["session"] or None)
        assert again.ok and again.value["node"] == ref.keep["node"], f"Alice's node session is gone: {again.answer}"

    def flood(self, env: Env) -> None:
        """Bob's fresh sessions, each with a node of its own: `FLOOD_TIMES` x the backend's max_sessions."""
        front = self.front if self.front in (TOOLSERVER, JSONRPC) else JSONRPC
        base = self.base(env)
        sessions: list[str | None] = []
        nodes: list[str | None] = []
        try:
            for _ in range(FLOOD_TIMES * NODE_MAX_SESSIONS):  # one after the other: each session its newest when used
                sessions.append(front.open(env, base, "bob"))
                nodes.append(self._echo_with(env, front, sessions[-1]))
            assert all(nodes), nodes
            assert self._echo_with(env, front, sessions[0]) != nodes[0], "Bob's flood stayed within his share"
        finally:
            for session in sessions:
                front.close(env, base, "bob", session)

    def _echo_with(self, env: Env, front: Front, session: str | None) -> str | None:
        echoed = front.call(env, self.base(env), "bob", "EchoEnv_echo", {"text": "bob"}, session)
        return echoed.value["node"] if echoed.ok else None

    def cleanup(self, env: Env, ref: Ref) -> None:
        self.front.close(env, self.base(env), "alice", ref.ids["session"] or None)


class ContinuationDriver(Driver):
    """Alice's continuation of an upstream node's own 450 (`ShellEnv_run`), handed to her by the
    ToolServerNode front as `Toolplex_continue_node`; Bob tries it through `front`."""

    feature = "450-continuations"
    on_nodes = True

    def __init__(self, front: Front) -> None:
        self.front = front
        self.floods = front is TOOLSERVER  # one store whoever tries: flooded once
        self.issued = ("continuation",) if front is TOOLSERVER else ()  # issued to a ToolServerNode caller: once
        guesses = [Attempt("continue", "guess", self._continue, "continuation", guess=g) for g in (neighbour, shorter)]
        self.attempts = tuple([Attempt("continue", "id", self._continue, "continuation"), *guesses])

    def _start(self, env: Env, who: str) -> str:
        body = {"tool_name": "ShellEnv_run", "arguments": {"steps": 1}}
        answer = env.http.post(f"{self.base(env)}/execute_tool", json=body, headers=auth(who))
        assert answer.status_code == 450 and answer.json()["detail"]["next_calling"] == RELAY, answer.text
        return answer.json()["detail"]["arguments"]["continuation"]  # type: ignore[no-any-return]

    def _continue_as(self, env: Env, who: str, front: Front, token: str) -> Called:
        return front.call(env, self.base(env), who, RELAY, {"continuation": token})

    def _continue(self, env: Env, ref: Ref, target: str) -> Answer:
        return self._continue_as(env, "bob", self.front, target).answer

    def create(self, env: Env) -> Ref:
        return Ref({"continuation": self._start(env, "alice")}, [], {})

    def intact(self, env: Env, ref: Ref) -> None:
        done = self._continue_as(env, "alice", TOOLSERVER, ref.ids["continuation"])
        assert done.ok and done.value["output"] == "done after 1 reads", f"Alice's continuation is gone: {done.answer}"

    def flood(self, env: Env) -> None:
        tokens = [self._start(env, "bob")]
        tokens += parallel(lambda _: self._start(env, "bob"), range(FLOOD_TIMES * CONTINUATIONS))
        first = self._continue_as(env, "bob", TOOLSERVER, tokens[0])
        assert first.answer.status == 404, f"Bob's flood stayed within his share: {first.answer}"
        assert self._continue_as(env, "bob", TOOLSERVER, tokens[-1]).ok


# ---- the table ----


def drivers() -> list[Driver]:
    """Every (front, feature) pair that exists; see test_cross_caller_matrix.py for the pairs left out."""
    table: list[Driver] = [
        ToolServerSessionDriver(),
        McpSessionDriver(),
        HandleDriver(with_session=True),
        HandleDriver(with_session=False),
        FilesDriver(on_nodes=False, with_session=True),
        FilesDriver(on_nodes=False, with_session=False),
        FilesDriver(on_nodes=True, with_session=True),
        FilesDriver(on_nodes=True, with_session=False),
        SseDriver(),
        HeldDriver(),
        TaskDriver(),
        CallIdDriver(),
        RunningCallIdDriver(),
        HopCallIdDriver(),
        SharedCacheDriver(),
    ]
    for front in FRONTS:
        for with_session in (True, False) if front.sessions else (False,):
            if front is MCP_OLD and not with_session:
                continue  # the handshake era has no request without a session
            table.append(WorkspaceDriver(front, with_session))
            table.append(WorkspaceDriver(front, with_session, upstream=True))
            table.append(NodeSessionDriver(front, with_session))
        table.append(CacheDriver(front))
    table += [ContinuationDriver(front) for front in (TOOLSERVER, JSONRPC, OPENTOOL, OXP, MCP_NEW)]
    return table
