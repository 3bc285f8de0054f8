"""Workspaces: one bounded directory of files per client session, for tools that work on files.

The ToolServerNode front serves them (`/upload_file`, `/download_file`, ...) and
Python tools reach them (the `FileSystemEnv` toolkit) through `current()`, keyed
by `CallContext.session_key`, so a session's files are seen by that session only.
A call without a session works in its principal's default workspace.

Each workspace belongs to its principal (`gateway.ownership`): a principal may
hold its share (`limits.principal_share`) of `max_workspaces` directories,
beyond which its own least recently used one is removed; when every directory
is someone else's, a new one is refused (`rate_limited`), never made by removing
another principal's. Each holds at most `max_bytes_per_workspace` bytes and
`MAX_ENTRIES` files and folders; a workspace unused for `idle_s` is removed, and
so is one whose session is released. Without a configured root the directories
live in a per-process temporary directory removed at close. A shared root
(`workspaces.shared`, a volume every replica mounts) outlives each replica: a
session another replica adopts finds its files, and abandoned directories are
swept by age.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from gateway.config.models import WorkspacesSettings
from gateway.errors import ErrorKind, GatewayError
from gateway.model import CallContext, principal_name
from gateway.ownership import OwnedEntries, Shares, StoreFull

MAX_ENTRIES = 10_000  # files and folders in one workspace: bounds every walk of it
DIR_PATTERN = re.compile(r"^ws-[0-9a-f]{32}$")
SWEEP_EVERY_S = 60.0  # a shared root is looked through for abandoned workspaces at most this often
SHOWN_NAME = "workspace"  # what clients see as the workspace's own name (the real node's directory name)


@dataclass(frozen=True)
class WorkspaceId:
    """A workspace: its owner (a principal's name, "" with auth off) and its name within the owner's."""

    owner: str
    name: str


def key_for(context: CallContext) -> WorkspaceId:
    """The workspace of a call: its session's, else its principal's default one."""
    owner = principal_name(context.principal)
    return WorkspaceId(owner, context.session_key or f"default/{owner}")


def outside(path: str) -> GatewayError:
    return GatewayError.of(ErrorKind.FORBIDDEN, f"Path {path!r} is not within the workspace")


class Workspaces:
    """WorkspaceId -> directory; thread-safe (Python tools run in threads)."""

    def __init__(self, settings: WorkspacesSettings, shares: Shares | None = None) -> None:
        self.settings = settings
        self._root: Path | None = None
        self._temporary = settings.root is None
        self._swept_at = float("-inf")  # monotonic time of the last sweep of a shared root
        self._held: OwnedEntries[str, Path] = OwnedEntries(
            max_entries=max(1, settings.max_workspaces), shares=shares, idle_s=settings.idle_s, what="workspaces"
        )
        self._lock = threading.Lock()

    # ---- the root ----

    @property
    def root(self) -> Path:
        with self._lock:
            return self._root_locked()

    def _root_locked(self) -> Path:
        if self._root is None:
            if self._temporary:
                self._root = Path(tempfile.mkdtemp(prefix="toolplex-workspaces-"))
            else:
                self._root = Path(str(self.settings.root)).resolve()
                self._root.mkdir(parents=True, exist_ok=True)
                if not self.shared:  # left by an earlier run: nobody can reach them any more
                    self._sweep(self._root, older_than=None)
        return self._root

    @property
    def shared(self) -> bool:
        """Every replica mounts the root (`workspaces.shared`): others' workspaces are there too."""
        return bool(getattr(self.settings, "shared", False))

    def _sweep(self, root: Path, older_than: float | None) -> None:
        """Remove the workspace directories under `root` (only those untouched for `older_than` s, when given)."""
        now = time.time()
        for stale in root.iterdir():
            if not (DIR_PATTERN.match(stale.name) and stale.is_dir() and not stale.is_symlink()):
                continue
            try:
                if older_than is not None and now - stale.stat().st_mtime < older_than:
                    continue
            except OSError:
                continue
            shutil.rmtree(stale, ignore_errors=True)

    def _sweep_shared(self, root: Path) -> None:
        """In a shared root, the workspaces no replica touched for twice `idle_s` (their sessions are gone too),
        at most once a minute: what a lost replica left is not kept for ever."""
        now = time.monotonic()
        if now - self._swept_at < SWEEP_EVERY_S:
            return
        self._swept_at = now
        self._sweep(root, older_than=2 * self.settings.idle_s)

    def scratch(self) -> Path:
        """A directory beside the workspaces for files in transit (spooled uploads, zips); this process's own
        when the root is shared."""
        path = self.root / (f".scratch-{os.getpid()}" if self.shared else ".scratch")
        path.mkdir(exist_ok=True)
        return path

    @staticmethod
    def _name(workspace: WorkspaceId) -> str:
        return "ws-" + hashlib.sha256(f"{workspace.owner}\x00{workspace.name}".encode()).hexdigest()[:32]

    # ---- workspaces ----

    def directory(self, workspace: WorkspaceId) -> Path:
        """The directory of `workspace`, created when new; using it restarts its idle timer.

        A new one beyond the owner's share removes the owner's own least recently used one; one the
        gateway has no room for (every directory someone else's) is refused with `rate_limited`.
        """
        with self._lock:
            root = self._root_locked()
            path = self._held.get(workspace.owner, workspace.name)
            evicted = self._held.expire()  # idle ones go whoever uses the gateway next
            if path is None:
                path = root / self._name(workspace)
                try:
                    evicted += self._held.put(workspace.owner, workspace.name, path)
                except StoreFull as refused:
                    self._remove(evicted + [p for p in refused.dropped if isinstance(p, Path)])
                    raise
                if self.shared:
                    self._sweep_shared(root)
            path.mkdir(exist_ok=True)
            if self.shared:
                os.utime(path)  # in use: no replica's sweep takes it
        self._remove(evicted)
        return path

    @staticmethod
    def _remove(paths: list[Path]) -> None:
        for old in paths:
            shutil.rmtree(old, ignore_errors=True)

    def touch(self, workspace: WorkspaceId) -> None:
        """Keep an existing workspace alive (its session was used); creates nothing."""
        with self._lock:
            path = self._held.get(workspace.owner, workspace.name)
        if path is not None and self.shared:
            with contextlib.suppress(OSError):
                os.utime(path)

    def release(self, workspace: WorkspaceId) -> None:
        """The session ended: its files go."""
        with self._lock:
            path = self._held.pop(workspace.owner, workspace.name)
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)

    def __len__(self) -> int:
        return len(self._held)

    def close(self) -> None:
        """Remove every workspace (and the root, when it is ours)."""
        with self._lock:
            root, paths = self._root, self._held.clear()
            self._root = None
        if root is None:
            return
        if self._temporary:
            shutil.rmtree(root, ignore_errors=True)
            return
        if self.shared:  # the sessions go on elsewhere: their files stay for the replica that adopts them
            shutil.rmtree(root / f".scratch-{os.getpid()}", ignore_errors=True)
            return
        self._remove(paths)
        shutil.rmtree(root / ".scratch", ignore_errors=True)

    # ---- paths and room ----

    def resolve(self, key: WorkspaceId, relative: str) -> Path:
        """`relative` inside the workspace of `key`; anything that would leave it is refused.

        A leading `/` or `workspace/` is read as the workspace root, as the real node does;
        `..` that climbs out, and symbolic links on the way, are refused.
        """
        base = self.directory(key)
        if "\x00" in relative:
            raise outside(relative)
        cleaned = relative.replace("\\", "/").strip()
        cleaned = cleaned.lstrip("/")
        if cleaned == SHOWN_NAME or cleaned.startswith(SHOWN_NAME + "/"):
            cleaned = cleaned[len(SHOWN_NAME) :].lstrip("/")
        target = base
        for part in cleaned.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if target == base:
                    raise outside(relative)
                target = target.parent
                continue
            target = target / part
            if target.is_symlink():
                raise outside(relative)
        return target

    def usage(self, directory: Path) -> tuple[int, int]:
        """(bytes, entries) under a workspace directory; symbolic links are not followed."""
        total = entries = 0
        stack = [directory]
        while stack and entries <= MAX_ENTRIES:
            current = stack.pop()
            try:
                listing = list(os.scandir(current))
            except OSError:
                continue
            for entry in listing:
                entries += 1
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                else:
                    with contextlib.suppress(OSError):
                        total += entry.stat(follow_symlinks=False).st_size
        return total, entries

    def room(self, key: WorkspaceId, replacing: Path | None = None) -> int:
        """Bytes that may still be written to the workspace of `key` (a file being replaced counts as free)."""
        used, entries = self.usage(self.directory(key))
        if entries >= MAX_ENTRIES:
            raise GatewayError.of(
                ErrorKind.TOO_LARGE, f"The workspace holds {MAX_ENTRIES} files and folders, its limit"
            )
        if replacing is not None and replacing.is_file() and not replacing.is_symlink():
            used -= replacing.stat().st_size
        return max(0, self.settings.max_bytes_per_workspace - used)

    def full(self, key: WorkspaceId) -> GatewayError:
        return GatewayError.of(
            ErrorKind.TOO_LARGE,
            f"The workspace would exceed its limit of {self.settings.max_bytes_per_workspace} bytes",
        )


# One gateway per process serves its workspaces to in-process tools; set while it runs.
_current: Workspaces | None = None
_current_lock = threading.Lock()


def install(workspaces: Workspaces) -> None:
    global _current
    with _current_lock:
        _current = workspaces


def uninstall(workspaces: Workspaces) -> None:
    global _current
    with _current_lock:
        if _current is workspaces:
            _current = None


def current() -> Workspaces:
    """The running gateway's workspaces; a clear error where there is none (e.g. in a worker process)."""
    found = _current
    if found is None:
        raise GatewayError.of(
            ErrorKind.INTERNAL,
            "No workspaces in this process: workspace tools run in the gateway process (isolation: none)",
        )
    return found
