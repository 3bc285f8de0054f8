"""The backend contract: what a backend says of its own health reaches /readyz."""

from __future__ import annotations

from gateway.backends import Backend, Health
from tests.support import BUILTIN_BACKENDS, asgi_client


async def test_readiness_asks_each_backend_for_its_health() -> None:
    async with asgi_client(BUILTIN_BACKENDS) as client:
        gateway = client.app.state.gateway  # type: ignore[attr-defined]
        ready = (await client.get("/readyz")).json()
        assert ready["status"] == "ready"
        math: Backend = gateway.backends["math"]
        assert isinstance(math, Backend)  # the typed protocol, checked at run time

        async def failing() -> Health:
            return Health(state="down", detail="its worker pool is gone")

        math.health = failing  # type: ignore[method-assign]
        answer = await client.get("/readyz")
        states = {s["name"]: s for s in answer.json()["backends"]}
        assert answer.json()["status"] == "degraded"
        assert states["math"]["state"] == "down" and states["math"]["error"] == "its worker pool is gone"
