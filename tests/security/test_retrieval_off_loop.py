"""Retrieval over a large catalog does not block the event loop (issue 10, point 11).

A real gateway serves more than 3,000 tools. Four `/retrieving_tools` requests run at once
(the first builds the index, which takes a while over that many words); meanwhile
`/healthz` is probed again and again, each probe sent when the previous one answered. With
ranking on the event loop no probe can be answered until the first retrieval is done;
off the loop, many are. What is asserted is the order of completions, not a duration.
"""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.security.many_tools import COUNT
from tests.support import gateway_process

CONFIG = """
backends:
  - {name: many, kind: python, module: "tests.security.many_tools:toolkit"}
"""
RETRIEVALS = 4
MAX_PROBES = 5000  # bound on the probe loop (it stops as soon as the first retrieval answers)
PROBES_BEFORE = 5  # a blocked loop answers at most one or two probes that slipped in before it blocked
QUESTIONS = ["weather for a flight booking", "reset a user password", "chart of stock prices", "translate an article"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path: Path = tmp_path_factory.mktemp("retrieval") / "gateway.yaml"
    path.write_text(textwrap.dedent(CONFIG))
    with gateway_process(path) as base:
        yield base


async def test_probes_are_answered_while_retrievals_over_a_large_catalog_run(served: str) -> None:
    assert COUNT >= 3000
    ready = httpx.get(f"{served}/readyz", timeout=10).json()
    assert ready["tools"] >= 3000
    completions: list[str] = []
    limits = httpx.Limits(max_connections=RETRIEVALS + 2)
    async with httpx.AsyncClient(base_url=served, timeout=120, limits=limits) as client:

        async def retrieve(question: str) -> list[str]:
            r = await client.post("/retrieving_tools", json={"question": question, "top_k": 5})
            completions.append("retrieval")
            assert r.status_code == 200, r.text
            return list(r.json()["retrieved_tools"])

        async def probe_until_a_retrieval_answers() -> None:
            for _ in range(MAX_PROBES):
                if "retrieval" in completions:
                    return
                r = await client.get("/healthz")
                assert r.status_code == 200
                completions.append("probe")

        retrievals = [asyncio.create_task(retrieve(q)) for q in QUESTIONS[:RETRIEVALS]]
        await probe_until_a_retrieval_answers()
        found = await asyncio.gather(*retrievals)
    probes_first = completions.index("retrieval")
    assert probes_first >= PROBES_BEFORE, completions[:20]
    assert all(len(names) == 5 for names in found)
    assert all(name.startswith("Many_tool_") for names in found for name in names)
    print(f"probes answered before the first retrieval: {probes_first}")
