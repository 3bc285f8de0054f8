"""Two `toolplex serve` replicas in front of the reference server, sharing one real Redis, with two API keys."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path

from tests.mcp import conformance
from tests.support import served_gateway

ALICE, BOB = secrets.token_hex(16), secrets.token_hex(16)
CONFIG = f"""
server: {{shutdown_grace_s: 2}}
state: {{store: redis, url: "${{REDIS_URL}}", key_prefix: "${{KEY_PREFIX}}"}}
auth:
  api_keys:
    - {{name: alice, key: {ALICE}}}
    - {{name: bob, key: {BOB}}}
backends:
  - {{name: reference, kind: mcp, url: "${{UPSTREAM}}", era: {{era}}}}
"""


@contextlib.contextmanager
def fronting_reference(redis_url: str, tmp: Path, era: str = "auto") -> Iterator[tuple[str, str]]:
    """The two replicas' MCP URLs, speaking `era` to the reference server (the backend's `era` key), under
    a store key prefix of their own (so runs never share keys); `ALICE` and `BOB` are the API keys."""
    config = tmp / "gateway.yaml"
    config.write_text(CONFIG.replace("{era}", era))
    with conformance.reference_server() as upstream, contextlib.ExitStack() as stack:
        env = {"REDIS_URL": redis_url, "KEY_PREFIX": f"{tmp.name}-{secrets.token_hex(4)}:", "UPSTREAM": upstream}
        a, _ = stack.enter_context(served_gateway(config, env, tmp / "a.log"))
        b, _ = stack.enter_context(served_gateway(config, env, tmp / "b.log"))
        yield f"{a}/mcp", f"{b}/mcp"
