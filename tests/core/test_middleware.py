"""Middleware: loaded by import path, before hooks may reject or rewrite, after hooks see every outcome."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from adapters.python.backend import PythonBackend
from adapters.python.settings import PythonBackendSettings
from gateway.backends import BackendContext
from gateway.catalog import Catalog
from gateway.config.models import MiddlewareEntry
from gateway.dispatch import Dispatcher
from gateway.errors import ConfigError, ErrorKind, GatewayError
from gateway.middleware import BaseMiddleware, CallLog, Middleware, build_middleware, load_middleware
from gateway.model import Call, Outcome, ToolSpec
from tests.support import BUILTIN_BACKENDS, asgi_client

HERE = "tests.core.test_middleware"


class Recorder(BaseMiddleware):
    """Writes what it saw into a journal shared by every Recorder of one gateway."""

    journal: ClassVar[list[str]] = []

    def __init__(self, label: str) -> None:
        self.label = label

    async def before(self, call: Call, spec: ToolSpec) -> None:
        self.journal.append(f"{self.label}.before {spec.flat_name}")

    async def after(self, call: Call, outcome: Outcome) -> None:
        kind = "ok" if outcome.error is None else outcome.error.kind.value
        self.journal.append(f"{self.label}.after {kind}")


class Defaults(BaseMiddleware):
    """Fills in arguments the caller left out (a rewrite)."""

    def __init__(self, tool: str, arguments: dict[str, Any]) -> None:
        self.tool = tool
        self.arguments = arguments

    async def before(self, call: Call, spec: ToolSpec) -> dict[str, Any] | None:
        if spec.flat_name != self.tool:
            return None
        return {**self.arguments, **call.arguments}


class DenyTools(BaseMiddleware):
    """Rejects some tools with a canonical failure."""

    def __init__(self, tools: list[str]) -> None:
        self.tools = set(tools)

    async def before(self, call: Call, spec: ToolSpec) -> None:
        if spec.flat_name in self.tools:
            raise GatewayError.of(ErrorKind.FORBIDDEN, f"{spec.flat_name} is switched off by policy")


class AfterOnly:
    """Duck-typed: no base class, only an after hook, and a buggy one."""

    async def after(self, call: Call, outcome: Outcome) -> None:
        raise ValueError("after hook bug")


class SyncHooks:
    def before(self, call: Call, spec: ToolSpec) -> None:
        return None


class NoHooks:
    pass


def make_config(middleware: str) -> str:
    return BUILTIN_BACKENDS + "middleware:\n" + middleware


def rpc_call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": {"tool": tool, "parameters": arguments}}


@pytest.fixture(autouse=True)
def _fresh_journal() -> None:
    Recorder.journal.clear()


async def test_hooks_run_in_order_around_dispatch_and_call_log_is_outermost() -> None:
    config = make_config(
        f'  - {{use: "{HERE}:Recorder", options: {{label: first}}}}\n'
        f'  - {{use: "{HERE}:Recorder", options: {{label: second}}}}\n'
    )
    async with asgi_client(config) as client:
        chain = client.app.state.gateway.pipeline.middleware  # type: ignore[attr-defined]
        assert [type(m).__name__ for m in chain] == ["CallLog", "Recorder", "Recorder"]
        assert all(isinstance(m, Middleware) for m in chain)
        ok = await client.post("/rpc", json=rpc_call("Math_Add", {"a": 1, "b": 2}))
        failed = await client.post("/rpc", json=rpc_call("Math_Divide", {"a": 1, "b": 0}))
    assert ok.json()["result"]["output"] == "3"
    assert failed.json()["error"]["code"] == -32000
    assert Recorder.journal == [
        "first.before Math_Add",
        "second.before Math_Add",
        "second.after ok",
        "first.after ok",
        "first.before Math_Divide",
        "second.before Math_Divide",
        "second.after tool_failed",
        "first.after tool_failed",
    ]


async def test_after_hooks_see_calls_that_never_resolved() -> None:
    config = make_config(f'  - {{use: "{HERE}:Recorder", options: {{label: r}}}}\n')
    async with asgi_client(config) as client:
        await client.post("/opentool/call", json={"jsonrpc": "2.0", "id": "x", "method": "Nope_Tool", "params": {}})
    assert Recorder.journal == ["r.after not_found"]  # no before: there was no tool to show it


async def test_before_may_rewrite_arguments_and_they_are_validated_after() -> None:
    config = make_config(f'  - {{use: "{HERE}:Defaults", options: {{tool: Math_Add, arguments: {{b: 100}}}}}}\n')
    async with asgi_client(config) as client:
        filled = await client.post("/rpc", json=rpc_call("Math_Add", {"a": 1}))
        kept = await client.post("/rpc", json=rpc_call("Math_Add", {"a": 1, "b": 2}))
        invalid = await client.post("/rpc", json=rpc_call("Math_Add", {"a": "one"}))
    assert filled.json()["result"]["output"] == "101"
    assert kept.json()["result"]["output"] == "3"
    assert invalid.json()["error"]["code"] == -32602
    assert list(invalid.json()["error"]["data"]["parameter_errors"]) == ["a"]


async def test_before_may_reject_with_a_canonical_failure_on_every_front() -> None:
    config = make_config(f'  - {{use: "{HERE}:DenyTools", options: {{tools: [Math_Divide]}}}}\n')
    async with asgi_client(config) as client:
        rpc = (await client.post("/rpc", json=rpc_call("Math_Divide", {"a": 1, "b": 2}))).json()
        opentool = (
            await client.post(
                "/opentool/call",
                json={"jsonrpc": "2.0", "id": "o", "method": "Math_Divide", "params": {"a": 1, "b": 2}},
            )
        ).json()
        other = (await client.post("/rpc", json=rpc_call("Math_Multiply", {"a": 3, "b": 2}))).json()
    assert rpc["error"]["code"] == -32002 and rpc["error"]["message"] == "Math_Divide is switched off by policy"
    assert opentool["error"]["code"] == 403
    assert other["result"]["output"] == "6"


async def test_a_failing_after_hook_is_logged_and_changes_nothing(events: list[dict[str, Any]]) -> None:
    config = make_config(f'  - {{use: "{HERE}:AfterOnly"}}\n')
    async with asgi_client(config) as client:
        answer = (await client.post("/rpc", json=rpc_call("Math_Add", {"a": 1, "b": 2}))).json()
    assert answer["result"]["output"] == "3"
    failures = [e for e in events if e["event"] == "middleware_after_failed"]
    assert [(f["middleware"], f["call_id"]) for f in failures] == [
        ("AfterOnly", answer["result"]["metadata"]["callId"])
    ]
    assert [e["outcome"] for e in events if e["event"] == "call"] == ["ok"]  # the call log still ran, once


async def test_call_log_is_the_default_and_logs_every_call_once(events: list[dict[str, Any]]) -> None:
    async with asgi_client(BUILTIN_BACKENDS) as client:
        chain = client.app.state.gateway.pipeline.middleware  # type: ignore[attr-defined]
        assert [type(m) for m in chain] == [CallLog]
        await client.post("/rpc", json=rpc_call("Math_Add", {"a": 1, "b": 2}))
        await client.post("/rpc", json=rpc_call("Nope", {}))
    calls = [e for e in events if e["event"] == "call"]
    assert [(c["tool"], c["outcome"], c["front"], c["cached"]) for c in calls] == [
        ("Math_Add", "ok", "jsonrpc", False),
        ("Nope", "not_found", "jsonrpc", False),
    ]
    assert calls[0]["backend"] == "math" and calls[0]["version"] == "1.0.0"


async def test_a_dispatcher_built_without_middleware_still_logs(events: list[dict[str, Any]]) -> None:
    dispatcher = Dispatcher(Catalog([]), {})
    outcome = await dispatcher.call(Call(tool="Nope", arguments={}))
    assert outcome.error is not None and outcome.error.kind == ErrorKind.NOT_FOUND
    assert [e["outcome"] for e in events if e["event"] == "call"] == ["not_found"]


def test_load_reports_every_bad_entry_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        load_middleware(
            [
                MiddlewareEntry(use="no_such_module:Thing"),
                MiddlewareEntry(use=f"{HERE}:Missing"),
                MiddlewareEntry(use=f"{HERE}:Recorder", options={"wrong": 1}),
                MiddlewareEntry(use=f"{HERE}:SyncHooks"),
                MiddlewareEntry(use=f"{HERE}:NoHooks"),
            ]
        )
    problems = info.value.problems
    assert len(problems) == 5
    assert problems[0].startswith("middleware[0] (no_such_module:Thing): cannot import it")
    assert problems[1].startswith(f"middleware[1] ({HERE}:Missing): cannot import it")
    assert "TypeError" in problems[2] and "wrong" in problems[2]
    assert "SyncHooks.before must be an async method" in problems[3]
    assert "neither a before nor an after hook" in problems[4]


def test_build_puts_the_call_log_first() -> None:
    chain = build_middleware([MiddlewareEntry(use=f"{HERE}:Recorder", options={"label": "x"})])
    assert [type(m) for m in chain] == [CallLog, Recorder]


async def test_a_bad_middleware_stops_the_gateway_from_starting() -> None:
    with pytest.raises(ConfigError) as info:
        async with asgi_client(make_config('  - {use: "no_such_module:Thing"}\n')):
            pass
    assert "middleware[0]" in info.value.problems[0]


def test_schema_requires_use_and_refuses_unknown_keys() -> None:
    from gateway.config import parse_config

    with pytest.raises(ConfigError) as info:
        parse_config(
            "middleware:\n  - {options: {}}\n  - {use: 'a:B', extra: 1}\n  - {use: 'not a path'}\n", "g.yaml", env={}
        )
    text = "\n".join(info.value.problems)
    assert "'use' is a required property" in text
    assert "unknown key 'extra'" in text
    assert "middleware[2].use" in text


async def test_metrics_middleware_counts_calls_and_serves_them() -> None:
    config = make_config('  - {use: "gateway.metrics:Metrics", options: {buckets: [0.1, 1]}}\n')
    config += "fronts:\n  metrics: {enabled: true}\n"
    async with asgi_client(config) as client:
        await client.post("/rpc", json=rpc_call("Math_Add", {"a": 1, "b": 2}))
        await client.post("/rpc", json=rpc_call("Math_Add", {"a": 3, "b": 2}))
        await client.post("/rpc", json=rpc_call("Math_Divide", {"a": 1, "b": 0}))
        await client.post("/rpc", json=rpc_call("Made_Up_Name", {}))
        r = await client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=")
    lines = r.text.splitlines()
    assert 'toolplex_calls_total{backend="math",front="jsonrpc",outcome="ok",tool="Math_Add"} 2.0' in lines
    assert 'toolplex_calls_total{backend="math",front="jsonrpc",outcome="tool_failed",tool="Math_Divide"} 1.0' in lines
    assert 'toolplex_calls_total{backend="(unknown)",front="jsonrpc",outcome="not_found",tool="(unknown)"} 1.0' in lines
    assert 'toolplex_call_duration_seconds_count{backend="math",front="jsonrpc",tool="Math_Add"} 2.0' in lines
    assert (
        'toolplex_call_duration_seconds_bucket{backend="math",front="jsonrpc",le="+Inf",tool="Math_Add"} 2.0' in lines
    )
    assert "Made_Up_Name" not in r.text


async def test_metrics_route_is_off_by_default_and_says_when_nothing_is_collected() -> None:
    async with asgi_client(BUILTIN_BACKENDS) as client:
        assert (await client.get("/metrics")).status_code == 404
    async with asgi_client(BUILTIN_BACKENDS + "fronts:\n  metrics: {enabled: true, path: /stats}\n") as client:
        r = await client.get("/stats")
    assert r.status_code == 404 and "gateway.metrics:Metrics" in r.json()["detail"]


async def test_metrics_need_credentials_when_auth_is_on() -> None:
    config = make_config('  - {use: "gateway.metrics:Metrics"}\n')
    config += "fronts:\n  metrics: {enabled: true}\nauth:\n  api_keys:\n    - {key: metrics-key-1}\n"
    async with asgi_client(config) as client:
        anonymous = await client.get("/metrics")
        allowed = await client.get("/metrics", headers={"Authorization": "Bearer metrics-key-1"})
    assert anonymous.status_code == 401 and allowed.status_code == 200


async def arithmetic_dispatcher(middleware: list[Any]) -> Dispatcher:
    settings = PythonBackendSettings.model_validate(
        {"name": "math", "kind": "python", "module": "adapters.python.toolkits.arithmetic:toolkit"}
    )
    backend = PythonBackend(settings, BackendContext())
    return Dispatcher(Catalog(await backend.discover()), {"math": backend}, middleware=middleware)


class Quota:
    """A whole stage: answers in place of the rest of the pipeline once its quota is spent."""

    def __init__(self, calls: int) -> None:
        self.left = calls
        self.seen: list[str] = []

    async def stage(self, call: Call, next_: Any) -> Any:
        assert call.spec is not None  # resolved and permitted before any middleware runs
        self.seen.append(call.spec.flat_name)
        if self.left <= 0:
            raise GatewayError.of(ErrorKind.RATE_LIMITED, "The quota of this gateway is spent")
        self.left -= 1
        return await next_(call)


async def test_a_middleware_stage_wraps_the_rest_of_the_pipeline(events: list[dict[str, Any]]) -> None:
    quota = Quota(1)
    dispatcher = await arithmetic_dispatcher([CallLog(), quota])
    first = await dispatcher.call(Call(tool="Math_Add", arguments={"a": 1, "b": 2}))
    second = await dispatcher.call(Call(tool="Math_Add", arguments={"a": 1, "b": 2}))
    unknown = await dispatcher.call(Call(tool="Nope", arguments={}))
    assert first.value == 3
    assert second.error is not None and second.error.kind == ErrorKind.RATE_LIMITED
    assert unknown.error is not None and unknown.error.kind == ErrorKind.NOT_FOUND
    assert quota.seen == ["Math_Add", "Math_Add"]  # an unknown tool never reaches the stage
    assert [e["outcome"] for e in events if e["event"] == "call"] == ["ok", "rate_limited", "not_found"]
