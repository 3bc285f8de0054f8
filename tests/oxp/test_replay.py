"""A call_id replay is handed out only to the caller who could make the call now (issue 10, points 2 and 3).

The record of a call is keyed by principal (API key name or JWT subject) and
fingerprinted with the user; before it is handed out, the repeat passes the
same checks as the first call: the tool is still permitted, its secrets and
user authorizations are present. Every request here is made with the
published `oxp` client (PyPI), as a real caller would.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jwt
import oxp
import pytest

from tests.oxp.fixtures import counter
from tests.oxp.helpers import oxp_config
from tests.support import asgi_client

SECRET = "replay-test-secret-0123456789-abcdefgh"
ENV = "TOOLPLEX_TEST_REPLAY_JWT_SECRET"
KEYS = """
auth:
  jwt: {secret_env: TOOLPLEX_TEST_REPLAY_JWT_SECRET}
  api_keys:
    - {name: team, key: team-key-all-0123}
    - {name: team, key: team-key-math-0123, tools: ["Calculator_*"]}
    - {name: other, key: other-key-0123456}
"""
DEADLINE_S = 10.0


@pytest.fixture(autouse=True)
async def fresh_counter() -> AsyncIterator[None]:
    counter.reset()
    yield
    counter.open_gate()


@pytest.fixture
async def app(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    monkeypatch.setenv(ENV, SECRET)
    async with asgi_client(oxp_config(extra=KEYS)) as client:
        yield client.app  # type: ignore[attr-defined]


def caller(app: Any, token: str) -> oxp.AsyncOxp:
    """The published client, talking to the in-process gateway."""
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver", timeout=30)
    return oxp.AsyncOxp(bearer_token=token, base_url="http://testserver", max_retries=0, http_client=http)


def subject(sub: str) -> str:
    return jwt.encode({"sub": sub, "exp": int(time.time()) + 300}, SECRET, algorithm="HS256")


async def refused(client: oxp.AsyncOxp, request: dict[str, Any]) -> dict[str, Any]:
    """The 400 body of a refused call (raises if the call was answered otherwise)."""
    with pytest.raises(oxp.BadRequestError) as caught:
        await client.tools.call(request=request)
    body = caught.value.body
    assert isinstance(body, dict) and body.pop("$schema") == "urn:oxp:1.0"  # the wrapped shape the client speaks
    return body


SECRET_CHECK = {"call_id": "sec-1", "tool_id": "Demo.SecretCheck"}
WITH_SECRET = {**SECRET_CHECK, "context": {"secrets": [{"id": "DEMO_API_KEY", "value": "s3cret"}]}}


async def test_a_replay_without_the_secret_gets_the_missing_secret_not_the_result(app: Any) -> None:
    async with caller(app, "team-key-all-0123") as team:
        first: Any = (await team.tools.call(request=WITH_SECRET)).result
        without = await refused(team, SECRET_CHECK)
        again: Any = (await team.tools.call(request=WITH_SECRET)).result
    assert first.success is True
    assert without == {
        "message": "Tool Demo_SecretCheck needs the secret(s) DEMO_API_KEY",
        "developer_message": "Supply them in the call context or in the gateway configuration",
        "missing_requirements": {"secrets": [{"id": "DEMO_API_KEY"}]},
    }
    assert (again.value, again.duration) == (first.value, first.duration)  # with the secret: the record


async def test_a_replay_without_the_users_authorization_gets_the_challenge(app: Any) -> None:
    request = {"call_id": "who-1", "tool_id": "Demo.WhoAmI", "context": {"user_id": "ada"}}
    granted = {**request, "context": {"user_id": "ada", "authorization": [{"id": "demo", "token": "tok"}]}}
    async with caller(app, "team-key-all-0123") as team:
        first: Any = (await team.tools.call(request=granted)).result
        challenge = await refused(team, request)
        other_user = await refused(team, {**granted, "context": {**granted["context"], "user_id": "bob"}})
    assert first.success is True and first.value["user_id"] == "ada"
    assert challenge["missing_requirements"] == {
        "authorization": [
            {
                "id": "demo",
                "url": "https://auth.example.com/authorize?provider=demo&user=ada",
                "check_url": "https://auth.example.com/status?provider=demo&user=ada",
            }
        ]
    }
    # Another user_id under the same call_id: refused, and nothing of the first call shows.
    assert other_user["message"] == "call_id 'who-1' was already used for a different call"
    assert "WhoAmI" not in str(other_user) and first.value["token_fingerprint"] not in str(other_user)


async def test_a_key_that_may_no_longer_call_the_tool_gets_no_replay(app: Any) -> None:
    """Two keys of one principal, one narrowed to Calculator_*: the narrow key cannot collect the other's run."""
    hold = {"call_id": "perm-1", "tool_id": "Counter.Hold", "input": {"key": "p"}}
    async with caller(app, "team-key-all-0123") as wide, caller(app, "team-key-math-0123") as narrow:
        running = asyncio.create_task(wide.tools.call(request=hold))
        await until(lambda: counter.RUNS["p"] == 1, "the run to start")
        while_running = await refused(narrow, hold)
        counter.open_gate()
        first: Any = (await running).result
        after = await refused(narrow, hold)
        replay: Any = (await wide.tools.call(request=hold)).result
    assert first.value == {"key": "p", "runs": 1}
    for body in (while_running, after):
        assert body == {"message": "Caller 'team' may not call tool Counter_Hold"}
    assert replay.value == first.value and counter.RUNS["p"] == 1


async def test_call_ids_belong_to_the_jwt_subject(app: Any) -> None:
    """Subjects `a:b` and `a` with call ids `c` and `b:c`: two principals, two calls, no shared record."""
    counter.open_gate()
    hold = {"tool_id": "Counter.Hold", "input": {"key": "j"}}
    async with caller(app, subject("a:b")) as first, caller(app, subject("a")) as second:
        one: Any = (await first.tools.call(request={**hold, "call_id": "c"})).result
        two: Any = (await second.tools.call(request={**hold, "call_id": "b:c"})).result
    async with caller(app, subject("ada")) as ada, caller(app, subject("bob")) as bob:
        three: Any = (await ada.tools.call(request={**hold, "call_id": "same"})).result
        four: Any = (await bob.tools.call(request={**hold, "call_id": "same"})).result
        replay: Any = (await ada.tools.call(request={**hold, "call_id": "same"})).result
    assert [r.value["runs"] for r in (one, two, three, four)] == [1, 2, 3, 4]  # each an independent call
    assert replay.value == three.value and counter.RUNS["j"] == 4


async def test_another_api_key_with_the_same_call_id_starts_its_own_call(app: Any) -> None:
    counter.open_gate()
    hold = {"call_id": "k-1", "tool_id": "Counter.Hold", "input": {"key": "k"}}
    async with caller(app, "team-key-all-0123") as team, caller(app, "other-key-0123456") as other:
        mine: Any = (await team.tools.call(request=hold)).result
        theirs: Any = (await other.tools.call(request=hold)).result
    assert (mine.value["runs"], theirs.value["runs"]) == (1, 2)


async def until(condition: Any, what: str) -> None:
    """Poll `condition` (bounded in time) instead of sleeping for a guessed while."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")
