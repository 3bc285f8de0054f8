"""Two `toolplex serve` replicas in front of the reference server, sharing one real Redis."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path

from tests.mcp import conformance
from tests.support import served_gateway


@contextlib.contextmanager
def fronting_reference(config_text: str, redis_url: str, tmp: Path) -> Iterator[tuple[str, str]]:
    """The two replicas' MCP URLs; `config_text` names the reference server `${UPSTREAM}` and the store's
    `${REDIS_URL}` and `${KEY_PREFIX}` (a prefix of their own, so runs never share keys)."""
    config = tmp / "gateway.yaml"
    config.write_text(config_text)
    with conformance.reference_server() as upstream, contextlib.ExitStack() as stack:
        env = {"REDIS_URL": redis_url, "KEY_PREFIX": f"{tmp.name}-{secrets.token_hex(4)}:", "UPSTREAM": upstream}
        a, _ = stack.enter_context(served_gateway(config, env, tmp / "a.log"))
        b, _ = stack.enter_context(served_gateway(config, env, tmp / "b.log"))
        yield f"{a}/mcp", f"{b}/mcp"
