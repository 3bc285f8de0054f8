"""FileSystemEnv: XAgent's file tools, working in the caller's session workspace.

Named, shaped and answering as XAgent's ToolServerNode `FileSystemEnv` does
(`FileSystemEnv_read_from_file`, `FileSystemEnv_write_to_file`,
`FileSystemEnv_print_filesys_struture` [sic]), so an unchanged XAgent run finds
the tools it asks for. The workspace is the one the ToolServerNode front serves
to the same session (`/upload_file`, `/download_file`, ...), found through
`gateway.workspaces` by the call's session key; a call without a session works
in its principal's default workspace. Paths never leave the workspace.
These tools must run in the gateway process (no `isolation: process`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from adapters.python import CallContext, ToolError, Toolkit, tool
from gateway import workspaces
from gateway.errors import ErrorKind, GatewayError

MAX_READ_BYTES = 100_000  # the node reads at most about this much of a file (readlines hint 1e5)
MAX_ENTRIES_PER_LEVEL = 20  # the node's max_entry_nums_for_level
ROOT_SHOWN = "/" + workspaces.SHOWN_NAME


def _workspace(context: CallContext) -> tuple[workspaces.Workspaces, workspaces.WorkspaceId]:
    try:
        return workspaces.current(), workspaces.key_for(context)
    except GatewayError as exc:
        raise ToolError(exc.failure.message) from None


def _path(context: CallContext, filepath: str) -> tuple[workspaces.Workspaces, workspaces.WorkspaceId, Path]:
    spaces, key = _workspace(context)
    try:
        return spaces, key, spaces.resolve(key, filepath)
    except GatewayError as exc:
        if exc.failure.kind != ErrorKind.FORBIDDEN:  # no room for the workspace itself: said as it is
            raise
        raise ToolError(f"File {filepath} is not within workspace.") from None


def _numbered(lines: list[str], line_number: int) -> str:
    """The node's rendering: each line prefixed with its number, right-aligned to 5 columns."""
    if not (abs(line_number) - 1 < len(lines)):
        raise ToolError(f"Line number {line_number} is out of range.")
    index = line_number if line_number >= 0 else len(lines) + line_number
    if index == 0:
        index = 1
    if line_number == 0:
        shown = lines
    elif line_number > 0:
        shown = lines[line_number - 1 :]
    else:
        shown = lines[line_number:]
    out = []
    for offset, line in enumerate(shown):
        out.append(f"{index + offset}".rjust(5) + ": " + line)
    return "".join(out)


def _read_lines(path: Path, filepath: str) -> list[str]:
    if not path.is_file():
        raise ToolError(f"File {filepath} not found in workspace.")
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        return handle.readlines(MAX_READ_BYTES)


@tool(name="read_from_file")
def read_from_file(
    context: CallContext,
    filepath: Annotated[str, "The path to the file to be opened, always use relative path to the workspace root."],
    line_number: Annotated[int, "The starting line number of the content to be opened. Defaults to 1."] = 1,
) -> str:
    """Open and read the textual file content in the workspace, you will see the content of the target file.

    Don't use this if the give `filepath` is writen or modified before, the content in `filepath` should be
    already returned.
    """
    _, _, path = _path(context, filepath)
    return _numbered(_read_lines(path, filepath), line_number)


@tool(name="write_to_file")
def write_to_file(
    context: CallContext,
    filepath: Annotated[str, "The path to the file to be modified, always use relative path to the workspace root."],
    content: Annotated[str, "The new content to be replaced with the old content."],
    truncating: Annotated[
        bool,
        "If `True`, the file will be truncated before writing, else will read current content before writing.",
    ] = False,
    line_number: Annotated[
        int | None,
        "The start line to modified file. Defaults to `None`, which means insert the new content at the end of "
        "the file. So do not provide this if you want to append the new content to the file.",
    ] = None,
    overwrite: Annotated[
        bool,
        "If `True`, the new content will overwrite content started from `line_number` line. Defaults to `False`, "
        "which insert the new content at the `line_number` line.",
    ] = False,
) -> str:
    """Write or modify the textual file lines based on `content` provided.

    Return updated content of the file after modification so no further need to call `read_from_file` for
    this file. Create file if not exists.
    """
    spaces, key, path = _path(context, filepath)
    if not path.exists():
        if line_number not in (None, 0, 1):
            raise ToolError(f"File {filepath} not found in workspace.")
        lines: list[str] = []
    elif not path.is_file():
        raise ToolError(f"File {filepath} is not a file.")
    else:
        lines = [] if truncating else _read_lines(path, filepath)
    new_lines = content.splitlines(keepends=True)
    if line_number is None:
        lines.extend(new_lines)
    else:
        start = line_number - 1 if line_number >= 1 else line_number
        if overwrite:
            lines[start : start + len(new_lines)] = new_lines
        else:
            lines[start:start] = new_lines
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    data = text.encode("utf-8")
    try:
        room = spaces.room(key, replacing=path)
    except GatewayError as exc:
        raise ToolError(exc.failure.message) from None
    if len(data) > room:
        raise ToolError(spaces.full(key).failure.message)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return _numbered(text.splitlines(keepends=True), 1) if text else ""


@tool(name="print_filesys_struture")
def print_filesys_struture(
    context: CallContext,
    return_root: Annotated[bool, "Also say which directory is the root of the workspace."] = False,
) -> str:
    """Return a tree-like structure for all files and folders in the workspace.

    Use this tool if you are not sure what files are in the workspace.
    """
    spaces, key = _workspace(context)
    base = spaces.directory(key)
    out = [f"Global Root Work Directory: {ROOT_SHOWN}\n"] if return_root else []
    seen = 0
    stack: list[tuple[Path, int]] = [(base, 0)]
    while stack and seen < workspaces.MAX_ENTRIES:
        folder, level = stack.pop()
        indent = " " * 4 * level
        name = workspaces.SHOWN_NAME if folder == base else folder.name
        out.append(f"{indent}- {name}/\n")
        try:
            entries = sorted(folder.iterdir(), key=lambda p: p.name)
        except OSError:
            continue
        seen += len(entries)
        files = [e for e in entries if e.is_symlink() or not e.is_dir()]
        for shown, entry in enumerate(files):
            if shown >= MAX_ENTRIES_PER_LEVEL:
                out.append(f"{indent}    - `wrapped`\n")
                break
            out.append(f"{indent}    - {entry.name}\n")
        folders = [e for e in entries if e.is_dir() and not e.is_symlink()]
        stack.extend((sub, level + 1) for sub in reversed(folders))
    return "".join(out)


toolkit = Toolkit(
    "FileSystemEnv",
    [read_from_file, write_to_file, print_filesys_struture],
    description="Provide a file system operation environment for Agent: files of your session's workspace",
)
