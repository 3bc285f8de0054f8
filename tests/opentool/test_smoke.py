from tests.support import BUILTIN_BACKENDS, asgi_client


async def test_add_through_opentool() -> None:
    async with asgi_client(BUILTIN_BACKENDS) as client:
        r = await client.post(
            "/opentool/call", json={"jsonrpc": "2.0", "method": "Math_Add", "params": {"a": 10, "b": 5}, "id": "a"}
        )
        assert r.json() == {"jsonrpc": "2.0", "result": {"result": 15}, "error": None, "id": "a"}
