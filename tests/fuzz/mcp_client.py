"""Sends the MCP front's generated requests (`tests.fuzz.mcp_requests`) and judges each answer.

The request's placeholders are filled in first, from what the server gave earlier: live handshake-era
sessions (opened by a real `initialize` and `notifications/initialized` when none is at hand, at most
`LIVE_SESSIONS` per endpoint and version, the oldest DELETEd), ids of sessions since closed, the SSE event
ids each session's streams carried, task ids, `requestState`s, `nextCursor`s, and the InputRequiredResults
tools asked (a retry repeats the call's name and arguments and answers its questions). A question a
handshake-era server asks on a request's SSE stream (sampling, elicitation, roots) is answered by a POST on
the session, as the SDK's client does. Then the property, as for the other fronts:

- an answer within the client timeout (a GET's SSE stream may stay open once its head arrived: it is
  read for `GET_QUIET_S` and closed), and no dropped connection;
- no 5xx but the 503 MCP defines (too many sessions, a session's home replica out of reach), with a
  JSON-RPC error body;
- no traceback in the answer, no error an exception a handler let out becomes ("Internal server error",
  JSON-RPC code 0, a tool result of kind `internal`), and no traceback or internal error in the gateway's
  log while the request was answered;
- JSON answers that parse (a few statuses have no body: 202, 204, 405, 406, redirects, a DELETE's 200),
  SSE answers only with 200, each event's data JSON, a request's stream ending with its response; other
  media types only on 4xx refusals;
- a live session answers at its own endpoint until the fuzz DELETEs it (or leaves it idle for
  `session_idle_s`), whatever was sent with its id elsewhere.
"""

from __future__ import annotations

import asyncio
import base64
import random
import secrets
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from tests.fuzz.mcp_requests import ASKABLE, HANDSHAKE, REAL_MARK, SSE_AND_JSON
from tests.fuzz.requests import FuzzRequest

GET_QUIET_S = 0.3  # how long an open GET stream is read before it is closed (it may stay open: that is fine)
KEEP = 16  # harvested values of each kind kept (the newest)
LIVE_SESSIONS = 3  # live sessions kept per version; the oldest beyond that is DELETEd
ENDPOINTS = ("/mcp", "/mcp/math")
LOG_MARKS = (b"Traceback", b"internal_error", b"Internal server error")
EMPTY_OK = frozenset({202, 204, 405, 406})  # statuses the SDK answers with no body (and redirects: /mcp/)
_REAL = ('"' + REAL_MARK.replace("\u0001", "\\u0001")).encode()  # how a placeholder starts in JSON bytes


class Failed(AssertionError):
    """The property does not hold for one request."""


@dataclass
class Question:
    """An InputRequiredResult a `tools/call` got: what its retry must repeat, and what it must answer."""

    name: Any
    arguments: Any
    state: str | None
    requests: dict[str, Any]


@dataclass
class Harvest:
    """What the server gave, for the placeholders of later requests."""

    sessions: dict[tuple[str, str], deque[str]] = field(default_factory=dict)  # (endpoint, version) -> live ids
    homes: dict[str, tuple[str, str]] = field(default_factory=dict)  # live session id -> (endpoint, version)
    seen: dict[str, deque[str]] = field(default_factory=dict)  # live session id -> its last requests, answered
    used: dict[str, float] = field(default_factory=dict)  # live session id -> when a request last named it
    dead: deque[str] = field(default_factory=lambda: deque(maxlen=KEEP))
    events: dict[str, deque[str]] = field(default_factory=dict)  # session id -> its SSE event ids
    tasks: deque[str] = field(default_factory=lambda: deque(maxlen=KEEP))
    states: deque[str] = field(default_factory=lambda: deque(maxlen=KEEP))
    cursors: dict[str, deque[str]] = field(default_factory=dict)  # method -> nextCursors its answers gave
    questions: deque[Question] = field(default_factory=lambda: deque(maxlen=KEEP))  # InputRequiredResults to answer


@dataclass
class Sent:
    """One request as it went out, placeholders filled in."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    session: str | None = None  # the live session it named, if any
    rpc_method: str | None = None
    is_request: bool = False  # one JSON-RPC object with a method and an id: owed a response
    params: dict[str, Any] | None = None  # a tools/call's params

    def __str__(self) -> str:
        shown = {k: (v if len(v) <= 200 else f"{v[:200]}...({len(v)} chars)") for k, v in self.headers.items()}
        body = self.body if len(self.body) <= 600 else self.body[:600] + b"...(%d bytes)" % len(self.body)
        return f"{self.method} {self.path} headers={shown} body={body!r}"


@dataclass
class Answer:
    status: int
    media: str
    headers: httpx.Headers
    body: bytes
    open: bool  # a GET's stream still open when it was closed


class McpFuzzClient:
    """One HTTP client (its own event loop) sending every generated MCP request to one gateway."""

    def __init__(self, base: str, log: Path, timeout_s: float, session_idle_s: float) -> None:
        self.base = base
        self.session_idle_s = session_idle_s
        self.log = log
        self.timeout_s = timeout_s
        self.loop = asyncio.new_event_loop()
        self.client = httpx.AsyncClient(base_url=base, timeout=timeout_s)
        self.harvest = Harvest()
        self.log_seen = log.stat().st_size if log.exists() else 0
        self.previous: Sent | None = None
        self.sent = 0
        self.statuses: dict[int, int] = {}
        self.outcomes: Counter[str] = Counter()  # (method, status, error) per request: what the run reached
        self.closing: list[str] = []  # sessions to DELETE once the current request is judged
        self.rng = random.Random(0)  # which harvested value a placeholder gets, and how a question is answered

    def close(self) -> None:
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()

    def check(self, request: FuzzRequest) -> None:
        """Send one generated request; raise `Failed` when the property does not hold."""
        self.loop.run_until_complete(self._check(request))

    def check_log(self, during: str = "") -> None:
        """No traceback or internal error logged since the last look."""
        with open(self.log, "rb") as log:
            log.seek(self.log_seen)
            new = log.read()
        new = new[: new.rfind(b"\n") + 1]  # whole lines only: the rest is still being written
        self.log_seen += len(new)
        for line in new.splitlines():
            if any(mark in line for mark in LOG_MARKS):
                raise Failed(f"the gateway logged, {during}:\n{line[:3000].decode(errors='replace')}")

    # ---- one request ----

    async def _check(self, request: FuzzRequest) -> None:
        self.check_log(f"before this request (after {self.previous})")
        sent = await self._fill(request)
        answer = await self._exchange(sent)
        self.sent += 1
        self.statuses[answer.status] = self.statuses.get(answer.status, 0) + 1
        self.previous = sent
        try:
            messages = self._judge(sent, answer)
        except Failed as failed:
            await asyncio.sleep(0.2)
            try:
                self.check_log("too")  # what the gateway logged of it (read, so the next request is not blamed)
            except Failed as logged:
                raise Failed(f"{failed}\n{logged}") from None
            raise
        self.check_log(f"answering {sent}")  # most lines are written before the answer is sent
        self.outcomes[outcome(sent, answer, messages)] += 1
        await self._remember(sent, answer, messages)
        await self._close_extra_sessions()

    async def _fill(self, request: FuzzRequest) -> Sent:
        """The request with its placeholders replaced (the session header first: event ids are that session's)."""
        values: dict[str, Any] = {}
        sent = Sent(request.method, request.path, {}, b"")
        ordered = sorted(request.headers.items(), key=lambda item: item[0].lower() != "mcp-session-id")
        for name, value in ordered:
            if value.startswith(REAL_MARK):
                kind = value[len(REAL_MARK) :]
                wrap = kind.endswith("|b64")
                value = str(await self._value(kind.removesuffix("|b64"), values, sent))
                if wrap:
                    value = f"=?base64?{base64.b64encode(value.encode()).decode()}?="
            sent.headers[name] = value
        body = request.body
        while (start := body.find(_REAL)) != -1:
            end = body.find(b'"', start + len(_REAL))
            if end == -1:
                break  # cut short by the generator: sent as it is
            kind = body[start + len(_REAL) : end].decode(errors="replace")
            value = await self._value(kind, values, sent)
            body = body[:start] + orjson.dumps(value) + body[end + 1 :]
        sent.body = body
        try:
            decoded = orjson.loads(body)
            if isinstance(decoded, dict):
                sent.rpc_method = decoded.get("method")
                sent.is_request = isinstance(sent.rpc_method, str) and "id" in decoded
                params = decoded.get("params")
                if sent.rpc_method == "tools/call" and isinstance(params, dict):
                    sent.params = params
        except orjson.JSONDecodeError:
            pass
        return sent

    async def _value(self, kind: str, values: dict[str, Any], sent: Sent) -> Any:
        """One placeholder's value; the same kind twice in one request gets the same value."""
        if kind in values:
            return values[kind]
        harvest = self.harvest
        pick = self._pick
        value: Any = None
        if kind.startswith("session:") and kind != "session:dead":
            # `session:<version>` on the request's own endpoint, `session:<version>@<endpoint>` on that one
            version, _, endpoint = kind.removeprefix("session:").partition("@")
            value = await self._live_session(endpoint or endpoint_of(sent.path), version)
            sent.session = value
        elif kind == "session:dead":
            value = pick(harvest.dead) or secrets.token_hex(16)
        elif kind == "event":
            value = pick(harvest.events.get(sent.session or "", ()))
        elif kind == "event:other":
            value = pick([e for s, ids in harvest.events.items() if s != sent.session for e in ids])
        elif kind == "task":
            value = pick(harvest.tasks)
        elif kind == "state":
            value = pick(harvest.states)
        elif kind.startswith("cursor"):
            method = kind.partition(":")[2]
            every = [c for pool in harvest.cursors.values() for c in pool]
            value = pick(harvest.cursors.get(method, ()) if method else every)
        elif kind.startswith("retry:"):
            if "retry" not in values:
                values["retry"] = pick(harvest.questions)
            question = values["retry"]
            part = kind.removeprefix("retry:")
            if question is None:  # none asked yet: a retry of a call that never asked
                value = {"name": "test_input_required_result_elicitation", "arguments": {}, "inputResponses": {}}
                value = value.get(part)
            elif part == "name":
                value = question.name
            elif part == "arguments":
                value = question.arguments
            elif part == "requestState":
                values[kind] = question.state  # None (null) for a question that came without one
                return values[kind]
            elif part == "inputResponses":
                value = {key: self._answer_to(request) for key, request in question.requests.items()}
        values[kind] = value if value is not None else f"never-given-{kind}"
        return values[kind]

    def _pick(self, pool: Any) -> Any:
        """One of the harvested values, the newer more often; None when there is none."""
        found = list(pool)
        if not found:
            return None
        return found[-1] if self.rng.random() < 0.5 else self.rng.choice(found)

    def _answer_to(self, request: Any) -> Any:
        """The client's answer to a server's question (`elicitation/create`, `sampling/createMessage`,
        `roots/list`), as the SDK's client gives it; now and then a decline or an answer of the wrong kind."""
        method = request.get("method") if isinstance(request, dict) else None
        params = request.get("params") if isinstance(request, dict) else None
        params = params if isinstance(params, dict) else {}
        roll = self.rng.random()
        if roll < 0.1:
            return {"action": "decline"}
        if roll < 0.15:
            return {"roots": []} if method != "roots/list" else {"action": "cancel"}
        if method == "sampling/createMessage":
            return {"role": "assistant", "content": {"type": "text", "text": "fuzz says yes"}, "model": "fuzz"}
        if method == "roots/list":
            return {"roots": [{"uri": "file:///tmp/fuzz", "name": "fuzz"}]}
        if method == "ping":
            return {}
        schema = params.get("requestedSchema")
        properties = schema.get("properties") if isinstance(schema, dict) else None
        content: dict[str, Any] = {}
        for key, spec in (properties or {}).items():
            kind = spec.get("type") if isinstance(spec, dict) else None
            options = spec.get("enum") if isinstance(spec, dict) else None
            if isinstance(options, list) and options:
                content[key] = options[0]
            elif kind == "boolean":
                content[key] = True
            elif kind in ("number", "integer"):
                content[key] = 1
            elif kind == "array":
                content[key] = []
            else:
                content[key] = "fuzz"
        return {"action": "accept", "content": content}

    # ---- sessions ----

    async def _live_session(self, endpoint: str, version: str) -> str:
        live = self.harvest.sessions.get((endpoint, version))
        if live:
            return live[-1]
        body = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": ASKABLE if self.rng.random() < 0.5 else {},  # half of them can be asked questions
                "clientInfo": {"name": "fuzz", "version": "1"},
            },
        }
        headers = {"accept": SSE_AND_JSON, "content-type": "application/json"}
        opened = Sent("POST", endpoint, headers, orjson.dumps(body), rpc_method="initialize")
        answer = await self._exchange(opened)
        session = answer.headers.get("mcp-session-id")
        if answer.status != 200 or session is None:
            raise Failed(f"a well-formed initialize at {version} got {answer.status}: {answer.body[:500]!r}")
        self._events(session, answer)
        await self._adopt(session, endpoint, version)
        return session

    def _live_or_fail(self, sent: Sent, answer: Answer, messages: list[dict[str, Any]]) -> None:
        """A live session answers at its own endpoint until it is DELETEd or idle for `session_idle_s`: its
        requests elsewhere (the other endpoint, a path with no route) leave it as it was."""
        session, harvest = sent.session, self.harvest
        assert session is not None
        home, _ = harvest.homes[session]
        idle = time.monotonic() - harvest.used[session]
        harvest.used[session] = time.monotonic()
        history = harvest.seen.setdefault(session, deque(maxlen=12))
        history.append(f"{sent.method} {sent.path} {sent.rpc_method or ''} -> {answer.status}")
        if sent.method == "DELETE" and answer.status < 300:
            self._dead(session)
        elif answer.status == 404 and sent.path == home:
            if idle < self.session_idle_s * 0.8 and any(
                isinstance(m.get("error"), dict) and m["error"].get("message") == "Session not found" for m in messages
            ):
                earlier = "\n  ".join(history)
                self._dead(session)  # lost: not named again (a replay of this request alone would not fail)
                raise Failed(
                    f"a live session ({idle:.1f} s idle, never DELETEd) is no longer found at its own endpoint "
                    f"{home}; its requests, the last one failing:\n  {earlier}\nthe last one: {sent}"
                )
            self._dead(session)

    async def _adopt(self, session: str, endpoint: str, version: str) -> None:
        """A new session: initialized, then one of the live ones (the oldest beyond `LIVE_SESSIONS` closed)."""
        await self._initialized(session, endpoint, version)
        live = self.harvest.sessions.setdefault((endpoint, version), deque())
        live.append(session)
        self.harvest.homes[session] = (endpoint, version)
        self.harvest.used[session] = time.monotonic()
        while len(live) > LIVE_SESSIONS:
            self.closing.append(live.popleft())

    async def _initialized(self, session: str, endpoint: str, version: str) -> None:
        headers = {
            "accept": SSE_AND_JSON,
            "content-type": "application/json",
            "mcp-session-id": session,
            "mcp-protocol-version": version,
        }
        body = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        answer = await self._exchange(Sent("POST", endpoint, headers, body))
        if answer.status != 202:
            raise Failed(f"notifications/initialized on a new session got {answer.status}: {answer.body[:500]!r}")

    async def _close_extra_sessions(self) -> None:
        closing, self.closing = self.closing, []
        for session in closing:
            endpoint, version = self.harvest.homes.get(session, ("/mcp", HANDSHAKE[-1]))
            headers = {"mcp-session-id": session, "mcp-protocol-version": version}
            answer = await self._exchange(Sent("DELETE", endpoint, headers, b""))
            if answer.status not in (200, 404):  # 404: the fuzz closed it already
                raise Failed(f"DELETE of a live session got {answer.status}: {answer.body[:500]!r}")
            self._dead(session)

    def _dead(self, session: str) -> None:
        self.harvest.used.pop(session, None)
        self.harvest.seen.pop(session, None)
        home = self.harvest.homes.pop(session, None)
        live = self.harvest.sessions.get(home) if home is not None else None
        if live is not None and session in live:
            live.remove(session)
        self.harvest.events.pop(session, None)
        self.harvest.dead.append(session)

    # ---- the exchange ----

    async def _reply(self, sent: Sent, question: dict[str, Any]) -> None:
        """POST the answer to a server's request (sampling, elicitation, roots, ping) on the request's session."""
        headers = {k: v for k, v in sent.headers.items() if k in ("mcp-session-id", "mcp-protocol-version")}
        headers.update({"accept": SSE_AND_JSON, "content-type": "application/json"})
        if self.rng.random() < 0.1:
            answer: dict[str, Any] = {"error": {"code": -1, "message": "the fuzz client says no"}}
        else:
            answer = {"result": self._answer_to(question)}
        body = orjson.dumps({"jsonrpc": "2.0", "id": question["id"], **answer})
        replied = Sent("POST", sent.path, headers, body)
        got = await self._exchange(replied, answer_questions=False)
        self._judge(replied, got)
        self.outcomes[f"{sent.path} (answering the server's {question.get('method')}) -> {got.status}"] += 1

    async def _exchange(self, sent: Sent, answer_questions: bool = True) -> Answer:
        headers = [(name.encode(), value.encode()) for name, value in sent.headers.items()]
        request = self.client.build_request(sent.method, sent.path, content=sent.body, headers=headers)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        try:
            async with asyncio.timeout_at(deadline):
                response = await self.client.send(request, stream=True)
        except TimeoutError:
            raise Failed(f"hang: no answer within {self.timeout_s} s to {sent}") from None
        except httpx.TransportError as exc:
            raise Failed(f"dropped connection ({type(exc).__name__}: {exc}) on {sent}") from None
        media = response.headers.get("content-type", "")
        stream = media.startswith("text/event-stream")
        chunks: list[bytes] = []
        still_open = False
        session = sent.headers.get("mcp-session-id")
        replying = stream and sent.method == "POST" and session is not None and answer_questions
        pending = b""
        try:
            quiet = stream and sent.method == "GET"
            async with asyncio.timeout_at(min(deadline, loop.time() + GET_QUIET_S) if quiet else deadline):
                async for chunk in response.aiter_raw():
                    chunks.append(chunk)
                    if replying:  # a question of the server's on this request's stream is answered, as a client does
                        *events, pending = (pending + chunk).replace(b"\r\n", b"\n").split(b"\n\n")
                        for question in self._sse_messages(b"\n\n".join([*events, b""]), False, None):
                            if isinstance(question, dict) and "method" in question and "id" in question:
                                await self._reply(sent, question)
        except TimeoutError:
            if not quiet:
                got = b"".join(chunks)[:600]
                raise Failed(
                    f"hang: {response.status_code} {media!r} answer not over within {self.timeout_s} s "
                    f"(got {got!r}) to {sent}"
                ) from None
            still_open = True
        except httpx.TransportError as exc:
            raise Failed(f"dropped connection mid-answer ({type(exc).__name__}: {exc}) on {sent}") from None
        finally:
            await response.aclose()
        return Answer(response.status_code, media, response.headers, b"".join(chunks), still_open)

    # ---- the property ----

    def _judge(self, sent: Sent, answer: Answer) -> list[dict[str, Any]]:
        """Raise `Failed` when the answer breaks the property; else the JSON-RPC messages it carried."""
        status, media, body = answer.status, answer.media, answer.body

        def fail(why: str) -> Failed:
            return Failed(f"{why}: {status} {media!r} {body[:600]!r}\nto {sent}")

        if b"Traceback" in body:
            raise fail("traceback in the answer")
        messages: list[dict[str, Any]] = []
        if media.startswith("text/event-stream"):
            if status != 200:
                raise fail("an SSE answer with a status other than 200")
            messages = self._sse_messages(body, answer.open, fail)
            answered = any("result" in m or "error" in m for m in messages)
            if sent.method == "POST" and sent.is_request and not answered:
                raise fail("an SSE answer to a request, over without its response")
        elif not body:
            if status not in EMPTY_OK and not 300 <= status < 400 and sent.method not in ("DELETE", "HEAD"):
                raise fail("an empty answer")
        elif media.startswith("application/json"):
            try:
                decoded = orjson.loads(body)
            except orjson.JSONDecodeError:
                raise fail("a JSON answer that does not parse") from None
            messages = decoded if isinstance(decoded, list) else [decoded]
        elif status < 400 or status >= 500:
            raise fail("an answer neither JSON nor SSE")
        for message in messages:
            if not isinstance(message, dict):
                raise fail("a JSON-RPC message that is no object")
            error = message.get("error")
            if isinstance(error, dict) and error.get("code") == 0:  # the handshake era's answer to a handler's raise
                raise fail("a handler raised (JSON-RPC error code 0)")
            result = message.get("result")
            meta = result.get("_meta") if isinstance(result, dict) else None
            if isinstance(meta, dict) and meta.get("io.toolplex/kind") == "internal":
                raise fail("a tool result for an internal error (the gateway raised)")
            if isinstance(error, dict) and error.get("code") == -32603:
                data = error.get("data")
                if error.get("message") in ("Internal server error", "Internal error") or (
                    isinstance(data, dict) and data.get("kind") == "internal"
                ):
                    raise fail("an internal error (a handler raised)")
        if status >= 500:
            rpc = messages[0].get("error") if len(messages) == 1 else None
            if status != 503 or not isinstance(rpc, dict):
                raise fail("a 5xx MCP does not define")
        return messages

    @staticmethod
    def _sse_messages(body: bytes, still_open: bool, fail: Any) -> list[Any]:
        """The JSON-RPC messages of an SSE body; `fail` makes the error for an event that is no JSON (None:
        such events are skipped)."""
        events = body.replace(b"\r\n", b"\n").split(b"\n\n")
        if still_open and events:
            events = events[:-1]  # the last one may be cut where the read stopped
        messages = []
        for event in events:
            data = [line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")]
            if not data or not b"".join(data):
                continue  # a priming event, a comment, a ping
            try:
                messages.append(orjson.loads(b"\n".join(data)))
            except orjson.JSONDecodeError:
                if fail is not None:
                    raise fail("an SSE event whose data is not JSON") from None
        return messages

    # ---- what the answer gave ----

    def _events(self, session: str, answer: Answer) -> None:
        if not answer.media.startswith("text/event-stream"):
            return
        for line in answer.body.replace(b"\r\n", b"\n").split(b"\n"):
            if line.startswith(b"id:") and line[3:].strip():
                self.harvest.events.setdefault(session, deque(maxlen=KEEP)).append(line[3:].strip().decode())

    async def _remember(self, sent: Sent, answer: Answer, messages: list[dict[str, Any]]) -> None:
        harvest = self.harvest
        opened = answer.headers.get("mcp-session-id")
        session = sent.session or opened
        if session is not None:
            self._events(session, answer)
        if sent.session is not None and sent.session in harvest.homes:
            self._live_or_fail(sent, answer, messages)
        elif opened is not None and opened not in harvest.homes and sent.method == "POST" and answer.status < 300:
            version = next(
                (m["result"].get("protocolVersion") for m in messages if isinstance(m.get("result"), dict)), None
            )
            endpoint = endpoint_of(sent.path)
            if version in HANDSHAKE and endpoint == sent.path:  # a session the fuzz opened: one of the live ones
                await self._adopt(opened, endpoint, version)
            else:
                harvest.homes[opened] = (sent.path, HANDSHAKE[-1])
                self.closing.append(opened)
        for message in messages:
            result = message.get("result")
            if not isinstance(result, dict):
                continue
            if result.get("resultType") == "task" and isinstance(result.get("taskId"), str):
                harvest.tasks.append(result["taskId"])
            if isinstance(result.get("requestState"), str):
                harvest.states.append(result["requestState"])
            asked = result.get("inputRequests")
            if result.get("resultType") == "input_required" and isinstance(asked, dict) and sent.params is not None:
                state = result.get("requestState")
                harvest.questions.append(
                    Question(
                        sent.params.get("name"),
                        sent.params.get("arguments"),
                        state if isinstance(state, str) else None,
                        asked,
                    )
                )
            if isinstance(result.get("nextCursor"), str) and sent.rpc_method:
                harvest.cursors.setdefault(sent.rpc_method, deque(maxlen=KEEP)).append(result["nextCursor"])


def endpoint_of(path: str) -> str:
    """The MCP endpoint a path names (the main one, or the `math` virtual server); the main one for any other."""
    return path if path in ENDPOINTS else "/mcp"


def outcome(sent: Sent, answer: Answer, messages: list[dict[str, Any]]) -> str:
    """One line for the run's tally: what was asked and what came of it."""
    asked = (
        (sent.rpc_method if isinstance(sent.rpc_method, str) else "-")[:40] if sent.method == "POST" else sent.method
    )
    error = next((m["error"] for m in messages if isinstance(m.get("error"), dict)), None)
    result = next((m["result"] for m in messages if isinstance(m.get("result"), dict)), None)
    if error is not None:
        said = f"error {error.get('code')} {str(error.get('message'))[:50]}"
    elif result is not None:
        said = "isError" if result.get("isError") else f"result {result.get('resultType', '')}"
    else:
        said = ""
    live = " (live session)" if sent.session else ""
    return f"{sent.path}{live} {asked} -> {answer.status} {said}"
