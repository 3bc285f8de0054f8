"""Issue 25's cross-caller matrix: every front x every stateful feature, two principals.

Alice (one API key) owns some state; Bob (another) tries to read, resume, cancel, collect, replay and
evict it: by its id (as if it leaked), by guessing ids (neighbours of hers, shorter, other case,
sequential), and by flooding the bounded store it lives in with entries of his own. Nothing of Alice's
may reach him, his answer must be exactly what an id nobody was ever given gets (status, kind, body,
ids and volatile fields masked), and her state must still be there and work afterwards. The drivers,
one per (front, feature), are in tests/security/matrix_drivers.py.

The pairs ("s": in a session the caller names; "0": without one, the principal's default; "-": the pair
does not exist, see below):

| feature                          | toolserver | jsonrpc | opentool | oxp | mcp 2025-11-25 | mcp 2026-07-28 |
| -------------------------------- | ---------- | ------- | -------- | --- | -------------- | -------------- |
| sessions                         | s          | -       | -        | -   | s              | -              |
| workspaces (FileSystemEnv tools) | s, 0       | s, 0    | 0        | 0   | s              | 0              |
| workspace files (/upload_file..) | s, 0       | -       | -        | -   | -              | -              |
| file pass-through (node)         | s, 0       | -       | -        | -   | -              | -              |
| upstream node sessions           | s, 0       | s, 0    | 0        | 0   | s              | 0              |
| upstream workspaces (jsonrpc)    | s, 0       | s, 0    | 0        | 0   | s              | 0              |
| SSE resumption                   | -          | -       | -        | -   | s              | -              |
| held calls                       | -          | -       | -        | -   | -              | 0              |
| tasks                            | -          | -       | -        | -   | -              | 0              |
| 450 handles                      | s, 0       | -       | -        | -   | -              | -              |
| 450 continuations (node)         | 0          | 0       | 0        | 0   | -              | 0              |
| call ids (finished, running)     | -          | -       | -        | 0   | -              | -              |
| call ids sent upstream (oxp)     | -          | -       | -        | 0   | -              | -              |
| cache, per caller                | 0          | 0       | 0        | 0   | s              | 0              |
| cache, shared entries            | flooded once (one store whatever the front), through jsonrpc            |

Why the others do not exist:
- sessions: OpenTool, OXP and MCP 2026-07-28 are stateless; JSON-RPC's `context.sessionId` is a label the
  client picks, not something the gateway issues or keeps (what it selects, a workspace and an upstream
  node session, is in the workspaces and node-session rows, where Bob uses Alice's label).
- SSE resumption: only the handshake era keeps events (a 2026-07-28 GET is 405); OpenTool's `/streamCall`
  has no resumption.
- held calls: only a 2026-07-28 caller is asked by `InputRequiredResult` (a handshake-era caller is asked on
  its own stream; the other fronts' questions are declined). tasks: the extension is 2026-07-28 only.
- 450 handles and file endpoints are ToolServerNode's; a continuation is handed to a ToolServerNode caller
  but is a catalog tool (`Toolplex_continue_node`), so Bob tries it through every front that calls tools
  without a session (the handshake era needs one: the 2026-07-28 row stands for MCP).
- call ids: only OXP has idempotency keys. They are the client's choice, so there is no "guess" for them
  (a guessed call_id is just a call_id: by id covers it); the cache's "id" is the arguments, likewise.
- cache (shared entries): a backend that sends nothing of the caller upstream shares one entry per
  arguments by design (the answer cannot depend on who asked): only its eviction by a flood is Bob's to try,
  once (the store does not depend on the front). The continuations' store is flooded once too.
- floods of the upstream rows' stores (the other Toolplex's workspaces and call records) are not tried:
  that gateway sees one principal, `main`, and bounds its stores for it; `main` cannot share them out.
- not covered here: handshake-era resource subscriptions (per session, so Bob cannot name Alice's; what
  two sessions share is the one upstream subscription of a URI, which Bob's unsubscribe must not end while
  she watches it: that needs her GET stream to see an update arrive, not tried here), and authentication
  off (one principal: possession of an id is access there, and only the ids' randomness, which
  `test_issued_ids_cannot_be_guessed` checks, keeps two clients apart).

"upstream node sessions", "upstream workspaces" and "call ids sent upstream" are what a backend keeps
apart at an upstream that sees every caller of the gateway as one: a `toolserver` backend's node session per
caller session (or principal), a `jsonrpc` backend's `sessionId`, an `oxp` backend's `call_id` (the upstream
is another Toolplex, as in config/examples/jsonrpc.yaml).

Real processes, started once for the module, on free loopback ports: the MCP reference server (held to
the handshake era for held calls, 2026-07-28 for tasks), tests/security/matrix_upstream.py (a REST service
answering who called it), a ToolServerManager double, and three `toolplex serve` with small bounds: `main`
(everything but the file pass-through), `nodes` (the ToolServerNode front passing files through to a
`toolserver` backend) and `inner` (FileSystemEnv and Time behind `main`'s `jsonrpc` and `oxp` backends). No
sleeps: every wait is a bounded read of an answer.
"""

from __future__ import annotations

import contextlib
import secrets
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.security import matrix_drivers as m
from tests.support import ROOT, free_port, server_process, stop, wait_for_http

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

KEYS = f"""
server: {{shutdown_grace_s: 2}}
limits: {{principal_share: {m.SHARE}}}
auth:
  api_keys:
    - {{name: alice, key: "{m.ALICE_KEY}"}}
    - {{name: bob, key: "{m.BOB_KEY}"}}
"""


INNER_KEY = f"outer-{secrets.token_hex(12)}"  # what `main`'s `jsonrpc` backend calls `inner` with


def inner_config() -> str:
    """Another Toolplex, behind `main`'s `jsonrpc` backend (config/examples/jsonrpc.yaml's setup) and its `oxp`
    backend: its FileSystemEnv tools work in the workspace of the `sessionId` the `jsonrpc` backend sends, and
    its OXP front records calls by the `call_id` the `oxp` backend sends; `main` is its one caller."""
    return f"""
server: {{shutdown_grace_s: 2}}
auth:
  api_keys:
    - {{name: outer, key: "{INNER_KEY}"}}
backends:
  - {{name: filesystem, kind: python, module: "adapters.python.toolkits.filesystem:toolkit"}}
  - {{name: time, kind: python, module: "adapters.python.toolkits.clock:toolkit"}}
"""


def main_config(reference: str, echo: int, inner: str) -> str:
    return (
        KEYS
        + f"""
state: {{max_entries: {m.STATE_MAX_ENTRIES}}}
workspaces: {{max_workspaces: {m.MAX_WORKSPACES}}}
fronts:
  mcp: {{max_sessions: {m.MCP_MAX_SESSIONS}, max_events: {m.MCP_MAX_EVENTS}}}
  toolserver: {{patience_s: 0.2}}
  oxp: {{patience_s: 0.5, retention_max_entries: {m.OXP_MAX_RECORDS}}}
backends:
  - name: math
    kind: python
    module: "adapters.python.toolkits.arithmetic:toolkit"
    cache: {{ttl_s: 60, max_entries: {m.CACHE_MAX_ENTRIES}}}
  - {{name: demo, kind: python, module: "adapters.python.toolkits.demo:toolkit"}}
  - {{name: filesystem, kind: python, module: "adapters.python.toolkits.filesystem:toolkit"}}
  - name: echo
    kind: http
    url: "http://127.0.0.1:{echo}"
    toolkit: Echo
    forward_authorization: true
    cache: {{tools: {{Me: 60}}, max_entries: {m.CACHE_MAX_ENTRIES}}}
    tools:
      - name: Me
        path: /me
        query: [tag]
        input_schema: {{type: object, properties: {{tag: {{type: string}}}}, required: [tag]}}
      - name: Run
        path: /me
        query: [tag, sleep]
        input_schema: {{type: object, properties: {{tag: {{type: string}}, sleep: {{type: number}}}}, required: [tag]}}
  - name: legacy
    kind: mcp
    url: "{reference}"
    era: legacy
    max_held_calls: {m.MAX_HELD_CALLS}
    answer_timeout_s: 60
  - {{name: modern, kind: mcp, url: "{reference}"}}
  - {{name: inner, kind: jsonrpc, url: "{inner}", api_key: "{INNER_KEY}", toolkit: Inner, retries: 0}}
  - {{name: hop, kind: oxp, url: "{inner}", api_key: "{INNER_KEY}", toolkit: Hop, retries: 0}}
"""
    )


def nodes_config(manager: int) -> str:
    return (
        KEYS
        + f"""
state: {{max_entries: {m.STATE_MAX_ENTRIES}}}
discovery: {{interval_s: 0}}
fronts:
  toolserver: {{workspace_backend: node, patience_s: 0.2}}
backends:
  - {{name: node, kind: toolserver, url: "http://127.0.0.1:{manager}", max_sessions: {m.NODE_MAX_SESSIONS}, retries: 0}}
"""
    )


@contextlib.contextmanager
def together(*managers: contextlib.AbstractContextManager[Any]) -> Iterator[list[Any]]:
    """Enter the context managers at once, each in a thread (each waits for its own process to answer), and
    exit them at once; every one that was entered is exited, also when another failed to start."""
    with ThreadPoolExecutor(len(managers)) as pool:
        futures = [pool.submit(manager.__enter__) for manager in managers]
        entered, values, failed = [], [], None
        for manager, future in zip(managers, futures, strict=True):
            try:
                values.append(future.result())
                entered.append(manager)
            except BaseException as exc:
                failed = failed or exc
        try:
            if failed is not None:
                raise failed
            yield values
        finally:
            for exited in [pool.submit(manager.__exit__, None, None, None) for manager in entered]:
                exited.result()


# How long a process may take to answer once started: `tests.support`'s 20 s, on a machine busy with other
# test runs (a load of 4 and more per core), is not always enough for a gateway's first answer.
STARTUP_S = 90.0


@contextlib.contextmanager
def upstream(module: str) -> Iterator[int]:
    """`python -m <module> --port P` on a free loopback port; P once it accepts connections."""
    port = free_port()
    with server_process([sys.executable, "-m", module, "--port", str(port)], port, timeout=STARTUP_S):
        yield port


@contextlib.contextmanager
def gateway(config: str, directory: Path) -> Iterator[str]:
    """`toolplex serve` with `config` (as tests.support.served_gateway, with `STARTUP_S` to answer); its URL."""
    (directory / "gateway.yaml").write_text(config)
    port = free_port()
    command = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(directory / "gateway.yaml")]
    with open(directory / "gateway.log", "wb") as log:
        process = subprocess.Popen([*command, "--port", str(port)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
        try:
            wait_for_http(f"http://127.0.0.1:{port}/healthz", process, timeout=STARTUP_S)
            yield f"http://127.0.0.1:{port}"
        finally:
            stop(process)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[m.Env]:
    with together(
        upstream("tests.mcp.reference_server"),
        upstream("tests.security.matrix_upstream"),
        upstream("tests.upstreams.toolserver_manager"),
        gateway(inner_config(), tmp_path_factory.mktemp("matrix-inner")),
    ) as (reference_port, echo, manager, inner):
        reference = f"http://127.0.0.1:{reference_port}/mcp"
        with (
            together(
                gateway(main_config(reference, echo, inner), tmp_path_factory.mktemp("matrix-main")),
                gateway(nodes_config(manager), tmp_path_factory.mktemp("matrix-nodes")),
            ) as (main, nodes),
            m.client() as http,
        ):
            yield m.Env(main, nodes, http)


DRIVERS = m.drivers()
ATTACKS = [
    pytest.param(driver, attempt, id=f"{driver.label}-{attempt.label}")
    for driver in DRIVERS
    for attempt in driver.attempts
]
FLOODS = [pytest.param(driver, id=driver.label) for driver in DRIVERS if driver.floods]
ISSUED = [pytest.param(driver, id=driver.label) for driver in DRIVERS if driver.issued]


@pytest.mark.parametrize(("driver", "attempt"), ATTACKS)
def test_bob_cannot_reach_alices_state(env: m.Env, driver: m.Driver, attempt: m.Attempt) -> None:
    """Bob's request at Alice's id (or a guess) is answered as one at an unknown id, with nothing of hers in
    it; her state is still there and works after it."""
    ref = driver.create(env)
    try:
        unknown = driver.unknown(ref)
        target, control = attempt.target(ref), attempt.target(unknown)
        theirs = attempt.send(env, ref, target)
        baseline = attempt.send(env, unknown, control)
        assert m.shape(theirs, [target, *ref.ids.values()]) == m.shape(baseline, [control, *unknown.ids.values()]), (
            f"Bob's {attempt.label} of Alice's {driver.feature} through {driver.front_label} is answered otherwise "
            f"than an unknown id's:\n  hers:    {theirs}\n  unknown: {baseline}"
        )
        leaked = driver.leaks(ref, attempt, theirs)
        assert not leaked, f"Bob's {attempt.label} got Alice's {leaked}: {theirs}"
        driver.intact(env, ref)
    finally:
        driver.cleanup(env, ref)


@pytest.mark.parametrize("driver", FLOODS)
def test_bobs_flood_evicts_nothing_of_alices(env: m.Env, driver: m.Driver) -> None:
    """Bob fills the store Alice's state lives in with several times its bound of his own entries: only his
    own oldest go (or his newest are refused); Alice's state is still there and works."""
    ref = driver.create(env)
    try:
        driver.flood(env)
        driver.intact(env, ref)
    finally:
        driver.cleanup(env, ref)


@pytest.mark.parametrize("driver", ISSUED)
def test_issued_ids_cannot_be_guessed(env: m.Env, driver: m.Driver) -> None:
    """Every id the gateway hands out for Alice's state holds at least 128 random bits, and none repeats."""
    issued = []
    for _ in range(2):  # one after the other: some stores hold one entry of Alice's at a time (held calls)
        ref = driver.create(env)
        driver.cleanup(env, ref)
        issued.append(ref.ids)
    for key in driver.issued:
        ids = [one[key] for one in issued]
        assert ids[0] != ids[1], f"{driver.label}: the {key} {ids[0]} was issued twice"
        short = [i for i in ids if m.id_bits(i) < 128]
        assert not short, f"{driver.label}: the {key} {short} holds fewer than 128 bits"
