"""5,000 `/execute_tool` calls in one cookie session leave nothing behind (issue 10.4).

Before, every call's run stayed referenced by a timer for the retention time (10 min):
100,000 calls grew the process by 346 MB. The run registry, the 450 handles and the
sessions must stay within their bounds however many calls go through.
"""

from __future__ import annotations

import asyncio
import gc

from tests.support import BUILTIN_BACKENDS, asgi_client, track_runs

CALLS = 5_000
CONCURRENCY = 50


async def test_5000_calls_leave_no_run_handle_or_extra_session() -> None:
    async with asgi_client("fronts: {toolserver: {patience_s: 5}}\n" + BUILTIN_BACKENDS) as client:
        gateway = client.app.state.gateway  # type: ignore[attr-defined]
        alive = track_runs(gateway)
        assert (await client.post("/get_cookie")).status_code == 200
        peak = 0

        async def one(index: int) -> None:
            nonlocal peak
            r = await client.post("/execute_tool", json={"tool_name": "Math_Add", "arguments": {"a": index, "b": 1}})
            assert r.status_code == 200 and r.json() == index + 1
            peak = max(peak, gateway.runs.running + gateway.runs.finished)

        for batch in range(0, CALLS, CONCURRENCY):
            await asyncio.gather(*(one(i) for i in range(batch, min(batch + CONCURRENCY, CALLS))))
        await asyncio.sleep(0)  # let the last settle callbacks run
        gc.collect()
        still_alive = sum(1 for ref in alive if ref() is not None)
        counts = {space: gateway.store.count(space) for space in ("toolserver", "session.toolserver")}

    assert len(alive) == CALLS
    assert peak <= CONCURRENCY, peak
    assert still_alive <= 2, still_alive  # answered runs are released at once
    assert counts == {"toolserver": 0, "session.toolserver": 1}, counts  # no handle left, one session
