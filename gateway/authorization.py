"""User-authorization providers from configuration: where a user goes to grant a tool access.

A tool names a provider (`AuthorizationRequirement.id`) and its scopes; the
operator's configuration (`authorization.providers.<id>`) says where the
authorization page and its status check live. Applied to every discovered
tool before the catalog is built, so each front's challenge carries the URL.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gateway.errors import ConfigError
from gateway.model import ToolSpec

PLACEHOLDERS = ("provider", "tool", "user_id", "scopes")


def template_problem(template: str) -> str | None:
    """Why a URL template cannot be filled by dispatch, or None when it can."""
    try:
        template.format(**dict.fromkeys(PLACEHOLDERS, "x"))
    except (KeyError, IndexError, ValueError) as exc:
        allowed = ", ".join(f"{{{name}}}" for name in PLACEHOLDERS)
        return f"cannot be filled ({type(exc).__name__}: {exc}); it may use {allowed} (write {{{{ for a brace)"
    return None


def apply_providers(specs: list[ToolSpec], section: Any) -> list[ToolSpec]:
    """Give each authorization requirement its provider's configured URLs (configuration wins).

    `section` is the typed `authorization` section: providers by id, each with `url` and `check_url`.
    """
    providers: dict[str, dict[str, str]] = {
        name: provider.model_dump(exclude_none=True) for name, provider in (section.providers or {}).items()
    }
    problems = [
        f"authorization.providers.{name}.{key}: template {template!r} {problem}"
        for name, provider in providers.items()
        for key, template in provider.items()
        if (problem := template_problem(template)) is not None
    ]
    if problems:
        raise ConfigError(problems)
    if not providers:
        return specs
    out = []
    for spec in specs:
        needs = spec.requirements
        if not any(a.id in providers for a in needs.authorization):
            out.append(spec)
            continue
        authorization = tuple(
            dataclasses.replace(
                a,
                url=providers[a.id].get("url", a.url),
                check_url=providers[a.id].get("check_url", a.check_url),
            )
            if a.id in providers
            else a
            for a in needs.authorization
        )
        out.append(dataclasses.replace(spec, requirements=dataclasses.replace(needs, authorization=authorization)))
    return out
