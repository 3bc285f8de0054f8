"""`workspaces.shared`: replicas mounting one root keep a session's files across a replica's stop."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gateway.config.models import WorkspacesSettings
from gateway.workspaces import WorkspaceId, Workspaces


def settings(root: Path, **fields: object) -> WorkspacesSettings:
    return WorkspacesSettings(root=str(root), shared=True, **fields)  # type: ignore[arg-type]


def test_a_session_adopted_by_another_replica_keeps_its_files(tmp_path: Path) -> None:
    first, second = Workspaces(settings(tmp_path)), Workspaces(settings(tmp_path))
    session = WorkspaceId(owner="alice", name="toolserver:s1")
    (first.directory(session) / "notes.txt").write_text("kept")
    first.scratch()
    first.close()  # the replica stops (drained): the session goes on elsewhere
    assert (second.directory(session) / "notes.txt").read_text() == "kept"
    other = Workspaces(settings(tmp_path))  # a replica starting later sweeps nothing of the others'
    assert (other.directory(session) / "notes.txt").read_text() == "kept"
    second.release(session)  # the session ended: its files go, whichever replica ends it
    assert not any(p.name.startswith("ws-") for p in tmp_path.iterdir())


def test_an_abandoned_workspace_is_swept_by_age_not_a_used_one(tmp_path: Path) -> None:
    replica = Workspaces(settings(tmp_path, idle_s=10))
    lost = replica.directory(WorkspaceId(owner="bob", name="toolserver:gone"))
    used = replica.directory(WorkspaceId(owner="bob", name="toolserver:alive"))
    old = time.time() - 3600
    os.utime(lost, (old, old))
    os.utime(used, (old, old))
    replica.touch(WorkspaceId(owner="bob", name="toolserver:alive"))  # used since: its age restarts
    other = Workspaces(settings(tmp_path, idle_s=10))
    other.directory(WorkspaceId(owner="carol", name="toolserver:new"))  # a new workspace: the sweep runs
    assert not lost.exists() and used.exists()


def test_shared_needs_a_root() -> None:
    with pytest.raises(ValueError, match="needs root"):
        WorkspacesSettings(shared=True)
