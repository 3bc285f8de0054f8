"""Tool-definition pinning: a trusted upstream that changes a tool's definition is noticed (the "rug pull").

On first discovery each upstream tool's definition (`definition_of`: its name and version, description, input
and output schemas, annotations) is hashed canonically (`definition_hash`: sha256 of its JSON with sorted keys
and no whitespace) and recorded in the state store, where every replica reads it. A later discovery that finds
another definition is a *change*: recorded as pending (with the definition, for a diff), logged with the diff and
counted; then, by the backend's mode:

- `warn` (the default) serves the new definition;
- `enforce` quarantines the tool (`ToolSpec.quarantine`): every call is refused as `forbidden`, naming the
  change, and listings show it to admins only, until an administrator approves it. A definition that changes
  back to the approved one is served again.

A pin is the tool on its backend without its version (`pin_id`): the upstream chooses the version, so a new
version of a known tool is a change against the approved definition, not a new pin trusted on first use. Only a
backend's first discovery (no pin of it in the store or the pin file) is trusted on first use; once it has pins,
a tool name it did not have before is a change too (kind "added": no approved definition, quarantined in enforce
until approved).

`approve` makes the pending definition the approved one; `reject` keeps the approved one and remembers the
rejected hash: a tool serving it stays quarantined (enforce) and is not asked about again. A pin file
(`pinning.file`) holds approved definitions committed with the configuration: a deployment starts from them,
and a first discovery that differs from the file is a change.

Which tools: those of upstream backends (every kind whose settings are `UpstreamBackendSettings`, or that relays
an upstream protocol), whose definitions a third party controls. In-process Python and TypeScript tools ship with
the gateway's own deployment and are not pinned unless their backend sets `pinning.mode` itself.

In the store (namespace `pins`, bounded in entries and bytes but never evicted: a write past its bounds is
refused, see `gateway.state.KEPT`, and the tool it was for is not approved; entries live `PIN_TTL_S`, renewed
while the tool is discovered): `pins:approved:<pin>` the approved record (its `versions` map the approved hash of
each version served at once), `pins:pending:<pin>` the change awaiting a decision, `pins:index:<backend>` the pins
of a backend (what `PinAdmin.list` walks, and what says the backend has a baseline). A pin's id is
`<backend>/<flat name>`, the tool as the gateway serves it. Nothing here knows a wire format.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import structlog
import yaml

from gateway.errors import ConfigError, GatewayError
from gateway.model import Quarantine, ToolSpec
from gateway.settings import BackendSettings, UpstreamBackendSettings
from gateway.state import size_of
from gateway.timestamps import utc_iso

if TYPE_CHECKING:
    from gateway.catalog import Catalog
    from gateway.config import GatewayConfig
    from gateway.state import StateStore

log = structlog.get_logger("toolplex.pinning")

NAMESPACE = "pins"
PIN_TTL_S = 90 * 86400.0  # a pin whose tool is discovered no more goes after this; renewed while it is
TOUCH_EVERY_S = 3600.0  # how often one process renews the approved record of a tool it keeps discovering
MAX_REJECTED = 16  # rejected hashes remembered per pin
MAX_VERSIONS = 16  # approved versions remembered per pin (a backend may serve several versions of a tool at once)
MAX_DIFF_CHARS = 8192  # of a diff in a log line
FILE_VERSION = 1
FILE_HEADER = "# Approved tool definitions (toolplex pins approve --write-file); see docs/pinning.md\n"
HASH_PREFIX = "sha256:"
MODES = ("off", "warn", "enforce")


# ---- definitions and their hash ----


def definition_of(spec: ToolSpec) -> dict[str, Any]:
    """What is pinned of a tool: everything a model reads of it, none of what the gateway's configuration decides
    (visibility, deadlines). Annotations are the canonical ones plus an upstream's own (an MCP server's
    `annotations`, when its binding carries them)."""
    annotations: dict[str, Any] = {
        "side_effects": spec.side_effects,
        "tags": list(spec.tags),
        "requirements": _requirements(spec),
    }
    own = getattr(spec.binding, "annotations", None)
    if isinstance(own, Mapping) and own:
        annotations["upstream"] = dict(own)
    return {
        "name": spec.qualified_name,
        "version": spec.version,
        "description": spec.description,
        "input_schema": spec.input_schema,
        "output_schema": spec.output_schema,
        "annotations": annotations,
    }


def _requirements(spec: ToolSpec) -> dict[str, Any]:
    req = spec.requirements
    return {
        "secrets": list(req.secrets),
        "user_id": req.user_id,
        "authorization": [{"id": a.id, "scopes": list(a.scopes)} for a in req.authorization],
    }


def canonical(definition: Any) -> bytes:
    """The definition's canonical JSON: sorted keys, no whitespace, UTF-8."""
    return orjson.dumps(definition, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def definition_hash(definition: Any) -> str:
    return HASH_PREFIX + hashlib.sha256(canonical(definition)).hexdigest()


def pin_id(spec: ToolSpec) -> str:
    """`<backend>/<flat name>`: the tool as the gateway serves it (after routing), without its version, which the
    upstream chooses: a version bump must not make a changed definition a new pin trusted on first use."""
    return f"{spec.backend}/{spec.flat_name}"


def unversioned(name: str) -> str:
    """A pin id or tool name without an `@<version>` (pin ids carried one before; old pin files and habits)."""
    return name.partition("@")[0]


def approved_hashes(approved: Any) -> set[str]:
    """The hashes an approved record approves: its latest, and each version's."""
    if not isinstance(approved, Mapping):
        return set()
    found = [approved.get("hash"), *(approved.get("versions") or {}).values()]
    return {h for h in found if isinstance(h, str)}


def describe_change(
    base_hash: str | None,
    base: Mapping[str, Any] | None,
    new: Mapping[str, Any] | None,
    *,
    old_name: str,
    new_name: str,
) -> tuple[list[str], str]:
    """(changed fields, unified diff) of a discovered definition against the approved one; a tool with no approved
    definition at all was added: (["added"], its whole definition as added lines)."""
    if base_hash is None:
        return ["added"], diff_text({}, new, old_name=old_name, new_name=new_name)
    return changed_fields(base, new), diff_text(base, new, old_name=old_name, new_name=new_name)


def changed_fields(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> list[str]:
    """The definition's top-level fields that differ; ["definition"] when one side is not known."""
    if old is None or new is None:
        return ["definition"]
    return [key for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]


def diff_text(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, *, old_name: str, new_name: str) -> str:
    """A unified diff of the two definitions as indented JSON (sorted keys), or a sentence when one is unknown."""
    if old is None or new is None:
        missing = "approved" if old is None else "changed"
        return f"(the {missing} definition was not kept: only its hash is known)\n"
    lines = difflib.unified_diff(
        _pretty(old).splitlines(keepends=True) if old else [],
        _pretty(new).splitlines(keepends=True),
        fromfile=old_name,
        tofile=new_name,
    )
    return "".join(lines)


def _pretty(definition: Mapping[str, Any]) -> str:
    return orjson.dumps(definition, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2).decode() + "\n"


def _now() -> str:
    return utc_iso()


def _key(kind: str, pin: str) -> str:
    return f"{NAMESPACE}:{kind}:{pin}"


# ---- the pin file ----


@dataclass(frozen=True)
class FilePin:
    hash: str
    definition: dict[str, Any] | None = None


def read_pin_file(path: Path) -> dict[str, FilePin]:
    """The approved pins of a pin file; ConfigError naming the problem (a definition whose hash differs included).
    A file that does not exist holds no pins (the first `approve --write-file` creates it)."""
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError([f"pinning.file: {path} cannot be read: {exc}"]) from None
    pins = data.get("pins") if isinstance(data, dict) else None
    if not isinstance(pins, dict):
        raise ConfigError([f"pinning.file: {path} must be a mapping with a `pins` mapping (pin id -> hash)"])
    found: dict[str, FilePin] = {}
    problems = []
    for named, entry in pins.items():
        pin = unversioned(str(named))
        if pin in found:
            problems.append(f"pinning.file: {path}: pin {pin!r} is named twice (a pin no longer has a version)")
            continue
        if isinstance(entry, str):
            entry = {"hash": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("hash"), str):
            problems.append(f"pinning.file: {path}: pin {pin!r} needs a hash (sha256:<hex>)")
            continue
        definition = entry.get("definition")
        if definition is not None and definition_hash(definition) != entry["hash"]:
            problems.append(f"pinning.file: {path}: pin {pin!r}: its definition does not hash to {entry['hash']}")
            continue
        found[pin] = FilePin(entry["hash"], definition if isinstance(definition, dict) else None)
    if problems:
        raise ConfigError(problems)
    return found


def write_pin_file(path: Path, pins: Mapping[str, FilePin]) -> None:
    """Write `pins` (sorted) to `path`, JSON when its name ends in .json, else YAML; atomically (a rename)."""
    body = {
        "version": FILE_VERSION,
        "pins": {
            pin: {"hash": entry.hash, **({"definition": entry.definition} if entry.definition is not None else {})}
            for pin, entry in sorted(pins.items())
        },
    }
    if path.suffix == ".json":
        text = orjson.dumps(body, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"
    else:
        text = FILE_HEADER + yaml.safe_dump(body, sort_keys=True, allow_unicode=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


# ---- policy: what one configuration says ----


@dataclass(frozen=True)
class PinPolicy:
    """The pinning settings of one configuration, its pin file read."""

    mode: str = "warn"
    file: Path | None = None
    file_pins: Mapping[str, FilePin] = field(default_factory=dict)
    max_definition_bytes: int = 65536
    max_tools_per_backend: int = 10000
    backends: Mapping[str, BackendSettings] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: GatewayConfig) -> PinPolicy:
        """ConfigError when the pin file is unreadable or inconsistent."""
        settings = config.settings.pinning
        path = pin_file_path(config)
        return cls(
            mode=settings.mode,
            file=path,
            file_pins=read_pin_file(path) if path is not None else {},
            max_definition_bytes=settings.max_definition_bytes,
            max_tools_per_backend=settings.max_tools_per_backend,
            backends={b.name: b for b in config.settings.backends},
        )

    def mode_for(self, settings: BackendSettings, backend: Any = None) -> str:
        """A backend's own `pinning.mode`, else the gateway's for an upstream, else off (in-process tools)."""
        if settings.pinning is not None:
            return settings.pinning.mode
        if isinstance(settings, UpstreamBackendSettings) or getattr(backend, "relays", None) is not None:
            return self.mode
        return "off"


def pin_file_path(config: GatewayConfig) -> Path | None:
    """`pinning.file`, relative to the configuration file's folder."""
    name = config.settings.pinning.file
    if name is None:
        return None
    path = Path(name)
    if not path.is_absolute() and config.source and not config.source.startswith("<"):
        path = Path(config.source).resolve().parent / path
    return path


# ---- what the gateway keeps: the store, the counters ----


class PinBook:
    """One per gateway, across reloads: the store pins live in and what this process counted."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.changes: dict[tuple[str, str, str, str], int] = {}  # (backend, tool, mode, kind) -> recorded here
        self._touched: dict[str, float] = {}  # pin -> when this process last renewed its approved record

    def count(self, backend: str, tool: str, mode: str, kind: str = "changed") -> None:
        key = (backend, tool, mode, kind)
        self.changes[key] = self.changes.get(key, 0) + 1

    async def touch(self, pin: str) -> None:
        now = time.monotonic()
        if now - self._touched.get(pin, -TOUCH_EVERY_S) < TOUCH_EVERY_S:
            return
        if len(self._touched) > 100_000:
            self._touched.clear()
        self._touched[pin] = now
        await self.store.touch(_key("approved", pin), PIN_TTL_S)


# ---- checking a discovery ----


class Pinning:
    """What discovery asks: given a backend's tools, the tools to serve (quarantined ones marked)."""

    def __init__(self, book: PinBook, policy: PinPolicy) -> None:
        self.book = book
        self.policy = policy

    async def check(self, settings: BackendSettings, backend: Any, specs: list[ToolSpec]) -> list[ToolSpec]:
        mode = self.policy.mode_for(settings, backend)
        if mode == "off" or not specs:
            return specs
        cap = self.policy.max_tools_per_backend
        pinned = specs[:cap]
        over = [self._over_cap(mode, spec, cap) for spec in specs[cap:]]
        groups: dict[str, list[int]] = {}  # pin -> its tools (several versions of one tool share a pin)
        for index, spec in enumerate(pinned):
            groups.setdefault(pin_id(spec), []).append(index)
        store = self.book.store
        try:
            known, *records = await asyncio.gather(
                store.get(_key("index", settings.name)),
                *(self._records(pin) for pin in groups),
            )
        except GatewayError as exc:
            return [*(self._unchecked(mode, spec, pin_id(spec), exc) for spec in pinned), *over]
        known = [p for p in known if isinstance(p, str)] if isinstance(known, list) else []
        # Once a backend has pins (its index, the pin file's, an approved record), a tool without one is a change.
        baseline = (
            bool(known)
            or any(p.partition("/")[0] == settings.name for p in self.policy.file_pins)
            or any(isinstance(approved, dict) for approved, _ in records)
        )
        decided = await asyncio.gather(
            *(
                self._check(mode, pin, [pinned[i] for i in indexes], record, baseline)
                for (pin, indexes), record in zip(groups.items(), records, strict=True)
            )
        )
        served = list(pinned)
        for indexes, group in zip(groups.values(), decided, strict=True):
            for index, spec in zip(indexes, group, strict=True):
                served[index] = spec
        try:
            await self._index(settings.name, list(groups), known)
        except GatewayError as exc:
            log.warning("pin_index_not_written", backend=settings.name, error=exc.failure.message)
        return [*served, *over]

    async def _records(self, pin: str) -> tuple[Any, Any]:
        store = self.book.store
        approved, pending = await asyncio.gather(store.get(_key("approved", pin)), store.get(_key("pending", pin)))
        return approved, pending

    def _over_cap(self, mode: str, spec: ToolSpec, cap: int) -> ToolSpec:
        log.warning("tool_not_pinned", backend=spec.backend, tool=spec.flat_name, reason=f"over {cap} tools")
        if mode != "enforce":
            return spec
        return _quarantined(
            spec,
            Quarantine(
                pin=pin_id(spec),
                message=(
                    f"Tool '{spec.flat_name}' is quarantined: backend '{spec.backend}' lists more tools than "
                    f"pinning.max_tools_per_backend ({cap}), so its definition could not be pinned"
                ),
            ),
        )

    async def _index(self, backend: str, pins: list[str], known: list[str]) -> None:
        key = _key("index", backend)
        if set(pins) <= set(known):
            if pins:
                await self.book.store.touch(key, PIN_TTL_S)
            return
        # What the backend serves now first, then the others it served (their pins may await a decision).
        merged = list(dict.fromkeys([*pins, *known]))[: self.policy.max_tools_per_backend * 2]
        await self.book.store.set(key, merged, PIN_TTL_S)

    async def _check(
        self, mode: str, pin: str, specs: list[ToolSpec], record: tuple[Any, Any], baseline: bool
    ) -> list[ToolSpec]:
        try:
            return await self._decide(mode, pin, specs, *record, baseline=baseline)
        except GatewayError as exc:  # the store did not answer, or refused (full): never serve unchecked in enforce
            return [self._unchecked(mode, spec, pin, exc) for spec in specs]

    def _unchecked(self, mode: str, spec: ToolSpec, pin: str, exc: GatewayError) -> ToolSpec:
        log.warning("pin_not_checked", pin=pin, mode=mode, error=exc.failure.message)
        if mode != "enforce":
            return spec
        return _quarantined(
            spec,
            Quarantine(
                pin=pin,
                message=(
                    f"Tool '{spec.flat_name}' is quarantined: its definition could not be checked against its "
                    f"pin ({exc.failure.message}); it is served again once the check succeeds"
                ),
            ),
        )

    async def _decide(
        self, mode: str, pin: str, specs: list[ToolSpec], approved: Any, pending: Any, *, baseline: bool
    ) -> list[ToolSpec]:
        store = self.book.store
        seen = [(spec, definition_of(spec)) for spec in specs]
        hashes = [definition_hash(definition) for _, definition in seen]
        file_pin = self.policy.file_pins.get(pin)
        if not isinstance(approved, dict) and file_pin is None and not baseline:  # a new backend: trust on first use
            record = {
                "hash": hashes[-1],
                "definition": self._kept(seen[-1][1]),
                "source": "first-seen",
                "approved_at": _now(),
                "by": None,
                "rejected": [],
                "versions": {spec.version: h for (spec, _), h in zip(seen, hashes, strict=True)},
            }
            if await store.add(_key("approved", pin), record, PIN_TTL_S):
                log.info("tool_pinned", pin=pin, hash=hashes[-1])
                return specs
            approved = await store.get(_key("approved", pin))  # another replica recorded it first
        approved = approved if isinstance(approved, dict) else None
        known = approved_hashes(approved) | ({file_pin.hash} if file_pin else set())
        unapproved = [i for i, h in enumerate(hashes) if h not in known]
        if not unapproved:
            if approved is not None:
                await self.book.touch(pin)
            if pending is not None:
                await store.delete(_key("pending", pin))  # it changed back (or was approved elsewhere)
            return specs
        # A change: against the store's approved definition, else the file's; none at all: the tool was added.
        base_hash, base = (
            (approved.get("hash"), approved.get("definition"))
            if approved is not None and approved.get("hash")
            else (file_pin.hash if file_pin else None, file_pin.definition if file_pin else None)
        )
        kind = "changed" if base_hash else "added"
        rejected = set((approved or {}).get("rejected") or [])
        pending_hash = pending.get("hash") if isinstance(pending, dict) else None
        asked = next((i for i in unapproved if hashes[i] == pending_hash), unapproved[0])  # one pending per pin
        spec, definition = seen[asked]
        current = hashes[asked]
        changed, diff = describe_change(base_hash, base, definition, old_name="approved", new_name="discovered")
        if current not in rejected and pending_hash != current:
            record = {
                "hash": current,
                "definition": self._kept(definition),
                "version": spec.version,
                "kind": kind,
                "first_seen": _now(),
                "changed": changed,
                "approved_hash": base_hash,
            }
            if isinstance(pending, dict):  # another change over a pending one
                await store.set(_key("pending", pin), record, PIN_TTL_S)
                recorded = True
            else:  # the first replica to record it logs and counts it
                recorded = await store.add(_key("pending", pin), record, PIN_TTL_S)
        else:
            recorded = False
        if recorded:
            self.book.count(spec.backend, spec.flat_name, mode, kind)
            log.warning(
                "tool_definition_changed",
                pin=pin,
                backend=spec.backend,
                tool=spec.flat_name,
                version=spec.version,
                mode=mode,
                kind=kind,
                changed=changed,
                approved_hash=base_hash,
                current_hash=current,
                action="quarantined" if mode == "enforce" else "served",
                diff=diff[:MAX_DIFF_CHARS],
            )
        if mode != "enforce":
            return specs
        held = set(unapproved)
        return [
            _quarantined(spec, self._quarantine(pin, spec, definition, h, base_hash, base, h in rejected))
            if i in held
            else spec
            for i, ((spec, definition), h) in enumerate(zip(seen, hashes, strict=True))
        ]

    def _quarantine(
        self,
        pin: str,
        spec: ToolSpec,
        definition: dict[str, Any],
        current: str,
        base_hash: str | None,
        base: Mapping[str, Any] | None,
        rejected: bool,
    ) -> Quarantine:
        changed = ["added"] if base_hash is None else changed_fields(base, definition)
        what = (
            "added after the backend's tools were pinned"
            if base_hash is None
            else f"{', '.join(changed)} changed since it was approved"
        )
        if rejected:
            message = (
                f"Tool '{spec.flat_name}' is quarantined: backend '{spec.backend}' serves a definition an "
                f"administrator rejected ({what})"
            )
        elif base_hash is None:
            message = (
                f"Tool '{spec.flat_name}' is quarantined: backend '{spec.backend}' added it after its tools were "
                f"pinned and it was never approved; calls are refused until an administrator approves it "
                f"(toolplex pins approve {pin})"
            )
        else:
            message = (
                f"Tool '{spec.flat_name}' is quarantined: its definition from backend '{spec.backend}' changed "
                f"since it was approved ({', '.join(changed)}); calls are refused until an administrator approves "
                f"the change (toolplex pins approve {pin})"
            )
        return Quarantine(
            pin=pin,
            message=message,
            changed=tuple(changed),
            approved_hash=base_hash,
            current_hash=current,
            rejected=rejected,
        )

    def _kept(self, definition: dict[str, Any]) -> dict[str, Any] | None:
        """The definition as stored beside its hash, unless it is over `max_definition_bytes` (hash alone then)."""
        return definition if size_of(definition) <= self.policy.max_definition_bytes else None


def _quarantined(spec: ToolSpec, quarantine: Quarantine) -> ToolSpec:
    """The tool, quarantined: its description says so to the admins who list it."""
    note = "[Quarantined: its definition changed and awaits an administrator's approval; calls are refused] "
    return dataclasses.replace(spec, quarantine=quarantine, description=note + spec.description)


# ---- administration: the CLI, the console ----


class PinError(Exception):
    """An administration request that cannot be done (an unknown pin, nothing to approve)."""


@dataclass(frozen=True)
class PinView:
    """One pin as an administrator sees it."""

    pin: str
    backend: str
    mode: str
    # approved: nothing pending; changed: a change (or an added tool) awaits a decision; rejected: an added tool
    # whose definition was rejected, nothing approved; unrecorded: only in the file
    status: str
    approved: dict[str, Any] | None
    pending: dict[str, Any] | None
    rejected: tuple[str, ...] = ()
    in_file: bool = False
    quarantined: bool | None = None  # whether the running gateway quarantines it now (None: not known here)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pin": self.pin,
            "backend": self.backend,
            "mode": self.mode,
            "status": self.status,
            "approved": self.approved,
            "pending": self.pending,
            "rejected": list(self.rejected),
            "in_file": self.in_file,
            "quarantined": self.quarantined,
        }


def _summary(record: Mapping[str, Any] | None, *keys: str) -> dict[str, Any] | None:
    if not isinstance(record, Mapping):
        return None
    return {key: record.get(key) for key in ("hash", *keys)}


class PinAdmin:
    """List, diff, approve and reject pins: what `toolplex pins` and the console call.

    Works on the state store the gateway uses (Redis: shared by every replica, so an approval on one is served
    by all at their next discovery) and on the configuration's pin file. `rediscover(backend)`, given by a
    running gateway, discovers the backend again at once after a decision; `catalog()` tells which tools it
    quarantines now.
    """

    def __init__(
        self,
        book: PinBook,
        policy: PinPolicy,
        *,
        rediscover: Callable[[str], None] | None = None,
        catalog: Callable[[], Catalog] | None = None,
    ) -> None:
        self.book = book
        self.policy = policy
        self.rediscover = rediscover
        self.catalog = catalog

    @property
    def store(self) -> StateStore:
        return self.book.store

    async def pins(self) -> list[str]:
        """Every pin known: the backends' indexes and the pin file's."""
        found: dict[str, None] = {}
        for backend in self.policy.backends:
            index = await self.store.get(_key("index", backend))
            if isinstance(index, list):
                found.update(dict.fromkeys(p for p in index if isinstance(p, str)))
        found.update(dict.fromkeys(self.policy.file_pins))
        return sorted(found)

    async def list(self, *, status: str | None = None) -> list[PinView]:
        """Every pin, sorted by id; `status` keeps only those with it (`changed`: what awaits a decision)."""
        views = [await self.get(pin) for pin in await self.pins()]
        return [v for v in views if status is None or v.status == status]

    async def get(self, pin: str) -> PinView:
        approved, pending = await asyncio.gather(
            self.store.get(_key("approved", pin)), self.store.get(_key("pending", pin))
        )
        file_pin = self.policy.file_pins.get(pin)
        backend = pin.split("/", 1)[0]
        settings = self.policy.backends.get(backend)
        mode = self.policy.mode_for(settings) if settings is not None else "off"
        if not isinstance(approved, dict) and not isinstance(pending, dict) and file_pin is None:
            raise PinError(f"no pin {pin!r} (see toolplex pins list)")
        shown = _summary(approved, "source", "approved_at", "by")
        if shown is None and file_pin is not None:
            shown = {"hash": file_pin.hash, "source": "file", "approved_at": None, "by": None}
        if isinstance(pending, dict):
            status = "changed"
        elif isinstance(approved, dict):
            status = "approved" if approved.get("hash") else "rejected"
        else:
            status = "unrecorded"
        quarantined = None
        if self.catalog is not None:
            quarantined = any(s.quarantine.pin == pin for s in self.catalog().quarantined() if s.quarantine)
        return PinView(
            pin=pin,
            backend=backend,
            mode=mode,
            status=status,
            approved=shown,
            pending=_summary(pending, "first_seen", "changed", "kind", "version"),
            rejected=tuple((approved or {}).get("rejected") or ()) if isinstance(approved, dict) else (),
            in_file=file_pin is not None,
            quarantined=quarantined,
        )

    async def resolve(self, name: str) -> str:
        """A pin id from an id, `<backend>/<tool>`, `Toolkit.Tool` or a flat tool name (unique among pins); an
        `@<version>` is ignored (a pin holds every version of its tool)."""
        pins = await self.pins()
        name = unversioned(name)
        if name in pins:
            return name
        matches = [p for p in pins if _matches(p, name)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise PinError(f"no pin matches {name!r} (see toolplex pins list)")
        raise PinError(f"{name!r} matches several pins: {', '.join(matches)}; name one by its id")

    async def diff(self, pin: str) -> dict[str, Any]:
        """The pending change of a pin against its approved definition: the changed fields and a unified diff."""
        pin = await self.resolve(pin)
        approved, pending = await asyncio.gather(
            self.store.get(_key("approved", pin)), self.store.get(_key("pending", pin))
        )
        if not isinstance(pending, dict):
            raise PinError(f"pin {pin!r} has no pending change")
        base_hash, base = self._base(pin, approved)
        new = pending.get("definition")
        changed, diff = describe_change(
            base_hash, base, new, old_name=f"{pin} (approved)", new_name=f"{pin} (discovered)"
        )
        return {
            "pin": pin,
            "approved_hash": base_hash,
            "pending_hash": pending.get("hash"),
            "changed": changed,
            "diff": diff,
        }

    async def definitions(self, pin: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The approved definition (the store's, else the pin file's) and the pending one, for a side-by-side
        view (the console); None where not kept."""
        approved, pending = await asyncio.gather(
            self.store.get(_key("approved", pin)), self.store.get(_key("pending", pin))
        )
        new = pending.get("definition") if isinstance(pending, dict) else None
        return self._base(pin, approved)[1], new if isinstance(new, dict) else None

    def _base(self, pin: str, approved: Any) -> tuple[str | None, dict[str, Any] | None]:
        if isinstance(approved, dict) and approved.get("hash"):
            return approved.get("hash"), approved.get("definition")
        file_pin = self.policy.file_pins.get(pin)
        return (file_pin.hash, file_pin.definition) if file_pin is not None else (None, None)

    async def approve(self, pin: str, *, by: str | None = None, write_file: bool = False) -> PinView:
        """Make the pending definition the approved one (every replica serves it at its next discovery).

        With nothing pending, the approved definition stays as it is (with `write_file`, it is written to the pin
        file: so a deployment's pins can be committed). `write_file` writes the approved hash and definition into
        `pinning.file`."""
        pin = await self.resolve(pin)
        approved, pending = await asyncio.gather(
            self.store.get(_key("approved", pin)), self.store.get(_key("pending", pin))
        )
        if isinstance(pending, dict):
            old = approved if isinstance(approved, dict) else {}
            rejected = [h for h in (old.get("rejected") or []) if h != pending.get("hash")]
            versions = {v: h for v, h in (old.get("versions") or {}).items() if v != pending.get("version")}
            if pending.get("version") is not None:  # every version served at once stays approved
                versions[pending["version"]] = pending["hash"]
            approved = {
                "hash": pending["hash"],
                "definition": pending.get("definition"),
                "source": "approved",
                "approved_at": _now(),
                "by": by,
                "rejected": rejected,
                "versions": dict(list(versions.items())[-MAX_VERSIONS:]),
            }
            await self.store.set(_key("approved", pin), approved, PIN_TTL_S)
            await self.store.delete(_key("pending", pin))
            log.warning("tool_definition_approved", pin=pin, hash=approved["hash"], by=by)
        elif not approved_hashes(approved) and pin not in self.policy.file_pins:
            raise PinError(f"pin {pin!r} has nothing to approve")
        if write_file:
            self._write_file(pin, approved)
        self._decided(pin)
        return await self.get(pin)

    async def reject(self, pin: str, *, by: str | None = None) -> PinView:
        """Keep the approved definition: the pending one is rejected (a tool serving it stays quarantined in
        enforce mode, and is not listed as awaiting a decision again)."""
        pin = await self.resolve(pin)
        approved, pending = await asyncio.gather(
            self.store.get(_key("approved", pin)), self.store.get(_key("pending", pin))
        )
        if not isinstance(pending, dict):
            raise PinError(f"pin {pin!r} has no pending change to reject")
        if not isinstance(approved, dict):  # approved by the pin file alone, or an added tool: the store keeps it
            base_hash, base = self._base(pin, None)
            source = "file" if base_hash else "rejected"
            approved = {"hash": base_hash, "definition": base, "source": source, "approved_at": None, "by": None}
        approved["rejected"] = [*(approved.get("rejected") or []), pending["hash"]][-MAX_REJECTED:]
        await self.store.set(_key("approved", pin), approved, PIN_TTL_S)
        await self.store.delete(_key("pending", pin))
        log.warning("tool_definition_rejected", pin=pin, hash=pending["hash"], by=by)
        self._decided(pin)
        return await self.get(pin)

    def _write_file(self, pin: str, approved: Any) -> None:
        path = self.policy.file
        if path is None:
            raise PinError("--write-file needs pinning.file in the configuration")
        if not isinstance(approved, dict):
            return  # approved by the file already
        if approved.get("definition") is None:
            raise PinError(f"pin {pin!r}: its definition was not kept (over pinning.max_definition_bytes)")
        pins = dict(read_pin_file(path))
        pins[pin] = FilePin(approved["hash"], approved["definition"])
        write_pin_file(path, pins)
        self.policy = dataclasses.replace(self.policy, file_pins=pins)

    def _decided(self, pin: str) -> None:
        if self.rediscover is not None:
            self.rediscover(pin.split("/", 1)[0])


def _matches(pin: str, name: str) -> bool:
    _, _, tool = pin.partition("/")
    return name in (tool, tool.replace("_", ".", 1))
