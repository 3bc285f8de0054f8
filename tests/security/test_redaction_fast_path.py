"""The redaction shortcuts: text and events that skip the credential expressions must not need them.

`cannot_hold_shapes` lets plain text skip the five expressions, and `plain_event` lets a whole
event skip the per-field walk; each is only right if the skipped work would have changed nothing.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import LogCapture

from adapters.python.backend import PythonBackend
from adapters.python.settings import PythonBackendSettings
from gateway.backends import BackendContext
from gateway.catalog import Catalog
from gateway.dispatch import Dispatcher
from gateway.middleware import CallLog
from gateway.model import Call, CallContext
from gateway.observability import (
    REDACTED,
    cannot_hold_shapes,
    is_secret_key,
    plain_event,
    redact_event,
    redact_shapes,
    redact_text,
    redact_value,
    register_secrets,
)

SECRET = f"known-secret-{os.urandom(6).hex()}"  # unique: no other test's text can hold it
register_secrets([SECRET])
JWT = "eyJhbGciOi.eyJzdWIi.sig"
JWT_SHAPE = re.compile(r"\beyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.")

# The characters and pieces every credential shape is made of, and ordinary text around them.
PIECES = [
    *"abcxyzABCXYZ0189",
    *":/@?&=.-_\"'",
    " ", "\t", "\n", "\x0b", "\u00a0", "\u2003",
    "eyJ", "ey", "J", "Bearer ", "basic ", "Token ", "token=", "api_key: ", "password=", "Authorization: ",
    "://", "http://", "user:pw@", "?q=", "&access_token=", "[redacted]", JWT, SECRET,
]  # fmt: skip
texts = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)
# Ids and names (what most event values are), and the same with one credential-shaped piece inside.
words = st.lists(
    st.sampled_from(["Math_Add", "c-1", "1.0.0", "/x", "ey", "J", "e", "yJ", "_", "-", ".", "token", "x", SECRET]),
    max_size=4,
).map("".join)
SHAPES = ["Bearer abc", "Basic\tdXNl", JWT, "token=x", "a@b", "http://u:p@h", "?q=1", " ", ":", SECRET]
marked = st.tuples(words, st.sampled_from(SHAPES), words).map("".join)
# Text built only from characters that cannot start a shape: the shortcut's side of the line.
plain_texts = st.text(alphabet=st.characters(blacklist_characters=":=?&@", blacklist_categories=("Zs", "Cc")))


@settings(max_examples=1000, deadline=None)
@given(text=st.one_of(texts, words, marked, plain_texts, st.text()))
def test_text_that_cannot_hold_a_shape_is_what_the_expressions_leave(text: str) -> None:
    if cannot_hold_shapes(text):
        assert redact_shapes(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "Bearer abc.def",
        "Authorization: Basic dXNlcjpwYXNz",
        JWT,
        "call eyJhbGciOi.eyJzdWIi.sig",
        "http://svc:pa55word@127.0.0.1:9/x",
        "/books/1?access_token=tok-123",
        "client_secret=hush-hush-1",
        "token:abc",
    ],
)
def test_every_credential_shape_is_seen_by_the_shortcut(text: str) -> None:
    assert not cannot_hold_shapes(text)
    assert redact_text(text) != text
    assert redact_shapes(text) != text


def test_plain_words_and_ids_skip_the_expressions() -> None:
    for text in ("Math_Add", "1.0.0", "9f86d081884c7d659a2feaa0c55ad015", "jsonrpc", "", "tool_failed"):
        assert cannot_hold_shapes(text)
        assert redact_text(text) == text


def test_known_secrets_are_redacted_even_in_text_without_shapes() -> None:
    assert cannot_hold_shapes(SECRET)
    assert redact_text(f"x{SECRET}y") == f"x{REDACTED}y"


# ---- events ----


def per_field(event: dict[str, Any]) -> dict[str, Any]:
    """The redaction without the shortcut: every field judged on its own (what redact_event does after it)."""
    out = {}
    for key, value in event.items():
        if is_secret_key(key) and value is not None:
            out[key] = REDACTED
        else:
            out[key] = redact_value(value)
    return out


KEYS = [
    "event", "call_id", "tool", "front", "trace_id", "outcome", "duration_ms", "cached", "principal", "url",
    "headers", "detail", "token", "api_key", "authorization", "Authorization", "access_token", "password", "x",
]  # fmt: skip
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    texts,
    words,
    marked,
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3),
    max_leaves=8,
)
events_strategy = st.one_of(
    st.dictionaries(st.sampled_from(KEYS), scalars, max_size=8),  # flat, like most events
    st.dictionaries(st.sampled_from(KEYS), values, max_size=6),
)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event=events_strategy)
def test_a_plain_event_is_one_the_per_field_walk_leaves_unchanged(event: dict[str, Any]) -> None:
    if plain_event(event):
        assert per_field(copy.deepcopy(event)) == event
        for value in event.values():  # nor would the expressions themselves, run on each value alone
            assert not isinstance(value, str) or redact_shapes(value) == value


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event=events_strategy)
def test_redact_event_is_the_per_field_walk_and_leaks_nothing(event: dict[str, Any]) -> None:
    expected = per_field(copy.deepcopy(event))
    out = redact_event(None, "info", copy.deepcopy(event))
    assert out == expected
    written = json.dumps(out, default=str)
    assert SECRET not in written
    assert not JWT_SHAPE.search(written), written


# ---- the call event ----


@pytest.fixture
def redacted_events() -> Iterator[list[dict[str, Any]]]:
    """Events as the gateway's logger sees them after redaction (its processor, then a capture)."""
    saved = structlog.get_config()
    capture = LogCapture()
    structlog.configure(processors=[redact_event, capture], wrapper_class=structlog.make_filtering_bound_logger(0))
    try:
        yield capture.entries
    finally:
        structlog.configure(**saved)


async def logged_call(context: CallContext) -> None:
    settings_ = PythonBackendSettings.model_validate(
        {"name": "math", "kind": "python", "module": "adapters.python.toolkits.arithmetic:toolkit"}
    )
    backend = PythonBackend(settings_, BackendContext())
    dispatcher = Dispatcher(Catalog(await backend.discover()), {"math": backend}, middleware=[CallLog()])
    outcome = await dispatcher.call(Call("Math_Add", {"a": 10, "b": 5}, context))
    assert outcome.value == 15
    await backend.close()


@pytest.mark.parametrize(
    ("trace_id", "logged"),
    [
        ("Bearer abc.def", f"Bearer {REDACTED}"),
        (JWT, REDACTED),
        # SECRET is random per process: fixed ids keep every xdist worker collecting the same tests.
        pytest.param(SECRET, REDACTED, id="known-secret-[redacted]"),
        pytest.param(f"trace-{SECRET}", f"trace-{REDACTED}", id="trace-known-secret-trace-[redacted]"),
    ],
)
async def test_a_call_event_with_a_credential_is_redacted(
    redacted_events: list[dict[str, Any]], trace_id: str, logged: str
) -> None:
    await logged_call(CallContext(front="jsonrpc", trace_id=trace_id, session_id="s-1"))
    [event] = [e for e in redacted_events if e["event"] == "call"]
    assert event["trace_id"] == logged
    assert (event["tool"], event["outcome"], event["session_id"]) == ("Math_Add", "ok", "s-1")


async def test_a_plain_call_event_is_returned_unchanged(events: list[dict[str, Any]]) -> None:
    context = CallContext(front="jsonrpc", trace_id="4bf92f3577b34da6a3ce929d0e0e4736", session_id="s-1")
    await logged_call(context)
    [event] = [e for e in events if e["event"] == "call"]
    assert set(event) >= {
        "call_id", "front", "tool", "version", "backend", "duration_ms", "outcome", "cached", "principal",
        "session_id", "message_id", "trace_id",
    }  # fmt: skip
    assert plain_event(event)
    before = copy.deepcopy(event)
    assert redact_event(None, "info", event) is event
    assert event == before
    for trace_id in ("Bearer abc.def", JWT, SECRET):
        marked = {**before, "trace_id": trace_id}
        assert not plain_event(marked)
        assert redact_event(None, "info", marked)["trace_id"] != trace_id
