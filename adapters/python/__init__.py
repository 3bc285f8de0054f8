"""In-process Python tools: the `@tool` decorator, toolkits and the backend that runs them."""

from adapters.python.decorator import Toolkit, tool
from gateway.errors import ToolError
from gateway.model import AuthorizationRequirement, CallContext

__all__ = ["AuthorizationRequirement", "CallContext", "ToolError", "Toolkit", "tool"]
