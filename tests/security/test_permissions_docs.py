"""docs/security.md says what the code does: its YAML examples load, and the grants it shows grant what it says."""

from __future__ import annotations

import re
import time

import jwt
import yaml

from gateway.auth import build_authenticator
from gateway.config import parse_config
from gateway.limits import Bucket, RateLimiter
from gateway.state import MemoryStore
from tests.docs.pages import DOCS
from tests.support import BUILTIN_BACKENDS

PAGE = DOCS / "security.md"
SECRET = "docs-example-secret-0123456789-abcdefgh"
ENV = {
    "TOOLPLEX_JWT_SECRET": SECRET,
    "CI_KEY": "ci-key-from-the-docs",
    "TOOLPLEX_INTROSPECTION_SECRET": "introspection-secret",
    "NOTES_CLIENT_SECRET": "notes-secret",
}


def yaml_blocks() -> list[str]:
    return re.findall(r"^```yaml\n(.*?)^```", PAGE.read_text(), re.S | re.M)


def test_the_pages_examples_are_valid_configurations() -> None:
    blocks = yaml_blocks()
    assert len(blocks) == 4  # grants, OAuth resource, OAuth client, rates
    for block in blocks:
        parse_config(block + BUILTIN_BACKENDS, "security.md", env=ENV)


def test_the_grants_example_grants_what_the_claim_table_says() -> None:
    config = parse_config(yaml_blocks()[0] + BUILTIN_BACKENDS, "security.md", env=ENV)
    authenticator = build_authenticator(config.settings.auth, ENV)

    def tools_of(**claims: object) -> tuple[str, ...] | None:
        token = jwt.encode({"sub": "ada", "exp": int(time.time()) + 60, **claims}, SECRET, algorithm="HS256")
        principal = authenticator.authenticate({"authorization": f"Bearer {token}"})
        assert principal is not None and principal.name == "jwt:ada"
        return principal.tools

    assert tools_of(scope="openid tools:math") == ("Math_*",)
    assert tools_of(scope="tools:text admin") == ("Text_*", "Time_Now", "*")
    assert tools_of() == ()
    key = authenticator.authenticate({"authorization": f"Bearer {ENV['CI_KEY']}"})
    assert key is not None and key.tools == ("Math_*",)


def test_the_rate_example_makes_the_buckets_it_describes() -> None:
    block = yaml_blocks()[-1]
    limits = parse_config(block + BUILTIN_BACKENDS, "security.md").settings.limits
    limiter = RateLimiter.from_settings(limits, MemoryStore())
    assert limiter is not None
    assert limiter.per_principal == Bucket(10, 20) and limiter.bucket_of("text") == Bucket(50, 100)
    assert limiter.bucket_of("math") == Bucket(5, 5)  # "burst: the rate rounded up (here 5)"
    assert yaml.safe_load(block)["limits"]["rate"]["backends"]["math"] == {"rate_per_s": 5}
