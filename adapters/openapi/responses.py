"""An operation's answer as the tool's value, or as the canonical failure its status stands for.

- 2xx with a JSON body (`application/json`, `+json`): the JSON value; an empty body: null.
- 2xx with text (`text/*`, XML, YAML, JavaScript, a form, or a `charset`): the text.
- 2xx with anything else (an image, a PDF, an archive): `{"media_type", "size", "base64"}`; when the call has a
  session workspace, the bytes go to a file there instead: `{"media_type", "size", "workspace_file"}`.
- 4xx/5xx: as the `http` kind maps them (`gateway.upstream.rest_failure`), an RFC 9457 problem's title and
  detail in the message and the problem object in the failure's details.
"""

from __future__ import annotations

import base64
import mimetypes
import re
from typing import Any

import httpx

from gateway.errors import GatewayError
from gateway.model import CallContext
from gateway.upstream import Upstream, is_json, json_of, rest_failure
from gateway.workspaces import Workspaces, key_for

TEXT_MEDIA = ("text/", "application/xml", "application/javascript", "application/x-www-form-urlencoded")
TEXT_SUFFIXES = ("+xml", "/yaml", "+yaml", "/x-yaml")
DOWNLOADS = "downloads"  # the workspace folder answers are written to
_FILENAME = re.compile(r"""filename\*?=(?:UTF-8'')?"?([^";]+)"?""", re.IGNORECASE)
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def is_text(response: httpx.Response) -> bool:
    header = response.headers.get("content-type", "")
    media = header.split(";", 1)[0].strip().lower()
    if not media:
        return True  # no type said: read it as text (most such answers are)
    return media.startswith(TEXT_MEDIA) or media.endswith(TEXT_SUFFIXES) or "charset=" in header.lower()


def value_of(
    upstream: Upstream,
    response: httpx.Response,
    *,
    tool: str,
    context: CallContext,
    workspaces: Workspaces | None,
) -> Any:
    """The value of a successful answer (see the module's docstring)."""
    if not response.content:
        return None
    if is_json(response):
        return json_of(upstream, response)
    if is_text(response):
        return response.text
    media = response.headers.get("content-type", "application/octet-stream").split(";", 1)[0].strip()
    if workspaces is not None and context.session_key is not None:
        return _to_workspace(response, media, tool, context, workspaces)
    return {"media_type": media, "size": len(response.content), "base64": base64.b64encode(response.content).decode()}


def _to_workspace(
    response: httpx.Response, media: str, tool: str, context: CallContext, workspaces: Workspaces
) -> dict[str, Any]:
    """The answer's bytes as a file of the caller's session workspace: `downloads/<name>`."""
    found = _FILENAME.search(response.headers.get("content-disposition", ""))
    name = _SAFE_NAME.sub("_", found.group(1)).strip("._") if found else ""
    if not name:
        name = f"{tool}-{context.call_id[:8]}{mimetypes.guess_extension(media) or '.bin'}"
    key = key_for(context)
    relative = f"{DOWNLOADS}/{name}"
    target = workspaces.resolve(key, relative)
    if len(response.content) > workspaces.room(key, replacing=target):
        raise workspaces.full(key)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(response.content)
    workspaces.touch(key)
    return {"media_type": media, "size": len(response.content), "workspace_file": relative}


def failure_of(backend: str, response: httpx.Response, *, forwarded: bool, what: str) -> GatewayError:
    """An error answer as the error the call raises."""
    developer = f"{what} answered HTTP {response.status_code}"
    return GatewayError(rest_failure(backend, response, forwarded=forwarded, developer_message=developer))
