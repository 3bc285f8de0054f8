"""In-process Python tools: the `@tool` decorator, toolkits and the backend that runs them.

Tool modules import this package for the decorator; the gateway finds the backend
kind through `ADAPTER` (entry point `toolplex.adapters`). The backend itself is
imported only when a `python` backend is configured.
"""

from adapters.python.decorator import Toolkit, tool
from adapters.python.settings import PythonBackendSettings
from gateway.errors import ToolError
from gateway.model import AuthorizationRequirement, CallContext
from gateway.plugins import Adapter, BackendPlugin

ADAPTER = Adapter(
    name="python",
    description="Python tools in this process (@tool functions, toolkits, seed-000 Tool objects, seed-002 modules)",
    backend=BackendPlugin(settings=PythonBackendSettings, factory="adapters.python.backend:PythonBackend"),
)

__all__ = ["ADAPTER", "AuthorizationRequirement", "CallContext", "ToolError", "Toolkit", "tool"]
