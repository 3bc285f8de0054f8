"""The backend interface and the registry of backend kinds.

A backend discovers tools and runs them; the core never needs to know how.
Kinds are looked up by name and imported lazily so that a configuration that
does not use a protocol never imports its adapter.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

from gateway.model import CallContext, ToolSpec

# kind -> "module:factory"; the factory takes (name, settings dict, gateway settings).
BACKEND_KINDS: dict[str, str] = {
    "python": "adapters.python.backend:PythonBackend",
    "opentool": "adapters.opentool.backend:OpenToolBackend",
    "http": "adapters.http.backend:HttpBackend",
    "arcade": "adapters.arcade.backend:ArcadeBackend",
    "oxp": "adapters.oxp.backend:OxpBackend",
    "typescript": "adapters.typescript.backend:TypeScriptBackend",
    "toolserver": "adapters.toolserver.backend:ToolServerBackend",
    "jsonrpc": "adapters.jsonrpc.backend:JsonRpcBackend",
}


class Backend(Protocol):
    name: str

    async def discover(self) -> list[ToolSpec]:
        """Every tool this backend serves, before routing rules are applied."""
        ...

    async def invoke(self, spec: ToolSpec, arguments: dict[str, Any], context: CallContext) -> Any:
        """Run one tool; return a JSON-able value or raise GatewayError/ToolError."""
        ...

    async def close(self) -> None: ...


def load_object(path: str) -> Any:
    """Import `module:attribute` (or just `module`)."""
    module_name, _, attribute = path.partition(":")
    module = importlib.import_module(module_name)
    obj: Any = module
    for part in filter(None, attribute.split(".")):
        obj = getattr(obj, part)
    return obj


def create_backend(settings: dict[str, Any]) -> Backend:
    kind = settings["kind"]
    factory = load_object(BACKEND_KINDS[kind])
    return factory(settings["name"], settings)
