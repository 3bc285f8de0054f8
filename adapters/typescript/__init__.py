"""TypeScript tools: a pool of Node.js sidecars speaking JSON-RPC over stdio."""

from adapters.typescript.settings import TypeScriptBackendSettings
from gateway.plugins import Adapter, BackendPlugin

ADAPTER = Adapter(
    name="typescript",
    description="TypeScript or JavaScript tools with zod schemas, run by Node.js sidecars",
    backend=BackendPlugin(settings=TypeScriptBackendSettings, factory="adapters.typescript.backend:TypeScriptBackend"),
)

__all__ = ["ADAPTER"]
