"""The redaction rules themselves: what is replaced in log text, and which configured values count as secrets."""

from __future__ import annotations

import logging
import sys

import pytest

from gateway.observability import config_secrets, redact_event, redact_record, redact_text


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ('HTTP Request: GET http://svc:pa55word@127.0.0.1:9/x "HTTP/1.1 200 OK"', "pa55word"),
        ("GET http://127.0.0.1:9/books/1?fields=a&access_token=tok-123 200", "tok-123"),
        ("headers={'Authorization': 'Bearer sk-live-abc'}", "sk-live-abc"),
        ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
        ("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl in a message", "c2lnbmF0dXJl"),
        ('{"x-api-key": "k-999-zzz"}', "k-999-zzz"),
        ("cookie=node_id=abcdef0123", "abcdef0123"),
        ("client_secret: hush-hush-1", "hush-hush-1"),
    ],
)
def test_credential_shapes_are_redacted(text: str, secret: str) -> None:
    assert secret not in redact_text(text)
    assert "[redacted]" in redact_text(text)


def test_ordinary_text_is_kept() -> None:
    text = "backend 'library' (http://127.0.0.1:9000/books/1) answered HTTP 404: no such book"
    assert redact_text(text) == text


def test_event_fields_are_redacted_by_name_at_any_depth() -> None:
    event = {"event": "x", "headers": {"Authorization": "abc", "accept": "json"}, "api_key": "k", "n": 3}
    out = redact_event(None, "info", event)
    assert out == {
        "event": "x",
        "headers": {"Authorization": "[redacted]", "accept": "json"},
        "api_key": "[redacted]",
        "n": 3,
    }


def test_stdlib_records_are_redacted_with_their_arguments_and_traceback() -> None:
    try:
        raise RuntimeError("failed for http://u:tracepass@h/")
    except RuntimeError:
        record = logging.LogRecord(
            "httpx", logging.INFO, __file__, 1, "GET %s", ("http://h/?k=argsecret",), sys.exc_info()
        )
    redact_record(record)
    text = logging.Formatter().format(record)
    assert "argsecret" not in text and "tracepass" not in text


def test_configured_credentials_are_found_but_names_are_not() -> None:
    data = {
        "auth": {"jwt": {"secret_env": "MY_SECRET_VAR"}, "api_keys": [{"key": "key-value-1", "name": "alice"}]},
        "secrets": {"WEATHER": "weather-value"},
        "backends": [
            {
                "name": "up",
                "url": "http://user:url-pass@h:1/x?token=url-token",
                "headers": {"X-Key": "Bearer header-cred"},
                "jwt": {"secret": "oxp-jwt-secret"},
                "api_key": "opentool-key",
            }
        ],
    }
    found = set(config_secrets(data))
    wanted = {"key-value-1", "weather-value", "url-pass", "url-token", "header-cred", "oxp-jwt-secret", "opentool-key"}
    assert wanted <= found
    assert not {"alice", "MY_SECRET_VAR", "up"} & found
