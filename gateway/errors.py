"""Canonical error kinds: every failure anywhere becomes exactly one of these.

Fronts translate a kind into their own wire (see the README's error table);
no front invents kinds of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gateway.redaction import redact_text


class ErrorKind(StrEnum):
    MALFORMED = "malformed_request"
    TOO_LARGE = "payload_too_large"
    NOT_FOUND = "not_found"
    INVALID_ARGUMENTS = "invalid_arguments"
    TOOL_FAILED = "tool_failed"
    DEADLINE = "deadline_exceeded"
    PENDING = "pending"
    UNAUTHENTICATED = "unauthenticated"
    FORBIDDEN = "forbidden"
    MISSING_REQUIREMENT = "missing_requirement"  # a secret or user_id the tool needs
    AUTHORIZATION_REQUIRED = "authorization_required"
    UPSTREAM_UNAVAILABLE = "upstream_unavailable"
    RATE_LIMITED = "rate_limited"  # too many calls now (gateway limits, or an upstream's 429): retry after a while
    INTERNAL = "internal"


@dataclass(frozen=True)
class Failure:
    """Everything a front may need to describe one failure on its wire."""

    kind: ErrorKind
    message: str
    developer_message: str | None = None
    can_retry: bool = False
    retry_after_ms: int | None = None
    additional_prompt_content: str | None = None
    parameter_errors: dict[str, str] | None = None
    # Kind-specific facts: available versions, missing secrets, authorization
    # challenges ({"authorization": [{"id", "url", "check_url"}]}), ...
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Every text a client may read passes the logs' redaction here, once, whichever path made it:
        # a stdio server's stderr tail, an upstream's error body, a tool's own message.
        for name in ("message", "developer_message", "additional_prompt_content"):
            text = getattr(self, name)
            if isinstance(text, str) and text:
                cleaned = redact_text(text)
                if cleaned != text:
                    object.__setattr__(self, name, cleaned)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (for state stores); inverse of `from_dict`."""
        return {
            "kind": self.kind.value,
            "message": self.message,
            "developer_message": self.developer_message,
            "can_retry": self.can_retry,
            "retry_after_ms": self.retry_after_ms,
            "additional_prompt_content": self.additional_prompt_content,
            "parameter_errors": self.parameter_errors,
            "details": self.details,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Failure:
        return cls(
            kind=ErrorKind(data["kind"]),
            message=data["message"],
            developer_message=data.get("developer_message"),
            can_retry=bool(data.get("can_retry", False)),
            retry_after_ms=data.get("retry_after_ms"),
            additional_prompt_content=data.get("additional_prompt_content"),
            parameter_errors=data.get("parameter_errors"),
            details=data.get("details") or {},
        )


class GatewayError(Exception):
    """Raised anywhere below a front; carries the canonical failure."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure

    @classmethod
    def of(cls, kind: ErrorKind, message: str, **fields: Any) -> GatewayError:
        return cls(Failure(kind=kind, message=message, **fields))


class ToolError(GatewayError):
    """What a tool author raises to report a failure the caller should see.

    Every field travels as far as the client's protocol allows, so give the
    model something to act on: `additional_prompt_content`, `can_retry`.
    """

    def __init__(
        self,
        message: str,
        *,
        developer_message: str | None = None,
        can_retry: bool = False,
        retry_after_ms: int | None = None,
        additional_prompt_content: str | None = None,
    ) -> None:
        super().__init__(
            Failure(
                kind=ErrorKind.TOOL_FAILED,
                message=message,
                developer_message=developer_message,
                can_retry=can_retry,
                retry_after_ms=retry_after_ms,
                additional_prompt_content=additional_prompt_content,
            )
        )


class ConfigError(Exception):
    """A configuration that cannot run; lists every problem with its location."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems
