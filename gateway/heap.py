"""What the cyclic garbage collector scans: long-lived objects are frozen out of its way.

A full collection walks every object the collector tracks. The settings, schemas, catalog and
pipeline of a snapshot, and every module, live as long as the process or the snapshot; left
tracked, each full collection walks them all again, which showed as a per-cent cost on every
call and as a pause of tens of milliseconds in the c=32 tails (`make bench`).
"""

from __future__ import annotations

import gc


def settle_heap(*, start: bool = False) -> None:
    """Move what start-up (or a reload) built out of the cyclic collector's way.

    Settings models, schemas, the catalog and the pipeline live as long as their
    snapshot; scanning them on every full collection slowed each call by several
    per cent (measured with bench/compare_trees.py). Frozen objects are never
    collected, so at a reload the previous snapshot's garbage is collected first,
    then the rest frozen: a reload leaks nothing.

    At start-up (`start`) there is no previous snapshot, and the collections made
    while starting leave next to nothing (a few hundred objects, with 4 tools as with
    10,000): the full pass over the whole heap (30 ms at 4 tools, 100 ms at 10,000)
    is skipped, and that little garbage is frozen with the rest until the first
    reload, whose `unfreeze` hands it back to the collector.
    """
    gc.unfreeze()
    if not start:
        gc.collect()
    gc.freeze()


def settle_import() -> None:
    """Freeze what a module loaded after start-up built (the forwarder's HTTP clients, on the first forward).

    A module lives as long as the process, like what start-up built, but was loaded after
    `settle_heap` froze that: left to the collector, every full collection scans it
    again (the MCP SDK's objects, when it was loaded by its front's first request, made p99
    at c=32 about twice what it was with the SDK loaded at start: `make bench`). Nothing is
    collected first, so the few objects of the requests in flight are frozen with it, once
    per module, until the next reload.
    """
    gc.freeze()
