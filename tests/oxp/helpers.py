"""Configurations and small helpers shared by the OXP tests."""

from __future__ import annotations

from typing import Any

import httpx

FIXTURE_BACKENDS = """
backends:
  - {name: calculator, kind: python, module: "tests.oxp.fixtures.calculator:toolkit"}
  - {name: doorbell, kind: python, module: "tests.oxp.fixtures.doorbell:toolkit"}
  - {name: counter, kind: python, module: "tests.oxp.fixtures.counter:toolkit"}
  - {name: demo_requirements, kind: python, module: "adapters.python.toolkits.demo_requirements:toolkit"}
authorization:
  providers:
    demo:
      url: "https://auth.example.com/authorize?provider={provider}&user={user_id}"
      check_url: "https://auth.example.com/status?provider={provider}&user={user_id}"
"""


def oxp_config(fronts: str = "", extra: str = "") -> str:
    """The fixture backends plus an OXP front section (`fronts` is the YAML under `fronts.oxp`)."""
    section = "fronts:\n  oxp:\n" + "".join(f"    {line}\n" for line in fronts.strip().splitlines()) if fronts else ""
    return FIXTURE_BACKENDS + section + extra


async def call(client: httpx.AsyncClient, body: Any, path: str = "/tools/call", **kw: Any) -> httpx.Response:
    return await client.post(path, json=body, **kw)
