"""One real OAuth authorization server (tests/oauth/auth_server.py) per test module that asks for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.oauth.auth_server import AuthServer, missing_reason


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthServer]:
    """The server with DEFAULT_CLIENTS, RS256 for /token (ES256 and EdDSA keys in the JWKS too).

    Shared by the module's tests: a test that rotates keys or counts requests reads the state it starts from.
    """
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    with AuthServer(tmp_path_factory.mktemp("auth-server")) as server:
        yield server
