"""`@tool` and `Toolkit`: how a Python author declares tools for the gateway."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from adapters.python.schema import SignatureSchemas
from gateway.errors import ErrorKind, GatewayError
from gateway.model import AuthorizationRequirement, CallContext, Requirements

F = TypeVar("F", bound=Callable[..., Any])
ATTRIBUTE = "__toolplex_tool__"


def camel_case(name: str) -> str:
    """`word_count` -> `WordCount`; names already in CamelCase stay as they are."""
    if "_" not in name and name[:1].isupper():
        return name
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"_+", name) if part)


@dataclass(slots=True)  # no per-instance dict: a catalog may hold ten thousand
class PythonTool:
    """A function plus everything derived from it once, at decoration time."""

    func: Callable[..., Any]
    name: str
    version: str
    description: str
    schemas: SignatureSchemas
    toolkit: str | None = None
    timeout: float | None = None
    visible: bool = True
    side_effects: bool = True
    requirements: Requirements = field(default_factory=Requirements)
    blocking: bool = True
    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        self.is_async = inspect.iscoroutinefunction(self.func)  # asked on every call: found once

    def keyword_arguments(self, arguments: dict[str, Any], context: CallContext) -> dict[str, Any]:
        """The function's keyword arguments: validated, nested objects built, the call context injected."""
        try:
            kwargs = self.schemas.arguments(arguments)
        except ValidationError as exc:
            problems = {".".join(str(p) for p in e["loc"]) or "(arguments)": e["msg"] for e in exc.errors()}
            raise GatewayError.of(
                ErrorKind.INVALID_ARGUMENTS,
                "Invalid arguments: " + "; ".join(f"{k}: {v}" for k, v in problems.items()),
                parameter_errors=problems,
            ) from None
        if self.schemas.context_param:
            kwargs[self.schemas.context_param] = context
        return kwargs


_NO_REQUIREMENTS = Requirements()  # immutable: shared by every tool that needs nothing


def _requirements(
    authorization: tuple[AuthorizationRequirement, ...], secrets: tuple[str, ...], user_id: bool
) -> Requirements:
    if not authorization and not secrets and not user_id:
        return _NO_REQUIREMENTS
    return Requirements(authorization=authorization, secrets=secrets, user_id=user_id)


def tool(
    func: F | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    version: str = "1.0.0",
    toolkit: str | None = None,
    timeout: float | None = None,
    visible: bool = True,
    side_effects: bool = True,
    secrets: Iterable[str] = (),
    authorization: Iterable[AuthorizationRequirement] = (),
    user_id: bool = False,
    blocking: bool = True,
) -> Any:
    """Declare a tool; the schemas come from the type hints and the docstring.

    The function stays callable as before; the gateway reads what it needs
    from an attribute, so tests of the tool need no gateway.

    A plain (not async) function runs in a thread, so that one that waits (on a
    file, a socket, a lock) never stalls other calls. `blocking=False` declares
    that it never waits and returns in microseconds (pure computation): it then
    runs on the event loop itself, without the thread hop that costs more than
    such a function does.
    """

    def wrap(fn: F) -> F:
        tool_name = name or camel_case(fn.__name__)
        schemas = SignatureSchemas(fn, f"{tool_name}Input")
        spec = PythonTool(
            func=fn,
            name=tool_name,
            version=version,
            description=description or schemas.description or tool_name,
            schemas=schemas,
            toolkit=toolkit,
            timeout=timeout,
            visible=visible,
            side_effects=side_effects,
            requirements=_requirements(tuple(authorization), tuple(secrets), user_id),
            blocking=blocking,
        )
        setattr(fn, ATTRIBUTE, spec)
        return fn

    return wrap(func) if func is not None else wrap


@dataclass
class Toolkit:
    """A named group of `@tool` functions, the unit a YAML backend exposes."""

    name: str
    tools: list[Callable[..., Any]]
    description: str = ""

    def __post_init__(self) -> None:
        for fn in self.tools:
            if not hasattr(fn, ATTRIBUTE):
                raise TypeError(f"{fn!r} in toolkit {self.name!r} is not decorated with @tool")


def tool_of(obj: Any) -> PythonTool | None:
    return getattr(obj, ATTRIBUTE, None)
