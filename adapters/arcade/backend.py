"""The `arcade` backend: an Arcade worker's `/worker/tools` and `/worker/tools/invoke`.

Every request carries a fresh JWT signed with the worker secret (HS256, audience
`worker`, claim `ver: "1"`), as the Arcade Engine sends it.
"""

from __future__ import annotations

import time
from typing import Any

import jwt

from adapters.arcade import codec
from adapters.arcade.settings import ArcadeBackendSettings
from gateway.backends import BackendContext, BaseBackend
from gateway.errors import GatewayError
from gateway.model import CallContext, ToolSpec
from gateway.upstream import Upstream, UpstreamSettings, json_of

TOKEN_TTL_S = 60


class ArcadeBackend(BaseBackend):
    """One Arcade worker; its calls answer once, so it declares no features."""

    settings: ArcadeBackendSettings

    def __init__(self, settings: ArcadeBackendSettings, context: BackendContext) -> None:
        self.settings = settings
        self.name = settings.name
        self.secret = settings.secret  # required and non-empty: the settings model refuses anything else
        self.upstream = Upstream(self.name, UpstreamSettings.from_config(settings, context.max_response_bytes))

    def _token(self) -> dict[str, str]:
        now = int(time.time())
        claims = {"aud": "worker", "ver": "1", "iat": now, "exp": now + TOKEN_TTL_S}
        return {"Authorization": f"Bearer {jwt.encode(claims, self.secret, algorithm='HS256')}"}

    async def discover(self) -> list[ToolSpec]:
        response = await self.upstream.request("GET", "/worker/tools", headers=self._token(), idempotent=True)
        if response.status_code != 200:
            raise self.upstream.unavailable(f"/worker/tools answered HTTP {response.status_code}")
        definitions = json_of(self.upstream, response)
        if not isinstance(definitions, list):
            raise self.upstream.unavailable("/worker/tools did not answer a list of tool definitions")
        source = f"backend {self.name!r} ({self.upstream.settings.url})"
        specs = []
        for definition in definitions:
            toolkit = definition.get("toolkit") or {}
            behavior = ((definition.get("metadata") or {}).get("behavior")) or {}
            specs.append(
                ToolSpec(
                    toolkit=toolkit.get("name") or "Arcade",
                    name=definition["name"],
                    version=codec.semver_of(toolkit.get("version")),
                    description=definition.get("description") or "",
                    input_schema=codec.input_schema(definition),
                    output_schema=codec.output_schema(definition),
                    requirements=codec.requirements(definition),
                    backend=self.name,
                    language="remote",
                    side_effects=not behavior.get("read_only", False),
                    source=source,
                    binding={
                        "name": definition["name"],
                        "toolkit": toolkit.get("name"),
                        "version": toolkit.get("version"),
                    },
                )
            )
        return specs

    def _context(self, spec: ToolSpec, context: CallContext, secrets: dict[str, str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        needs = spec.requirements
        if needs.authorization:
            token = context.authorization.get(needs.authorization[0].id)
            if token:
                out["authorization"] = {"token": token, "user_info": {}}
        if needs.secrets:
            out["secrets"] = [{"key": key, "value": secrets[key]} for key in needs.secrets if key in secrets]
        if context.user_id:
            out["user_id"] = context.user_id
        return out

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], context: CallContext) -> Any:
        secrets = context.secrets  # the caller's; a backend's settings hold no tool secrets
        body = {
            "execution_id": context.call_id,
            "tool": spec.binding,
            "inputs": arguments,
            "context": self._context(spec, context, secrets),
        }
        response = await self.upstream.request(
            "POST", "/worker/tools/invoke", json=body, headers=self._token(), deadline=context.deadline
        )
        if response.status_code >= 400:
            raise GatewayError(codec.status_failure(self.name, response))
        return codec.outcome_value(json_of(self.upstream, response), spec.flat_name)

    async def close(self) -> None:
        await self.upstream.close()
