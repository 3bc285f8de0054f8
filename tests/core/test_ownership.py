"""Per-principal shares of a bounded store (gateway/ownership.py), and the workspaces built on them."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from gateway.config.models import WorkspacesSettings
from gateway.errors import ErrorKind, GatewayError
from gateway.ownership import OwnedEntries, Shares, StoreFull, owned_key, space_of
from gateway.workspaces import WorkspaceId, Workspaces


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_owner_over_its_share_loses_its_own_least_recently_used_entries() -> None:
    store: OwnedEntries[str, str] = OwnedEntries(max_entries=8, shares=Shares(0.25))
    store.put("alice", "a", "alice's")
    dropped = [v for i in range(10) for v in store.put("bob", f"b{i}", f"bob {i}")]
    assert dropped == [f"bob {i}" for i in range(8)]  # bob's share is 2: his own oldest went, one by one
    assert store.get("alice", "a") == "alice's"
    assert store.count("bob") == 2 and len(store) == 3


def test_a_lookup_by_another_owner_is_an_unknown_key() -> None:
    store: OwnedEntries[str, str] = OwnedEntries(max_entries=8)
    store.put("alice", "shared-id", "alice's")
    assert store.get("bob", "shared-id") is None
    assert store.pop("bob", "shared-id") is None
    assert store.get("alice", "shared-id") == "alice's"


def test_a_store_full_of_other_owners_refuses_instead_of_evicting() -> None:
    store: OwnedEntries[str, int] = OwnedEntries(max_entries=4, shares=Shares(0.5), what="sessions")
    for owner in ("a", "b"):
        store.put(owner, "1", 1)
        store.put(owner, "2", 2)
    with pytest.raises(StoreFull) as refused:
        store.put("c", "1", 1)
    failure = refused.value.failure
    assert failure.kind == ErrorKind.RATE_LIMITED and failure.can_retry
    assert "limit of 4 sessions" in failure.message
    assert {owner for owner, _, _ in store.items()} == {"a", "b"}
    store.pop("a", "1")
    store.put("c", "1", 1)  # room again


def test_bytes_are_a_share_too() -> None:
    store: OwnedEntries[str, str] = OwnedEntries(max_entries=100, max_bytes=1000, shares=Shares(0.5))
    store.put("alice", "a", "x", size=300)
    assert store.put("bob", "1", "b1", size=300) == []
    assert store.put("bob", "2", "b2", size=300) == ["b1"]  # 600 > bob's 500: his own oldest goes
    with pytest.raises(GatewayError) as refused:
        store.put("bob", "3", "b3", size=501)
    assert refused.value.failure.kind == ErrorKind.TOO_LARGE
    assert store.bytes == 600 and store.get("alice", "a") == "x"


def test_growing_an_entry_counts_against_its_owner() -> None:
    store: OwnedEntries[str, str] = OwnedEntries(max_entries=10, max_bytes=100, shares=Shares(1.0))
    store.put("a", "log1", "l1", size=40)
    store.put("a", "log2", "l2", size=40)
    assert store.resize("a", "log2", 70) == ["l1"]
    assert store.bytes_of("a") == 70


def test_idle_entries_expire_whoever_owns_them() -> None:
    clock = Clock()
    store: OwnedEntries[str, str] = OwnedEntries(max_entries=10, idle_s=60, clock=clock)
    store.put("a", "1", "old")
    clock.now += 30
    store.put("b", "1", "young")
    clock.now += 40
    assert store.expire() == ["old"]
    assert store.get("b", "1") == "young"


def test_owned_keys_name_their_space_and_cannot_be_shifted() -> None:
    assert space_of(owned_key("session.mcp", "jwt:a:b", "id")) == ("session.mcp", "session.mcp:~jwt%3Aa%3Ab")
    assert space_of("rate:principal:x") == ("rate", None)
    assert owned_key("ns", "jwt:a", "b:c") != owned_key("ns", "jwt:a:b", "c")


def test_a_workspace_flood_removes_only_the_flooder_s_own(tmp_path: Path) -> None:
    spaces = Workspaces(WorkspacesSettings(root=str(tmp_path), max_workspaces=8), Shares(0.25))
    alice = WorkspaceId("alice", "session-1")
    (spaces.directory(alice) / "notes.txt").write_text("mine")
    for index in range(30):
        with contextlib.suppress(GatewayError):
            spaces.directory(WorkspaceId("bob", f"s{index}"))
    assert (spaces.directory(alice) / "notes.txt").read_text() == "mine"
    assert len(spaces) <= 1 + 2  # bob keeps his share (2 of 8)
    spaces.close()


def test_the_same_name_is_another_workspace_for_another_owner(tmp_path: Path) -> None:
    spaces = Workspaces(WorkspacesSettings(root=str(tmp_path)), Shares(0.25))
    (spaces.directory(WorkspaceId("alice", "s")) / "f").write_text("a")
    assert not (spaces.directory(WorkspaceId("bob", "s")) / "f").exists()
    spaces.close()


def test_an_owner_whose_last_entry_goes_to_make_room_keeps_the_new_one() -> None:
    store: OwnedEntries[str, str] = OwnedEntries(max_entries=1, shares=Shares(1.0))
    store.put("a", "1", "one")
    assert store.put("a", "2", "two") == ["one"]
    assert store.get("a", "2") == "two" and len(store) == 1 and store.count("a") == 1
