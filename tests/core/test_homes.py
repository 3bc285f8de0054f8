"""Homes: a key's home replica recorded under its owner, and the route to it (here, there, gone)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from starlette.requests import Request

from gateway.forwarding import HOP_HEADER, Forwarder
from gateway.homes import Homes, Where
from gateway.replicas import Replicas
from gateway.state import MemoryStore

OTHER_URL = "http://127.0.0.1:9"  # never dialled: routing only reads the address


@pytest.fixture
async def two() -> AsyncIterator[tuple[Homes, Replicas]]:
    """This replica's Homes, and another live replica sharing its store."""
    store = MemoryStore()
    here = Replicas(store, lease_s=15)
    other = Replicas(store, lease_s=15)
    await other.register(OTHER_URL)
    forwarder = Forwarder(here, timeout_s=5)
    try:
        yield Homes(store, here, forwarder), other
    finally:
        await other.deregister()
        await forwarder.close()


def request(*, forwarded: bool = False) -> Request:
    headers = [(HOP_HEADER.encode(), b"some-replica")] if forwarded else []
    return Request({"type": "http", "method": "POST", "path": "/", "headers": headers, "query_string": b""})


async def test_a_home_is_found_only_by_its_owner(two: tuple[Homes, Replicas]) -> None:
    homes, _ = two
    await homes.record("space", "alice", "s1", 60, note="kept")
    assert await homes.find("space", "alice", "s1") == {"home": homes.here, "principal": "alice", "note": "kept"}
    assert await homes.find("space", "bob", "s1") is None  # another principal's: as an unknown name
    assert await homes.find("other-space", "alice", "s1") is None
    assert await homes.touch("space", "bob", "s1", 60) is False
    await homes.forget("space", "bob", "s1")  # another principal's forget reaches nothing
    assert await homes.find("space", "alice", "s1") is not None
    await homes.forget("space", "alice", "s1")
    assert await homes.find("space", "alice", "s1") is None
    assert await homes.touch("space", "alice", "s1", 60) is False


async def test_a_request_is_served_here_forwarded_there_or_reported_gone(two: tuple[Homes, Replicas]) -> None:
    homes, other = two
    assert (await homes.route(homes.here, request())).where is Where.HERE
    there = await homes.route(other.id, request())
    assert (there.where, there.url) == (Where.THERE, OTHER_URL)
    assert (await homes.route(other.id, request(forwarded=True))).where is Where.HERE  # never forwarded twice
    assert await homes.alive(other.id)
    await other.deregister()  # its lease withdrawn: what lived there is lost
    assert (await homes.route(other.id, request())).where is Where.GONE
    assert not await homes.alive(other.id)
    assert (await homes.route("never-registered", request())).where is Where.GONE
