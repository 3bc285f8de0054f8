"""A small MCP server that says who called it and counts what it was asked, for the isolation tests.

Built on the `mcp` SDK's low-level `Server` (as tests/mcp/backend/mcp_server.py and
tests/mcp/reference_server.py are), serving both protocol eras at /mcp over Streamable HTTP.
Everything it offers is named after `--name`, so that two instances behind one gateway own
different names and URIs:

- the tool `whoami` (`readOnlyHint: true`, so a `cache:` block may cache it) answers the
  `Authorization` header of the HTTP request that carried the call ("none" without one);
- the resource `test://<name>/whoami` and the prompt `<name>_whoami` answer the same;
- the resource `test://<name>/static`, the template `test://<name>/items/{id}`, the prompt
  `<name>_greeting` (argument `who`, with completions) are plain content;
- `GET /counts` answers how many requests of each method it received (JSON), so a test can count
  the listings a gateway sends it.

The header is read from the request's own context (`ctx.request`, the Starlette request the SDK
hands each handler in both eras), never from a global, so concurrent callers cannot mix.

    python -m tests.security.mcp_upstream --port 9000 --name one
"""

from __future__ import annotations

import argparse
import collections
from typing import Any, Final

import mcp_types as types
import uvicorn
from mcp.server import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

Ctx = ServerRequestContext[Any, Any]
NO_ARGUMENTS: Final = {"type": "object", "properties": {}, "additionalProperties": False}
COMPLETIONS: Final = ["Ada", "Alan", "Grace"]


def authorization(ctx: Ctx) -> str:
    """The Authorization header of the HTTP request this handler serves, or "none"."""
    headers = getattr(ctx.request, "headers", None)
    value = headers.get("authorization") if headers is not None else None
    return value or "none"


class Upstream:
    """The handlers of one named instance, and the count of every request it handled."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counts: collections.Counter[str] = collections.Counter()
        self.whoami_uri = f"test://{name}/whoami"
        self.static_uri = f"test://{name}/static"
        self.template = f"test://{name}/items/{{id}}"
        self.whoami_prompt = f"{name}_whoami"
        self.greeting_prompt = f"{name}_greeting"

    def server(self) -> Server[Any]:
        return Server(
            f"toolplex-isolation-upstream-{self.name}",
            version="1.0.0",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_templates,
            on_read_resource=self.read_resource,
            on_list_prompts=self.list_prompts,
            on_get_prompt=self.get_prompt,
            on_completion=self.complete,
        )

    async def list_tools(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        self.counts["tools/list"] += 1
        whoami = types.Tool(
            name="whoami",
            description="The Authorization header this server received with the call.",
            input_schema=NO_ARGUMENTS,
            annotations=types.ToolAnnotations(read_only_hint=True, destructive_hint=False),
        )
        return types.ListToolsResult(tools=[whoami])

    async def call_tool(self, ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        self.counts["tools/call"] += 1
        if params.name != "whoami":
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        return types.CallToolResult(content=[types.TextContent(type="text", text=authorization(ctx))])

    async def list_resources(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        self.counts["resources/list"] += 1
        return types.ListResourcesResult(
            resources=[
                types.Resource(uri=self.whoami_uri, name=f"{self.name}-whoami", mime_type="text/plain"),
                types.Resource(uri=self.static_uri, name=f"{self.name}-static", mime_type="text/plain"),
            ]
        )

    async def list_templates(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        self.counts["resources/templates/list"] += 1
        template = types.ResourceTemplate(uri_template=self.template, name=f"{self.name}-item", mime_type="text/plain")
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(self, ctx: Ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        self.counts["resources/read"] += 1
        uri = str(params.uri)
        prefix = self.template.split("{", 1)[0]
        if uri == self.whoami_uri:
            text = authorization(ctx)
        elif uri == self.static_uri:
            text = f"static text of {self.name}"
        elif uri.startswith(prefix) and "/" not in uri[len(prefix) :] and uri[len(prefix) :]:
            text = f"item {uri[len(prefix) :]} of {self.name}"
        else:
            raise MCPError(types.INVALID_PARAMS, "Resource not found", data={"uri": uri})
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="text/plain", text=text)]
        )

    async def list_prompts(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        self.counts["prompts/list"] += 1
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(name=self.whoami_prompt, description="The Authorization header this server received"),
                types.Prompt(
                    name=self.greeting_prompt,
                    description="A greeting",
                    arguments=[types.PromptArgument(name="who", description="Whom to greet", required=False)],
                ),
            ]
        )

    async def get_prompt(self, ctx: Ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        self.counts["prompts/get"] += 1
        if params.name == self.whoami_prompt:
            text = authorization(ctx)
        elif params.name == self.greeting_prompt:
            text = f"Hello, {(params.arguments or {}).get('who', 'world')}!"
        else:
            raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {params.name}", data={"name": params.name})
        message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
        return types.GetPromptResult(messages=[message])

    async def complete(self, ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        self.counts["completion/complete"] += 1
        prefix = params.argument.value.lower()
        values = [value for value in COMPLETIONS if value.lower().startswith(prefix)]
        return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))

    async def counted(self, request: Request) -> JSONResponse:
        return JSONResponse(dict(self.counts))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="TCP port on 127.0.0.1")
    parser.add_argument("--name", default="one", help="the prefix of every prompt name and resource URI")
    args = parser.parse_args(argv)
    upstream = Upstream(args.name)
    app = upstream.server().streamable_http_app(
        host="127.0.0.1", custom_starlette_routes=[Route("/counts", upstream.counted, methods=["GET"])]
    )
    uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning")).run()


if __name__ == "__main__":
    main()
