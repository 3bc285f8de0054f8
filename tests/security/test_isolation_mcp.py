"""Issue 25, the MCP findings: what one caller of the MCP front can read, spend or fill of another's.

Each test reproduces one finding of the issue as a black box and fails on the leak itself until
the fix lands: SSE events replayed across sessions, pass-through requests (resources, prompts,
completions, lists) that skip the rate limits, the call log and the forwarded credentials,
unknown names that list every upstream, a result cache that answers one caller with another's
forwarded credentials, and session and held-call bounds that one principal fills for everyone.

Real processes on free loopback ports: `toolplex serve` (three configurations, each started once
for the module), tests/mcp/reference_server.py and tests/security/mcp_upstream.py (a small MCP
server that answers the Authorization header it received and counts the requests it was sent).
Requests are raw HTTP where the exact bytes matter (the handshake era's SSE event ids, the
2026-07-28 envelope of tests/mcp/front/modern_http.py).

"Finding N" in a docstring is the issue's numbering: 1 (SSE replay), 2 (the result cache), 3 (the
pass-through: limits, call log, forwarded credentials, unknown names), 7 (`max_sessions`, `max_held_calls`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.mcp import conformance
from tests.mcp.front.modern_http import Caller
from tests.support import python_server, served_gateway

HANDSHAKE = "2025-11-25"
BOTH = "application/json, text/event-stream"
WAIT_S = 20.0  # bound on every request here
QUIET_S = 2.0  # a replayed GET stream that says nothing for this long has nothing more to say
REPLAY_BOUND_S = WAIT_S  # and no replayed stream is read for longer than this, whatever it sends
MAX_REPLAY_BYTES = 256 * 1024

ALICE_KEY, BOB_KEY = "alice-key-0001", "bob-key-0002"
TWO_KEYS = f"""
auth:
  api_keys:
    - {{name: alice, key: "{ALICE_KEY}"}}
    - {{name: bob, key: "{BOB_KEY}"}}
"""
MATH = '  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}\n'

# The pass-through request kinds, each with the request that reads something of the reference server.
PASS_THROUGH: dict[str, tuple[str, dict[str, Any], str | None]] = {
    # method: (the call log's kind, params, Mcp-Name)
    "resources/read": ("read", {"uri": "test://static-text"}, "test://static-text"),
    "prompts/get": ("prompt", {"name": "test_simple_prompt"}, "test_simple_prompt"),
    "completion/complete": (
        "complete",
        {
            "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
            "argument": {"name": "arg1", "value": ""},
        },
        None,
    ),
    "resources/list": ("list", {}, None),
    "prompts/list": ("list", {}, None),
}
# One API key per pass-through method and test, so each test has a rate bucket of its own.
PASS_KEYS = {
    (test, method): (f"{test}-{method.replace('/', '-')}", f"key-{test}-{index:02d}-{secrets.token_hex(8)}")
    for test in ("rate", "log")
    for index, method in enumerate(PASS_THROUGH)
}

# ---- processes ----


@contextlib.contextmanager
def together(*managers: contextlib.AbstractContextManager[Any]) -> Iterator[list[Any]]:
    """Enter every context manager at once, each in a thread of its own (each waits for its own process
    to answer); exit every one that was entered."""
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(len(managers)) as pool:
        futures = [pool.submit(manager.__enter__) for manager in managers]
        values, failed = [], None
        for manager, future in zip(managers, futures, strict=True):
            try:
                values.append(future.result())
            except BaseException as exc:  # one that did not start: the others are still stopped
                failed = failed or exc
            else:
                stack.push(manager.__exit__)
        if failed is not None:
            raise failed
        yield values


@contextlib.contextmanager
def gateway(config: str, directory: Path) -> Iterator[tuple[str, Path]]:
    """`toolplex serve` with `config`; its base URL and the path of its JSON log."""
    path, log = directory / "gateway.yaml", directory / "gateway.log"
    path.write_text(config)
    with served_gateway(path, log_path=log) as (base, _process):
        yield base, log


def keyed_config(reference: str) -> str:
    """Two API keys; 8 handshake-era sessions at most; the reference server held to the handshake era
    (its questions to a 2026-07-28 caller are held calls), at most 4 of them held."""
    return (
        TWO_KEYS
        + "fronts: {mcp: {max_sessions: 8}}\nbackends:\n"
        + MATH
        + f'  - {{name: reference, kind: mcp, url: "{reference}", era: legacy, max_held_calls: 4}}\n'
    )


def open_config(one: int, two: int) -> str:
    """No auth; two MCP upstreams: `one` forwards the caller's Authorization (its own api_key otherwise)
    and caches its read-only tool for 60 s, `two` has credentials of its own."""
    return (
        "backends:\n"
        + MATH
        + f'  - {{name: one, kind: mcp, url: "http://127.0.0.1:{one}/mcp", api_key: backend-own-key-1,'
        + " forward_authorization: true, cache: {ttl_s: 60}}\n"
        + f'  - {{name: two, kind: mcp, url: "http://127.0.0.1:{two}/mcp", api_key: backend-own-key-2}}\n'
    )


def limited_config(reference: str) -> str:
    """A rate limit per principal (burst 2, refilled at 0.001/s: nothing refills while a test runs), one API
    key per pass-through test and method, the reference server as the one MCP backend."""
    keys = "".join(f'    - {{name: {name}, key: "{key}"}}\n' for name, key in PASS_KEYS.values())
    return (
        f"auth:\n  api_keys:\n{keys}"
        + "limits: {rate: {per_principal: {rate_per_s: 0.001, burst: 2}}}\n"
        + f'backends:\n  - {{name: reference, kind: mcp, url: "{reference}"}}\n'
    )


@pytest.fixture(scope="module")
def reference() -> Iterator[str]:
    """tests/mcp/reference_server.py (resources, prompts, completions, questions mid-call); its MCP URL."""
    with conformance.reference_server() as url:
        yield url


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[int, int]]:
    """Two tests/security/mcp_upstream.py servers, `one` and `two`, started side by side; their ports."""
    with together(
        python_server("tests.security.mcp_upstream", "--name", "one"),
        python_server("tests.security.mcp_upstream", "--name", "two"),
    ) as (one, two):
        yield one, two


# The gateways start one after another: each has served_gateway's bound to come up, which three
# starting at once on two busy cores could miss.


@pytest.fixture(scope="module")
def keyed(reference: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with gateway(keyed_config(reference), tmp_path_factory.mktemp("mcp-keyed")) as (base, _log):
        yield base


@pytest.fixture(scope="module")
def open_gateway(upstreams: tuple[int, int], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with gateway(open_config(*upstreams), tmp_path_factory.mktemp("mcp-open")) as (base, _log):
        yield base


@pytest.fixture(scope="module")
def limited(reference: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    with gateway(limited_config(reference), tmp_path_factory.mktemp("mcp-limited")) as found:
        yield found


# ---- the handshake era over raw HTTP ----


def headers_of(key: str | None, session: str | None = None, accept: str = BOTH) -> dict[str, str]:
    headers = {"Accept": accept, "MCP-Protocol-Version": HANDSHAKE}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    if session is not None:
        headers["Mcp-Session-Id"] = session
    return headers


def sse_events(text: str) -> list[dict[str, str]]:
    """The events of an SSE body: each a dict of its fields (`id`, `event`, `data`, `retry`)."""
    events: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line:
            if current:
                events.append(current)
            current = {}
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        current[name] = current[name] + "\n" + value if name in current else value
    if current:
        events.append(current)
    return events


def initialize(base: str, key: str | None, request_id: str) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": HANDSHAKE,
            "capabilities": {},
            "clientInfo": {"name": "isolation-test", "version": "1"},
        },
    }
    return httpx.post(f"{base}/mcp", json=body, headers=headers_of(key), timeout=WAIT_S)


def open_session(base: str, key: str | None, tag: str) -> tuple[str, list[dict[str, str]]]:
    """A handshake-era session (initialize, notifications/initialized): its id and the initialize answer's events."""
    answer = initialize(base, key, f"{tag}-init")
    assert answer.status_code == 200, answer.text
    session = answer.headers["mcp-session-id"]
    done = httpx.post(
        f"{base}/mcp",
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers=headers_of(key, session),
        timeout=WAIT_S,
    )
    assert done.status_code == 202, done.text
    return session, sse_events(answer.text)


def close_session(base: str, key: str | None, session: str) -> None:
    httpx.delete(f"{base}/mcp", headers=headers_of(key, session), timeout=WAIT_S)


def send(base: str, key: str | None, session: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{base}/mcp", json=body, headers=headers_of(key, session), timeout=WAIT_S)


async def replayed(client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> tuple[int | None, str]:
    """A `GET` with `Last-Event-ID`: its status and what its stream said until it went quiet for `QUIET_S`
    (a replayed stream stays open for what comes next), at most `MAX_REPLAY_BYTES` or `REPLAY_BOUND_S`."""
    status: int | None = None
    said: list[str] = []

    async def read() -> None:
        nonlocal status
        async with client.stream("GET", url, headers=headers) as answer:  # the headers: within WAIT_S
            status = answer.status_code
            chunks = answer.aiter_text()
            while sum(map(len, said)) <= MAX_REPLAY_BYTES:
                try:
                    said.append(await asyncio.wait_for(anext(chunks), QUIET_S))
                except (StopAsyncIteration, TimeoutError):
                    return  # the stream ended, or has nothing more to say

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(read(), REPLAY_BOUND_S)
    return status, "".join(said)


# ---- finding 1: SSE events replayed across sessions ----


@pytest.mark.parametrize("auth", [pytest.param(True, id="two-api-keys"), pytest.param(False, id="auth-off")])
async def test_sse_replay_never_crosses_sessions(auth: bool, request: pytest.FixtureRequest) -> None:
    """Finding 1 (high): one event store per endpoint holds every session's SSE events under sequential ids,
    and `GET /mcp` with any `Last-Event-ID` replays the stream that id belongs to, whoever owns it.

    Alice calls Math_Add over a 2025-11-25 session; Bob, on his own session, resumes with `Last-Event-ID`
    set to Alice's real event ids and to 1..10. Nothing of Alice's (her request ids, her result) may reach
    Bob, and the event ids Alice saw must be random (at least 22 characters: 128 bits), not 1, 2, 3, ...
    With auth off the two are two anonymous clients, each on its own session.
    """
    base = request.getfixturevalue("keyed") if auth else request.getfixturevalue("open_gateway")
    alice_key, bob_key = (ALICE_KEY, BOB_KEY) if auth else (None, None)
    tag = f"alice-{secrets.token_hex(6)}"  # in every request id of Alice's: what must never reach Bob
    a, b = secrets.randbelow(10**6) + 10**6, secrets.randbelow(10**6) + 10**6
    opened: list[tuple[str | None, str]] = []
    try:
        alice_session, alice_events = open_session(base, alice_key, tag)
        opened.append((alice_key, alice_session))
        bob_session, _ = open_session(base, bob_key, f"bob-{secrets.token_hex(6)}")
        opened.append((bob_key, bob_session))
        call = {
            "jsonrpc": "2.0",
            "id": f"{tag}-call",
            "method": "tools/call",
            "params": {"name": "Math_Add", "arguments": {"a": a, "b": b}},
        }
        answer = send(base, alice_key, alice_session, call)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("text/event-stream"), answer.text
        alice_events += sse_events(answer.text)
        results = [json.loads(e["data"]) for e in alice_events if e.get("data")]
        assert any(m.get("id") == f"{tag}-call" and str(a + b) in json.dumps(m) for m in results), results
        alice_ids = [e["id"] for e in alice_events if "id" in e]
        assert alice_ids, alice_events

        tried = list(dict.fromkeys([*alice_ids, *(str(n) for n in range(1, 11))]))
        async with httpx.AsyncClient(timeout=WAIT_S) as client:
            answers = await asyncio.gather(
                *(
                    replayed(
                        client,
                        f"{base}/mcp",
                        {**headers_of(bob_key, bob_session, "text/event-stream"), "Last-Event-ID": i},
                    )
                    for i in tried
                )
            )
        leaks = {
            last: [e["data"] for e in sse_events(text) if tag in e.get("data", "") or str(a + b) in e.get("data", "")]
            for last, (_status, text) in zip(tried, answers, strict=True)
        }
        leaks = {last: data for last, data in leaks.items() if data}
        assert not leaks, f"Bob's GET /mcp with Last-Event-ID replayed Alice's messages: {leaks}"
        assert all(len(i) >= 22 for i in alice_ids), f"Alice's SSE event ids are guessable: {alice_ids}"
    finally:
        for key, session in opened:
            close_session(base, key, session)


# ---- finding 3 (pass-through): the pipeline's limits and call log ----


@pytest.mark.parametrize("method", list(PASS_THROUGH))
def test_pass_through_requests_are_rate_limited(limited: tuple[str, Path], method: str) -> None:
    """Finding 3 (pass-through skips the pipeline): with `limits.rate.per_principal` at burst 2, `tools/call`
    is limited after 2 calls but every `resources/read`, `prompts/get`, `completion/complete`,
    `resources/list` and `prompts/list` passes. Ten in a row by one caller: at most 2 may succeed; the rest
    get a JSON-RPC error saying the caller is over its rate limit."""
    base, _log = limited
    _kind, params, name = PASS_THROUGH[method]
    _principal, key = PASS_KEYS[("rate", method)]
    caller = Caller(key, {})
    answers = [caller.request(f"{base}/mcp", method, params, name) for _ in range(10)]
    passed = [a for a in answers if "result" in a]
    assert len(passed) <= 2, f"{len(passed)} of 10 {method} passed a rate limit of burst 2: {answers[-1]}"
    refused = [a for a in answers if "result" not in a]
    for answer in refused:
        assert "over its rate limit" in answer["error"]["message"], answer


@pytest.mark.parametrize("method", list(PASS_THROUGH))
def test_pass_through_requests_are_in_the_call_log(limited: tuple[str, Path], method: str) -> None:
    """Finding 3 (pass-through skips the pipeline): no pass-through request reaches the call log. Each must
    be one `call` event naming its kind (`read`, `prompt`, `complete`, `list`), its MCP method as `tool`,
    the backend, and the caller; refused ones (the rate limit of burst 2 refuses the third) too."""
    base, log = limited
    kind, params, name = PASS_THROUGH[method]
    principal, key = PASS_KEYS[("log", method)]
    caller = Caller(key, {})
    answers = [caller.request(f"{base}/mcp", method, params, name) for _ in range(3)]
    assert any("result" in a for a in answers), answers
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    calls = [e for e in events if e.get("event") == "call" and e.get("principal") == principal]
    mine = [e for e in calls if e.get("tool") == method]
    assert len(mine) == 3, f"{len(mine)} call events for 3 {method} requests of {principal}: {calls}"
    assert all(e.get("kind") == kind for e in mine), mine
    assert all("backend" in e for e in mine), mine
    assert any(e["backend"] == "reference" and e.get("outcome") == "ok" for e in mine), mine


# ---- finding 3 (pass-through): forwarded credentials ----


@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        pytest.param("resources/read", {"uri": "test://one/whoami"}, "test://one/whoami", id="resources-read"),
        pytest.param("prompts/get", {"name": "one_whoami"}, "one_whoami", id="prompts-get"),
    ],
)
def test_pass_through_forwards_the_callers_authorization(
    open_gateway: str, method: str, params: dict[str, Any], name: str
) -> None:
    """Finding 3 (pass-through uses the backend's own credentials even where `forward_authorization: true`):
    the upstream answers the Authorization header it received; through the gateway it must be the caller's
    (`Bearer caller-token-1`), not the backend's `api_key`."""
    token = f"caller-token-1-{secrets.token_hex(4)}"
    answer = Caller(token, {}).request(f"{open_gateway}/mcp", method, params, name)
    assert "result" in answer, answer
    result = answer["result"]
    seen = result["contents"][0]["text"] if method == "resources/read" else result["messages"][0]["content"]["text"]
    assert seen == f"Bearer {token}", f"the upstream received {seen!r}, not the caller's own Authorization"


# ---- finding 3 (pass-through): unknown names list every backend ----


def counts(port: int) -> dict[str, int]:
    answer = httpx.get(f"http://127.0.0.1:{port}/counts", timeout=WAIT_S)
    answer.raise_for_status()
    return answer.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("method", "listings"),
    [
        pytest.param("prompts/get", ("prompts/list",), id="prompts-get"),
        pytest.param("resources/read", ("resources/list", "resources/templates/list"), id="resources-read"),
    ],
)
def test_unknown_names_do_not_list_every_backend_each_time(
    open_gateway: str, upstreams: tuple[int, int], method: str, listings: tuple[str, ...]
) -> None:
    """Finding 3 (an unknown prompt name or URI makes the gateway list every backend): 20 requests for
    distinct unknown names, with two MCP backends, may list each upstream at most twice (who owns what is
    learned at most once per few seconds), not once per request."""
    caller = Caller(f"caller-{secrets.token_hex(4)}", {})
    before = {port: counts(port) for port in upstreams}
    for n in range(20):
        unknown = f"nobody_{secrets.token_hex(4)}_{n}"
        key, name = ("name", unknown) if method == "prompts/get" else ("uri", f"test://{unknown}")
        answer = caller.request(f"{open_gateway}/mcp", method, {key: name}, name)
        assert "error" in answer, answer  # unknown: refused, whoever refuses it
    after = {port: counts(port) for port in upstreams}
    sent = {
        (port, listing): after[port].get(listing, 0) - before[port].get(listing, 0)
        for port in upstreams
        for listing in listings
    }
    assert all(n <= 2 for n in sent.values()), f"20 unknown {method} sent these listings upstream: {sent}"


# ---- finding 2: the result cache and forwarded credentials ----


def test_the_result_cache_never_answers_one_callers_credentials_to_another(open_gateway: str) -> None:
    """Finding 2 (the result cache ignores who asked), for MCP tools marked `readOnlyHint`: the backend
    forwards the caller's Authorization and caches for 60 s; the tool answers the header it received.
    Caller B, after caller A, must get B's own answer, not A's from the cache."""
    answers = {}
    for caller in ("token-a", "token-b"):
        token = f"{caller}-{secrets.token_hex(4)}"
        body = {"jsonrpc": "2.0", "method": "one_whoami", "params": {}, "id": caller}
        answer = httpx.post(
            f"{open_gateway}/opentool/call", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=WAIT_S
        )
        assert answer.status_code == 200 and answer.json()["error"] is None, answer.text
        answers[caller] = (token, answer.json()["result"]["result"])
    token_a, seen_a = answers["token-a"]
    token_b, seen_b = answers["token-b"]
    assert seen_a == f"Bearer {token_a}", seen_a
    assert seen_b == f"Bearer {token_b}", f"caller B got {seen_b!r}: caller A's cached answer"


# ---- finding 7: bounds without a per-principal share ----


def test_one_principal_cannot_fill_max_sessions_for_everyone(keyed: str) -> None:
    """Finding 7 (`max_sessions` has no per-principal share): with `max_sessions: 8`, Bob opens as many
    handshake-era sessions as he can (8 today); Alice must still open one, and Bob must not hold all 8
    (each principal gets a share: refused beyond it, or its own oldest session dropped)."""
    bob: list[str] = []
    alice: str | None = None
    try:
        for n in range(8):
            answer = initialize(keyed, BOB_KEY, f"bob-{n}")
            if answer.status_code != 200 or "mcp-session-id" not in answer.headers:
                break  # refused beyond his share
            bob.append(answer.headers["mcp-session-id"])
        answer = initialize(keyed, ALICE_KEY, "alice-0")
        assert answer.status_code == 200, (
            f"Bob's {len(bob)} sessions keep Alice out: {answer.status_code} {answer.text}"
        )
        alice = answer.headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": "ping", "method": "ping"}
        alive = [s for s in bob if send(keyed, BOB_KEY, s, ping).status_code == 200]
        assert len(alive) < 8, f"Bob holds all {len(alive)} sessions of max_sessions 8"
    finally:
        for session in bob:
            close_session(keyed, BOB_KEY, session)
        if alice is not None:
            close_session(keyed, ALICE_KEY, alice)


def test_one_principal_cannot_fill_max_held_calls_for_everyone(keyed: str) -> None:
    """Finding 7 (`max_held_calls` has no per-principal share): a handshake-era upstream asks its client
    mid-call; for a 2026-07-28 caller the gateway holds the call open (`max_held_calls: 4`). Bob leaves 4
    such calls unanswered; Alice's call that asks a question must still be held (an InputRequiredResult),
    not refused as rate_limited."""
    url = f"{keyed}/mcp"
    bob, alice = Caller(BOB_KEY, {"elicitation": {}}), Caller(ALICE_KEY, {"elicitation": {}})
    for n in range(4):
        bob.request(url, "tools/call", {"name": "reference_test_elicitation", "arguments": {"message": f"Bob {n}?"}})
    answer = alice.request(
        url, "tools/call", {"name": "reference_test_elicitation", "arguments": {"message": "Alice?"}}
    )
    result = answer.get("result", {})
    kind = result.get("_meta", {}).get("io.toolplex/kind")
    why = (
        " (the backend's connection is gone: a held call that is refused or expires, and is cancelled, closes the"
        " backend's whole connection to a handshake-era upstream, so every caller's calls fail after it)"
        if kind == "upstream_unavailable"
        else ""
    )
    assert result.get("resultType") == "input_required", f"Alice's call was not held ({kind}){why}: {answer}"
    assert result["inputRequests"]["q0"]["params"]["message"] == "Alice?", result
