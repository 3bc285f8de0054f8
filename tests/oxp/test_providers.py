"""Authorization providers from configuration: their URL templates reach each tool's challenge."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.authorization import apply_providers
from gateway.config.models import AuthorizationSettings
from gateway.errors import ConfigError
from gateway.model import AuthorizationRequirement, Requirements, ToolSpec
from tests.oxp.helpers import FIXTURE_BACKENDS
from tests.support import asgi_client


def spec(*requirements: AuthorizationRequirement) -> ToolSpec:
    return ToolSpec(
        toolkit="Kit",
        name="Tool",
        version="1.0.0",
        description="",
        input_schema={"type": "object"},
        requirements=Requirements(authorization=requirements),
    )


def section_of(data: dict[str, Any]) -> AuthorizationSettings:
    """The typed `authorization` section, as the configuration loader hands it over."""
    return AuthorizationSettings.model_validate(data)


def test_configured_urls_win_over_the_tools_own() -> None:
    own = AuthorizationRequirement(id="github", scopes=("repo",), url="https://old/{provider}")
    untouched = AuthorizationRequirement(id="other", url="https://other")
    section = {"providers": {"github": {"url": "https://auth/{provider}?s={scopes}", "check_url": "https://c"}}}
    [out] = apply_providers([spec(own, untouched)], section_of(section))
    github, other = out.requirements.authorization
    assert (github.url, github.check_url, github.scopes) == (
        "https://auth/{provider}?s={scopes}",
        "https://c",
        ("repo",),
    )
    assert other == untouched


def test_tools_without_a_configured_provider_are_unchanged() -> None:
    tool = spec(AuthorizationRequirement(id="github"))
    assert apply_providers([tool], section_of({})) == [tool]
    assert apply_providers([tool], section_of({"providers": {"slack": {"url": "https://s"}}})) == [tool]


@pytest.mark.parametrize("template", ["https://a/{nope}", "https://a/{0}", "https://a/{provider"])
def test_templates_that_cannot_be_filled_are_config_errors(template: str) -> None:
    with pytest.raises(ConfigError, match=r"authorization.providers.demo.url: template .* cannot be filled"):
        apply_providers([], section_of({"providers": {"demo": {"url": template}}}))


async def test_a_bad_template_stops_the_gateway_from_starting() -> None:
    config = FIXTURE_BACKENDS.replace("{user_id}", "{user}")
    with pytest.raises(ConfigError, match="cannot be filled"):
        async with asgi_client(config):
            pass
