"""The ToolServerNode front's own workspace endpoints, answering as the real node does.

`/upload_file` (multipart `file`, streamed to disk) -> `{"message": "Upload Success!"}`;
`/download_file {file_path, file_type}` -> the raw bytes with `Content-Disposition:
attachment`; `/download_workspace` -> a zip; `/get_workspace_structure` -> the
recursive `{"name", "type", "children"}` tree. Used when no `toolserver` upstream
holds the files; each session has its own directory (gateway/workspaces.py).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import zipfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import FileResponse, Response

from adapters.toolserver import codec, shapes, uploads
from gateway.errors import ErrorKind, GatewayError
from gateway.http import json_response
from gateway.workspaces import MAX_ENTRIES, SHOWN_NAME, WorkspaceId, Workspaces


class WorkspaceAnswer(Exception):
    """An error answer: status and FastAPI `detail`."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail


class DownloadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file_path: str = Field(min_length=1, max_length=4096)
    file_type: str = Field(default="text/plain", max_length=256)


def _refused(exc: GatewayError) -> WorkspaceAnswer:
    status = {ErrorKind.TOO_LARGE: 413, ErrorKind.FORBIDDEN: 403}.get(exc.failure.kind, 500)
    return WorkspaceAnswer(status, exc.failure.message)


async def upload(request: Request, spaces: Workspaces, key: WorkspaceId, max_upload_bytes: int) -> Response:
    """Stream the `file` part into the workspace; a file of the same name is replaced."""
    directory = spaces.directory(key)
    partial = directory / f".upload-{secrets.token_hex(8)}"
    try:
        limit = min(max_upload_bytes, spaces.room(key))  # a replaced file is not counted as free
        with partial.open("wb") as target:
            saved = await uploads.save_file_part(request.stream(), request.headers.get("content-type"), target, limit)
        if not saved.filename:
            raise uploads.BadUpload("the 'file' part has no usable filename")
        final = spaces.resolve(key, saved.filename)
        if final.is_dir():
            raise WorkspaceAnswer(409, f"{saved.filename} is a directory in the workspace")
        os.replace(partial, final)
    except uploads.TooLarge:
        cap = "max_upload_bytes" if limit == max_upload_bytes else "the workspace's max_bytes_per_workspace"
        raise WorkspaceAnswer(413, f"The upload is larger than {limit} bytes ({cap})") from None
    except uploads.BadUpload as exc:
        item = {"type": "missing", "loc": ["body", "file"], "msg": f"Field required: {exc}", "input": None}
        raise WorkspaceAnswer(422, [item]) from None
    except GatewayError as exc:
        raise _refused(exc) from None
    finally:
        with contextlib.suppress(OSError):
            partial.unlink()
    return json_response({"message": "Upload Success!"})


def download(body: Any, spaces: Workspaces, key: WorkspaceId) -> Response:
    """The raw bytes of one workspace file, as a FileResponse (attachment), like the node."""
    if body is None:
        raise shapes.BadRequest([codec.validation_item("missing", ["body", "file_path"], "Field required", None)])
    wanted = shapes.validate_model(DownloadRequest, body)
    try:
        path = spaces.resolve(key, wanted.file_path)
    except GatewayError as exc:
        raise _refused(exc) from None
    if not path.is_file():
        raise WorkspaceAnswer(404, f"File {wanted.file_path} not found in workspace.")
    return FileResponse(path, filename=path.name, content_disposition_type="attachment")


def _tree(path: Path, budget: list[int]) -> dict[str, Any]:
    node: dict[str, Any] = {"name": path.name}
    if path.is_dir() and not path.is_symlink():
        node["type"] = "directory"
        children = []
        with contextlib.suppress(OSError):
            for child in sorted(path.iterdir(), key=lambda p: p.name):
                if child.name.startswith(".upload-"):
                    continue
                budget[0] -= 1
                if budget[0] < 0:
                    break
                children.append(_tree(child, budget))
        node["children"] = children
    else:
        node["type"] = "file"
    return node


def structure(spaces: Workspaces, key: WorkspaceId) -> Response:
    tree = _tree(spaces.directory(key), [MAX_ENTRIES])
    tree["name"] = SHOWN_NAME
    return json_response(tree)


def archive(spaces: Workspaces, key: WorkspaceId) -> Response:
    """A zip of the workspace, built on disk and removed once sent."""
    directory = spaces.directory(key)
    target = spaces.scratch() / f"workspace-{secrets.token_hex(8)}.zip"
    count = 0
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zipped:
        for folder, dirs, files in os.walk(directory):  # os.walk does not follow symbolic links
            dirs.sort()
            for name in sorted(files):
                full = Path(folder) / name
                if full.is_symlink() or name.startswith(".upload-"):
                    continue
                count += 1
                if count > MAX_ENTRIES:
                    break
                zipped.write(full, full.relative_to(directory).as_posix())
    return FileResponse(
        target,
        filename="workspace.zip",
        media_type="application/zip",
        content_disposition_type="attachment",
        background=BackgroundTask(_unlink, target),
    )


def _unlink(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
