"""Arguments as requests: every style/explode combination against the OpenAPI 3.1 "Style Examples" table,
and the bodies (JSON, form, multipart, binary, text) an operation's media type asks for."""

from __future__ import annotations

import base64

import pytest

from adapters.openapi.requests import (
    Body,
    Built,
    Encoding,
    Param,
    build,
    encode_body,
    expand_path,
    expand_query,
    serialise,
)
from gateway.errors import ErrorKind, GatewayError

STRING = "blue"
ARRAY = ["blue", "black", "brown"]
OBJECT = {"R": 100, "G": 200, "B": 150}

# OpenAPI 3.1.1, 4.8.12.4 "Style Examples": parameter `color`, (style, explode) -> (empty, string, array, object).
# None: n/a in the table. The table shows the serialisation as it appears in the URL (percent-encoded).
TABLE = {
    ("matrix", False): (";color", ";color=blue", ";color=blue,black,brown", ";color=R,100,G,200,B,150"),
    ("matrix", True): (";color", ";color=blue", ";color=blue;color=black;color=brown", ";R=100;G=200;B=150"),
    ("label", False): (".", ".blue", ".blue,black,brown", ".R,100,G,200,B,150"),
    ("label", True): (".", ".blue", ".blue.black.brown", ".R=100.G=200.B=150"),
    ("form", False): ("color=", "color=blue", "color=blue,black,brown", "color=R,100,G,200,B,150"),
    ("form", True): ("color=", "color=blue", "color=blue&color=black&color=brown", "R=100&G=200&B=150"),
    ("simple", False): ("", "blue", "blue,black,brown", "R,100,G,200,B,150"),
    ("simple", True): ("", "blue", "blue,black,brown", "R=100,G=200,B=150"),
    ("spaceDelimited", False): (None, None, "color=blue%20black%20brown", "color=R%20100%20G%20200%20B%20150"),
    ("pipeDelimited", False): (None, None, "color=blue%7Cblack%7Cbrown", "color=R%7C100%7CG%7C200%7CB%7C150"),
    ("deepObject", True): (None, None, None, "color%5BR%5D=100&color%5BG%5D=200&color%5BB%5D=150"),
}


def _serialised(style: str, explode: bool, value: object) -> str:
    if style in ("matrix", "label", "simple"):
        return expand_path(style, explode, "color", value, lambda text: text)
    return "&".join(expand_query(style, explode, "color", value))


COLUMNS = ("empty", "string", "array", "object")
CELLS = [
    pytest.param(style, explode, column, id=f"{style}-{explode}-{COLUMNS[column]}")
    for (style, explode), row in TABLE.items()
    for column, cell in enumerate(row)
    if cell is not None  # n/a in the specification's table: no cell to check
]


@pytest.mark.parametrize(("style", "explode", "column"), CELLS)
def test_style_examples_table(style: str, explode: bool, column: int) -> None:
    expected = TABLE[(style, explode)][column]
    value = ("", STRING, ARRAY, OBJECT)[column]
    assert _serialised(style, explode, value) == expected


def test_values_are_percent_encoded_unless_reserved_is_allowed() -> None:
    assert expand_query("form", True, "q", "a b&c/d") == ["q=a%20b%26c%2Fd"]
    assert expand_query("form", True, "q", "a b&c/d", allow_reserved=True) == ["q=a%20b&c/d"]
    assert expand_query("form", False, "q", ["a,b", "c"]) == ["q=a%2Cb,c"]  # a comma in a value is not a delimiter
    assert expand_query("form", True, "flag", True) == ["flag=true"]
    assert expand_query("deepObject", True, "f", {"a": {"b": 1}, "l": [1, 2]}) == [
        "f%5Ba%5D%5Bb%5D=1",
        "f%5Bl%5D%5B%5D=1",
        "f%5Bl%5D%5B%5D=2",
    ]


def test_a_path_parameter_stays_one_segment() -> None:
    built = Built(path="/files/{name}", query=[], headers={}, cookies=[])
    serialise(Param("name", "name", "path", "simple", False), "a/b c", built)
    assert built.path == "/files/a%2Fb%20c"
    for bad in ("..", "%2e%2e", ""):
        with pytest.raises(GatewayError) as caught:
            serialise(Param("name", "name", "path", "simple", False), bad, Built("/f/{name}", [], {}, []))
        assert caught.value.failure.kind is ErrorKind.INVALID_ARGUMENTS


def test_headers_and_cookies() -> None:
    built = Built(path="/", query=[], headers={}, cookies=[])
    serialise(Param("X-Tags", "X-Tags", "header", "simple", False), ["a", "b"], built)
    serialise(Param("X-Obj", "X-Obj", "header", "simple", True), {"r": 1}, built)
    serialise(Param("ids", "ids", "cookie", "form", False), [1, 2], built)
    serialise(Param("s", "s", "cookie", "form", True), "a b", built)
    assert built.headers == {"X-Tags": "a,b", "X-Obj": "r=1"}
    assert built.cookies == [("ids", "1,2"), ("s", "a%20b")]
    with pytest.raises(GatewayError):
        serialise(Param("X-Bad", "X-Bad", "header", "simple", False), "a\r\nInjected: 1", built)


def test_content_parameters_are_json() -> None:
    built = Built(path="/", query=[], headers={}, cookies=[])
    serialise(Param("f", "f", "query", "form", True, media_type="application/json"), {"a": [1]}, built)
    assert built.query == ["f=%7B%22a%22%3A%5B1%5D%7D"]


def test_build_splits_arguments_between_parameters_and_a_flat_body() -> None:
    body = Body("application/json", None, "json", True, frozenset({"title"}))
    params = (Param("id", "id", "path", "simple", False), Param("dry", "dry", "query", "form", True))
    built, headers, content = build("POST", "/items/{id}", params, body, {"id": 7, "dry": False, "title": "t"}, bytes)
    assert (built.path, built.query) == ("/items/7", ["dry=false"])
    assert headers == {"Content-Type": "application/json"}
    assert content == b'{"title":"t"}'


def test_a_body_under_its_own_argument_is_sent_whole() -> None:
    body = Body("application/json", "body", "json", True)
    _, _, content = build("PUT", "/x", (), body, {"body": [1, 2]}, bytes)
    assert content == b"[1,2]"
    _, headers, content = build("PUT", "/x", (), Body("application/json", "body", "json"), {}, bytes)
    assert headers is None and content is None  # an optional body not given: none sent


def test_form_bodies_follow_their_encoding() -> None:
    body = Body(
        "application/x-www-form-urlencoded",
        None,
        "form",
        encoding={"ids": Encoding(style="form", explode=False), "colour": Encoding(style="deepObject")},
    )
    headers, content = encode_body(body, {"name": "a b", "ids": [1, 2], "tags": ["x", "y"], "colour": {"r": 1}}, bytes)
    assert headers == {"Content-Type": "application/x-www-form-urlencoded"}
    assert content == b"name=a%20b&ids=1,2&tags=x&tags=y&colour%5Br%5D=1"


def test_multipart_files_from_base64_and_from_the_workspace() -> None:
    body = Body(
        "multipart/form-data",
        None,
        "multipart",
        files=frozenset({"file", "more"}),
        shapes={"more": "array", "tags": "array"},
        encoding={"meta": Encoding(content_type="application/json")},
    )
    files = {"notes.txt": b"from the workspace"}
    value = {
        "file": base64.b64encode(b"hello").decode(),
        "more": [{"workspace_file": "notes.txt", "media_type": "text/plain"}],
        "meta": {"author": "me"},
        "tags": ["a", "b"],
    }
    headers, content = encode_body(body, value, files.__getitem__)
    assert headers["Content-Type"].startswith("multipart/form-data; boundary=")
    text = content.decode()
    assert 'name="file"; filename="file"\r\nContent-Type: application/octet-stream\r\n\r\nhello' in text
    assert 'name="more"; filename="notes.txt"\r\nContent-Type: text/plain\r\n\r\nfrom the workspace' in text
    assert 'name="meta"\r\nContent-Type: application/json\r\n\r\n{"author":"me"}' in text
    assert text.count('name="tags"') == 2
    with pytest.raises(GatewayError) as caught:
        encode_body(body, {"file": "not base64!"}, bytes)
    assert caught.value.failure.parameter_errors == {
        "file": "Must be base64 text, {base64: ...} or {workspace_file: ...}"
    }


def test_binary_and_text_bodies() -> None:
    headers, content = encode_body(Body("image/png", "body", "binary"), {"base64": "AAE="}, bytes)
    assert (headers, content) == ({"Content-Type": "image/png"}, b"\x00\x01")
    headers, content = encode_body(Body("text/plain", "body", "text"), "hi", bytes)
    assert (headers, content) == ({"Content-Type": "text/plain"}, b"hi")
