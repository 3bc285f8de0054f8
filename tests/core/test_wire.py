"""Raw call routes (`gateway.wire`): what they read of a request and what they send must be what
Starlette's `Request` reads and its `Response` sends, so that moving a route onto them changes
nothing on the wire. Each test compares with Starlette itself, not with a copy of its rules."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.errors import ErrorKind, GatewayError
from gateway.router import IndexedRouter
from gateway.wire import Answer, WireRequest, json_answer, raw_route


def scope_with(headers: list[tuple[bytes, bytes]], method: str = "POST", path: str = "/call") -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "headers": headers, "query_string": b"", "root_path": ""}


def receiving(*messages: dict[str, Any]) -> Any:
    queue = list(messages)
    asked: list[int] = []

    async def receive() -> dict[str, Any]:
        asked.append(1)
        return queue.pop(0)

    receive.asked = asked  # type: ignore[attr-defined]
    return receive


async def sent_by(app: Any, scope: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    await app(scope or scope_with([]), receiving(), send)
    return messages


ANSWERS = [
    (b'{"a":1}', 200, None, "application/json"),
    (b'{"a":1}', 401, {"WWW-Authenticate": "Bearer"}, "application/json"),
    (b"{}", 200, {"OXP-Version": "1.0", "Retry-After": "3"}, "application/json"),
    (b"", 204, None, None),
    (b"", 304, None, None),
    (b"x", 200, {"Content-Type": "application/problem+json"}, "application/json"),
    (b"xyz", 200, {"content-length": "3"}, "application/json"),
    (b"[]", 450, None, "application/json"),
]


@pytest.mark.parametrize(("body", "status", "headers", "media"), ANSWERS)
async def test_an_answer_is_sent_as_starlettes_response_sends_it(
    body: bytes, status: int, headers: dict[str, str] | None, media: str | None
) -> None:
    ours = await sent_by(Answer(body, status, headers, media))
    theirs = await sent_by(Response(body, status, headers, media))
    assert ours == theirs


async def test_json_answer_encodes_as_the_json_responses_of_the_fronts() -> None:
    data = {"id": "1", "result": {1: "non-string key", "x": [1.5, None]}}
    answer = json_answer(data, 202, {"X-One": "1"})
    assert answer.body == b'{"id":"1","result":{"1":"non-string key","x":[1.5,null]}}'
    assert (answer.status, answer.headers, answer.media_type) == (202, {"X-One": "1"}, "application/json")


async def test_headers_are_read_as_starlettes_request_reads_them() -> None:
    raw = [
        (b"content-type", b"application/json"),
        (b"x-api-key", b"first"),
        (b"x-api-key", b"second"),
        (b"cookie", b"node_id=abc; other=1"),
        (b"x-latin", "caf\u00e9".encode("latin-1")),
    ]
    scope = scope_with(raw)
    ours, theirs = WireRequest(scope, receiving()), Request(scope)
    for name in ("content-type", "Content-Type", "X-API-KEY", "x-latin", "absent"):
        assert ours.headers.get(name) == theirs.headers.get(name), name
        assert (name in ours.headers) == (name in theirs.headers), name
    assert ours.headers["X-Api-Key"] == "first"
    assert ours.cookies == theirs.cookies == {"node_id": "abc", "other": "1"}
    assert (ours.method, ours.path) == ("POST", "/call")


async def test_a_body_in_one_message_is_read_with_one_receive() -> None:
    receive = receiving({"type": "http.request", "body": b'{"a":1}', "more_body": False})
    assert await WireRequest(scope_with([]), receive).read(100) == b'{"a":1}'
    assert len(receive.asked) == 1


async def test_a_body_in_pieces_is_joined() -> None:
    receive = receiving(
        {"type": "http.request", "body": b"ab", "more_body": True},
        {"type": "http.request", "body": b"", "more_body": True},
        {"type": "http.request", "body": b"cd", "more_body": False},
    )
    assert await WireRequest(scope_with([]), receive).read(100) == b"abcd"


async def test_a_declared_length_over_the_limit_is_refused_without_reading() -> None:
    receive = receiving()
    request = WireRequest(scope_with([(b"content-length", b"101")]), receive)
    with pytest.raises(GatewayError) as refused:
        await request.read(100)
    assert refused.value.failure.kind is ErrorKind.TOO_LARGE
    assert "limit of 100 bytes" in refused.value.failure.message
    assert receive.asked == []


@pytest.mark.parametrize(
    "messages",
    [
        [{"type": "http.request", "body": b"x" * 101, "more_body": False}],
        [{"type": "http.request", "body": b"x" * 60, "more_body": True}] * 2,
    ],
    ids=["whole", "pieces"],
)
async def test_a_body_over_the_limit_is_refused_whatever_it_declared(messages: list[dict[str, Any]]) -> None:
    request = WireRequest(scope_with([(b"content-length", b"10")]), receiving(*messages))
    with pytest.raises(GatewayError) as refused:
        await request.read(100)
    assert refused.value.failure.kind is ErrorKind.TOO_LARGE


async def test_a_client_gone_while_sending_its_body_is_a_client_disconnect() -> None:
    receive = receiving({"type": "http.request", "body": b"ab", "more_body": True}, {"type": "http.disconnect"})
    with pytest.raises(ClientDisconnect):
        await WireRequest(scope_with([]), receive).read(100)


async def test_a_raw_route_is_called_directly_and_keeps_its_methods() -> None:
    seen: list[WireRequest] = []

    async def handler(request: WireRequest) -> Answer:
        seen.append(request)
        return json_answer({"body": (await request.read(100)).decode()})

    async def plain(_request: Request) -> Response:
        return Response(b"plain")

    router = IndexedRouter(routes=[raw_route("/call", handler, ["POST"]), Route("/plain", plain, methods=["GET"])])
    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    body = {"type": "http.request", "body": b"hi", "more_body": False}
    await router.fast(scope_with([]), receiving(body), send)
    assert isinstance(seen[0], WireRequest) and messages[1]["body"] == b'{"body":"hi"}'

    with pytest.raises(HTTPException) as refused:  # 405 with Allow, as for any route (the Edge answers it)
        await router.fast({**scope_with([], method="GET"), "app": router}, receiving(), send)
    assert refused.value.status_code == 405 and refused.value.headers == {"Allow": "POST"}
    messages.clear()
    await router.fast(scope_with([], method="GET", path="/plain"), receiving(), send)  # an Answer-free route
    assert messages[1]["body"] == b"plain"
