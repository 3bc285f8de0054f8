"""Dispatch rules that every front relies on: requirements, secrets, deadlines, failures."""

from __future__ import annotations

import dataclasses

import pytest

from adapters.python.backend import PythonBackend
from adapters.python.settings import PythonBackendSettings
from gateway.backends import BackendContext
from gateway.catalog import Catalog
from gateway.dispatch import Dispatcher
from gateway.errors import ErrorKind
from gateway.model import AuthorizationRequirement, Call, CallContext, Requirements


async def demo_dispatcher(**kwargs: object) -> Dispatcher:
    backends = {}
    specs = []
    for name, module in (
        ("req", "adapters.python.toolkits.demo_requirements:toolkit"),
        ("demo", "adapters.python.toolkits.demo:toolkit"),
    ):
        backend = PythonBackend(
            PythonBackendSettings.model_validate({"name": name, "kind": "python", "module": module}), BackendContext()
        )
        backends[name] = backend
        specs += await backend.discover()
    return Dispatcher(Catalog(specs), backends, **kwargs)  # type: ignore[arg-type]


async def test_configured_secrets_reach_the_tool_and_callers_win() -> None:
    dispatcher = await demo_dispatcher(secrets={"DEMO_API_KEY": "from-config", "OTHER": "never-shown"})
    configured = await dispatcher.call(Call("Demo_SecretCheck", {}))
    assert configured.error is None and configured.value["length"] == len("from-config")
    caller = await dispatcher.call(Call("Demo_SecretCheck", {}, CallContext(secrets={"DEMO_API_KEY": "x"})))
    assert caller.value["length"] == 1


async def test_missing_secret_is_named() -> None:
    dispatcher = await demo_dispatcher()
    outcome = await dispatcher.call(Call("Demo_SecretCheck", {}))
    assert outcome.error is not None and outcome.error.kind == ErrorKind.MISSING_REQUIREMENT
    assert outcome.error.details == {"secrets": ["DEMO_API_KEY"]}
    assert outcome.value is None


async def test_authorization_challenge_urls_are_encoded() -> None:
    dispatcher = await demo_dispatcher()
    spec = dispatcher.catalog.resolve("Demo_WhoAmI")
    requirement = AuthorizationRequirement(
        id="demo", scopes=("read", "write"), url="https://auth.example/a?u={user_id}&s={scopes}"
    )
    patched = dataclasses.replace(spec, requirements=Requirements(authorization=(requirement,), user_id=True))
    dispatcher.catalog = Catalog([patched])
    outcome = await dispatcher.call(Call("Demo_WhoAmI", {}, CallContext(user_id="ann&bob")))
    assert outcome.error is not None and outcome.error.kind == ErrorKind.AUTHORIZATION_REQUIRED
    assert outcome.error.details["authorization"] == [
        {"id": "demo", "url": "https://auth.example/a?u=ann%26bob&s=read%20write"}
    ]
    no_user = await dispatcher.call(Call("Demo_WhoAmI", {}))
    assert no_user.error is not None and no_user.error.kind == ErrorKind.MISSING_REQUIREMENT


async def test_authorized_call_gets_the_token() -> None:
    dispatcher = await demo_dispatcher()
    ctx = CallContext(user_id="ann", authorization={"demo": "tok"})
    outcome = await dispatcher.call(Call("Demo_WhoAmI", {}, ctx))
    assert outcome.error is None and outcome.value["user_id"] == "ann"


@pytest.mark.parametrize(("timeout", "kind"), [(0.05, ErrorKind.DEADLINE), (5.0, None)])
async def test_call_timeout_overrides_the_tool_and_is_capped(timeout: float, kind: ErrorKind | None) -> None:
    dispatcher = await demo_dispatcher(max_timeout=10)
    outcome = await dispatcher.call(Call("Demo_Sleep", {"seconds": 0.2}, timeout=timeout))
    assert (outcome.error.kind if outcome.error else None) == kind
    if kind is not None:
        assert outcome.error.can_retry and outcome.error.details["timeout_s"] == timeout  # type: ignore[union-attr]
        assert outcome.value is None
    assert dispatcher.deadline_for(Call("Demo_Sleep", {}, timeout=999), dispatcher.catalog.resolve("Demo_Sleep")) == 10
