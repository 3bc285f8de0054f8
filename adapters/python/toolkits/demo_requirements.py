"""Demo tools with requirements: one needs a secret, one needs a user and their authorization.

They show how a tool receives what the caller supplies in its call context
(OXP `context.secrets`, `context.authorization`, `context.user_id`), and what
a client sees when it is missing. Neither ever returns a secret or a token:
a SHA-256 fingerprint proves which value arrived.
"""

from __future__ import annotations

import hashlib

from adapters.python import AuthorizationRequirement, CallContext, ToolError, Toolkit, tool

SECRET_ID = "DEMO_API_KEY"
PROVIDER_ID = "demo"  # its URLs come from `authorization.providers.demo` in the configuration


def _fingerprint(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:16]


@tool(name="SecretCheck", secrets=[SECRET_ID], side_effects=False)
def secret_check(context: CallContext) -> dict[str, object]:
    """Confirm that the DEMO_API_KEY secret reached the tool: its length and fingerprint, never its value."""
    value = context.secrets.get(SECRET_ID)
    if value is None:
        raise ToolError(
            f"The secret {SECRET_ID} did not reach the tool",
            developer_message="Send it in context.secrets, or set it under `secrets:` in the configuration",
        )
    return {"secret": SECRET_ID, "length": len(value), "fingerprint": _fingerprint(value)}


@tool(
    name="WhoAmI",
    user_id=True,
    authorization=[AuthorizationRequirement(id=PROVIDER_ID, scopes=("profile",))],
    side_effects=False,
)
def who_am_i(context: CallContext) -> dict[str, object]:
    """Say which user is calling and which token for the demo provider the tool received."""
    token = context.authorization[PROVIDER_ID]
    return {"user_id": context.user_id, "provider": PROVIDER_ID, "token_fingerprint": _fingerprint(token)}


toolkit = Toolkit("Demo", [secret_check, who_am_i], description="Tools that need a secret or a user's authorization")
