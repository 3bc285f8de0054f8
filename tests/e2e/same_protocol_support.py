"""Helpers of tests/e2e/test_same_protocol.py.

- `Stack`: the real processes on loopback (each protocol's upstream server, and one `toolplex serve` per protocol
  fronting it), started in two waves (every upstream at once, then every gateway at once) and stopped after.
- `Answer`: an HTTP answer as a client of the protocol reads it (status, content type, parsed body, the
  headers that matter), and `compare`, which masks the per-hop fields a protocol names, then fails with the
  direct answer and the proxied one side by side.
- `RawMcp`: an MCP client over raw HTTP in one era (the handshake at 2025-06-18 or 2025-11-25, with its session;
  or stateless 2026-07-28), so that the bytes of each answer can be compared.
"""

from __future__ import annotations

import copy
import difflib
import itertools
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import ROOT, free_port, stop, wait_for_port

READY_S = 60.0  # bound on a whole wave's start (2 cores, every process importing at once)
REQUEST_S = 20.0  # bound on every request

# ---- processes ----


@dataclass
class Started:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""


class Stack:
    """Processes started together and stopped together (in reverse), each logging to a file of `workdir`."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: dict[str, Started] = {}

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc: object) -> None:
        """Every process asked to stop at once (gateways first), then each waited for (killed if it lingers)."""
        processes = [s.process for s in reversed(self.started.values())]
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            stop(process)  # already terminating: waits, and kills one that does not exit in time

    def spawn(self, name: str, command: Sequence[str]) -> Started:
        """Start `command` (with `{port}` filled in with a free loopback port); not waited for."""
        port = free_port()
        log = self.workdir / f"{name}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [part.replace("{port}", str(port)) for part in command], cwd=ROOT, stdout=out, stderr=out
            )
        started = Started(name, process, port, log)
        self.started[name] = started
        return started

    def gateway(self, name: str, config: str) -> Started:
        """`toolplex serve` with `config` (YAML), not waited for."""
        path = self.workdir / f"{name}.yaml"
        path.write_text(config)
        serve = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(path), "--port", "{port}"]
        return self.spawn(name, [*serve, "--no-reload"])

    @staticmethod
    def wait_port(started: Iterable[Started]) -> None:
        deadline = time.monotonic() + READY_S
        for each in started:
            try:
                wait_for_port(each.port, each.process, timeout=max(0.1, deadline - time.monotonic()))
            except (RuntimeError, TimeoutError) as exc:
                raise RuntimeError(f"{each.name} did not start: {exc}\n{each.tail()}") from None

    @staticmethod
    def wait_ready(gateways: Iterable[Started]) -> None:
        """Each gateway's `/readyz` says `ready`: every backend discovered and up (polled, bounded)."""
        deadline = time.monotonic() + READY_S
        for each in gateways:
            last: Any = None
            while True:
                if each.process.poll() is not None:
                    raise RuntimeError(f"{each.name} exited with {each.process.returncode}\n{each.tail()}")
                try:
                    answer = httpx.get(f"{each.base}/readyz", timeout=2.0)
                    last = answer.text
                    if answer.status_code == 200 and answer.json().get("status") == "ready":
                        break
                except httpx.HTTPError as exc:
                    last = repr(exc)
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{each.name} not ready within {READY_S} s: {last}\n{each.tail()}")
                time.sleep(0.05)


# ---- answers ----


@dataclass
class Answer:
    """An answer as a client of the protocol reads it."""

    status: int
    content_type: str
    body: Any  # parsed JSON, a list of SSE events, or text / bytes for other media types
    headers: dict[str, str] = field(default_factory=dict)  # the headers the protocol's clients read

    @classmethod
    def of(cls, response: httpx.Response, headers: Sequence[str] = ()) -> Answer:
        media = content_type(response)
        if media == "text/event-stream":
            body: Any = sse_events(response.text)
        elif media.endswith("json"):
            body = response.json() if response.content else None
        elif media.startswith("text/"):
            body = response.text
        else:
            body = response.content
        kept = {name: response.headers[name] for name in headers if name in response.headers}
        return cls(response.status_code, response.headers.get("content-type", ""), body, kept)


def content_type(response: httpx.Response) -> str:
    return response.headers.get("content-type", "").split(";")[0].strip().lower()


def charset(value: str) -> str:
    """The charset a content type declares; JSON and SSE are UTF-8 whether they say so or not (RFC 8259,
    the SSE specification), so an absent charset reads as utf-8."""
    for part in value.split(";")[1:]:
        key, _, val = part.strip().partition("=")
        if key.lower() == "charset":
            return val.strip().strip('"').lower()
    return "utf-8"


def sse_events(text: str) -> list[dict[str, Any]]:
    """Server-Sent Events as a client reads them: `{event, data}` per event, `data` parsed when it is JSON.
    Event ids, retry hints, comments and events without data (an MCP server's priming event) are framing of
    the hop, not content: left out."""
    events: list[dict[str, Any]] = []
    name, data = "message", []
    for line in [*text.splitlines(), ""]:
        if not line:
            if data:
                joined = "\n".join(data)
                try:
                    parsed: Any = json.loads(joined)
                except ValueError:
                    parsed = joined
                events.append({"event": name, "data": parsed})
            name, data = "message", []
            continue
        if line.startswith(":"):
            continue
        key, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if key == "event":
            name = value
        elif key == "data":
            data.append(value)
    return [e for e in events if e["data"] != ""]


# ---- masks ----

ANY = "*"  # a mask path part matching any key or index
MASKED = "<masked>"


@dataclass(frozen=True)
class Mask:
    """A per-hop field, masked on both sides where present (its presence is still compared)."""

    path: tuple[str | int, ...]
    why: str


@dataclass(frozen=True)
class Scrub:
    """A per-hop id inside text (a session or node id a message quotes): each match is replaced, on both sides."""

    pattern: str
    replacement: str
    why: str

    @property
    def path(self) -> tuple[str, ...]:
        return (f"/{self.pattern}/",)


@dataclass(frozen=True)
class Unrelayed:
    """A field the gateway states for itself in one named case, documented with its reason (docs/protocols/
    mcp.md): left out on both sides. Narrow by construction: each names the targets and versions it holds for,
    and the test passing it says which case it is."""

    path: tuple[str | int, ...]
    why: str


AnyMask = Mask | Scrub | Unrelayed


def masked(value: Any, masks: Iterable[AnyMask], used: set[AnyMask] | None = None) -> Any:
    """A copy of `value` with each mask's field replaced by `MASKED` (each scrub's matches by its replacement,
    each unrelayed field left out); the masks that matched go into `used`."""
    out = copy.deepcopy(value)
    for mask in masks:
        dropped = isinstance(mask, Unrelayed)
        hit = _scrub(out, mask) if isinstance(mask, Scrub) else _mask(out, mask.path, drop=dropped)
        if hit and used is not None:
            used.add(mask)
    return out


def _scrub(node: Any, scrub: Scrub) -> bool:
    hit = False
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in list(items):
        if isinstance(value, str):
            new = re.sub(scrub.pattern, scrub.replacement, value)
            if new != value:
                node[key] = new
                hit = True
        else:
            hit = _scrub(value, scrub) or hit
    return hit


def _mask(node: Any, path: tuple[str | int, ...], *, drop: bool = False) -> bool:
    if not path:
        return False
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        keys = list(node) if head == ANY else [head] if head in node else []
    elif isinstance(node, list):
        keys = list(range(len(node))) if head == ANY else [head] if isinstance(head, int) and head < len(node) else []
    else:
        return False
    hit = False
    for key in keys:
        if rest:
            hit = _mask(node[key], rest, drop=drop) or hit  # type: ignore[index]
        elif drop and isinstance(node, dict):
            del node[key]
            hit = True
        else:
            node[key] = MASKED  # type: ignore[index]
            hit = True
    return hit


# ---- comparison ----


IDENTITY_KEYS = ("name", "uri", "uriTemplate", "id", "tool_name")


class _Absent:
    """A member one side does not have."""

    def __repr__(self) -> str:
        return "(absent)"


ABSENT = _Absent()


def _keyed(items: list[Any]) -> str | None:
    """The member that names each item of a list of objects (a listing's `name`, `uri`, ...), when every item has
    one and no two share it; None otherwise (the list is then compared index by index)."""
    for key in IDENTITY_KEYS:
        names = [item.get(key) if isinstance(item, dict) else None for item in items]
        if items and all(isinstance(n, str) for n in names) and len(set(names)) == len(names):
            return key
    return None


def differences(direct: Any, proxied: Any, path: str = "$") -> Iterator[tuple[str, Any, Any]]:
    """(path, direct, proxied) for each place the two differ; JSON equality (1 == 1.0, key order aside).

    A listing (a list of objects each named by `name`, `uri`, ...) is compared item by item by name: its order
    is one difference, each item's differences others, rather than every item after the first misplaced one."""
    if isinstance(direct, dict) and isinstance(proxied, dict):
        for key in [*direct, *(k for k in proxied if k not in direct)]:
            where = f"{path}.{key}"
            if key not in proxied:
                yield where, direct[key], ABSENT
            elif key not in direct:
                yield where, ABSENT, proxied[key]
            else:
                yield from differences(direct[key], proxied[key], where)
    elif isinstance(direct, list) and isinstance(proxied, list):
        key = _keyed(direct)
        if key is not None and key == _keyed(proxied):
            left = {item[key]: item for item in direct}
            right = {item[key]: item for item in proxied}
            for name in [*left, *(n for n in right if n not in left)]:
                where = f"{path}[{key}={name}]"
                if name not in right:
                    yield where, left[name], ABSENT
                elif name not in left:
                    yield where, ABSENT, right[name]
                else:
                    yield from differences(left[name], right[name], where)
            shared = [n for n in left if n in right]
            if shared != [n for n in right if n in left]:
                yield f"{path} (the order of {key}s)", shared, [n for n in right if n in left]
            return
        if _names(direct) and _names(proxied) and direct != proxied:  # a list of names: which, then their order
            missing = [n for n in direct if n not in proxied]
            extra = [n for n in proxied if n not in direct]
            if missing or extra:
                yield f"{path} (names only one side lists)", missing, extra
            else:
                yield f"{path} (the same names, in another order)", direct, proxied
            return
        if len(direct) != len(proxied):
            yield f"{path} (length {len(direct)} vs {len(proxied)})", direct, proxied
            return
        for index, (a, b) in enumerate(zip(direct, proxied, strict=True)):
            yield from differences(a, b, f"{path}[{index}]")
    elif direct != proxied or (type(direct) is not type(proxied) and not (_number(direct) and _number(proxied))):
        yield path, direct, proxied


def _names(items: list[Any]) -> bool:
    """A list of distinct strings (tool names, say), compared as a set and then as an order."""
    return bool(items) and all(isinstance(i, str) for i in items) and len(set(items)) == len(items)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json(value: Any, indent: int | None = None) -> str:
    if value is ABSENT:
        return "(absent)"
    if isinstance(value, bytes):
        return f"<{len(value)} bytes: {value[:40]!r}>"
    return json.dumps(value, indent=indent, ensure_ascii=False, default=str, sort_keys=indent is not None)


SIDE_BY_SIDE_ROWS = 160  # longer answers (whole listings) are cut there: the differences above name every place


def side_by_side(direct: Any, proxied: Any, width: int = 64) -> str:
    """The two bodies as indented JSON in two columns; `≠` marks lines that differ, `<` / `>` lines one side lacks."""
    left = _json(direct, 2).splitlines() if not isinstance(direct, str) else direct.splitlines() or [""]
    right = _json(proxied, 2).splitlines() if not isinstance(proxied, str) else proxied.splitlines() or [""]

    def cut(text: str) -> str:
        return text if len(text) <= width else text[: width - 1] + "…"

    rows = [f"    {'direct (the upstream itself)':<{width}}   proxied (through Toolplex)"]
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=left, b=right, autojunk=False).get_opcodes():
        pairs = itertools.zip_longest(left[i1:i2], right[j1:j2])
        for a, b in pairs:
            mark = " " if op == "equal" else "≠" if a is not None and b is not None else "<" if b is None else ">"
            rows.append(f"  {mark} {cut(a or ''):<{width}} │ {cut(b or '')}")
    if len(rows) > SIDE_BY_SIDE_ROWS:
        rows = [*rows[:SIDE_BY_SIDE_ROWS], f"    ... {len(rows) - SIDE_BY_SIDE_ROWS} more lines"]
    return "\n".join(rows)


def compare(
    case: str,
    direct: Answer,
    proxied: Answer,
    masks: Sequence[AnyMask] = (),
    *,
    headers: Sequence[str] = (),
) -> None:
    """Fail (with both answers side by side) unless the proxied answer is the direct one, masks aside:
    the same status, media type and charset, the same values of `headers`, the same parsed body."""
    found: list[str] = []
    if direct.status != proxied.status:
        found.append(f"status: {direct.status} ≠ {proxied.status}")
    media = (direct.content_type.split(";")[0].strip().lower(), proxied.content_type.split(";")[0].strip().lower())
    if media[0] != media[1] or charset(direct.content_type) != charset(proxied.content_type):
        found.append(f"content-type: {direct.content_type!r} ≠ {proxied.content_type!r}")
    for name in headers:
        a, b = direct.headers.get(name), proxied.headers.get(name)
        if a != b:
            found.append(f"header {name}: {a!r} ≠ {b!r}")
    head = (
        f"  status {direct.status} | {proxied.status}    "
        f"content-type {direct.content_type!r} | {proxied.content_type!r}"
    )
    _report(case, found, direct.body, proxied.body, masks, head)


def compare_reads(case: str, direct: Any, proxied: Any, masks: Sequence[AnyMask] = ()) -> None:
    """`compare` for what a client library read (its models as JSON), where there is no HTTP answer to compare."""
    _report(case, [], direct, proxied, masks, "  as the client read them")


def _report(case: str, found: list[str], direct: Any, proxied: Any, masks: Sequence[AnyMask], head: str) -> None:
    used: set[AnyMask] = set()
    left, right = masked(direct, masks, used), masked(proxied, masks, used)
    found = [*found, *_grouped(differences(left, right))]
    if not found:
        return
    shown = "\n".join(f"    {line}" for line in found[:40]) + (
        f"\n    ... and {len(found) - 40} more" if len(found) > 40 else ""
    )
    masks_said = "; ".join(f"{'.'.join(str(p) for p in m.path)} ({m.why})" for m in masks if m in used) or "none"
    pytest.fail(
        f"{case}: the answer through Toolplex differs from the upstream's own\n{head}\n"
        f"  differences (masked: {masks_said}):\n{shown}\n"
        f"{side_by_side(left, right)}",
        pytrace=False,
    )


_ITEM = re.compile(r"\[(\w+)=([^\]]*)\]")


def _shown(a: Any, b: Any) -> tuple[str, str]:
    """The two values as a difference line shows them; two long texts by where they part."""
    if isinstance(a, str) and isinstance(b, str) and max(len(a), len(b)) > 200:
        same = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        return (
            f"{len(a)} characters, from character {same}: {a[same : same + 80]!r}",
            f"{len(b)} characters, from character {same}: {b[same : same + 80]!r}",
        )
    return _json(a), _json(b)


def _grouped(found: Iterable[tuple[str, Any, Any]]) -> list[str]:
    """One line per difference; the same difference in many items of a listing (every tool gains the same
    annotations, say) is one line naming the items."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for where, a, b in found:
        shape = _ITEM.sub(lambda m: f"[{m.group(1)}=*]", where)
        groups.setdefault((shape, *_shown(a, b)), []).append(where)
    lines = []
    for (shape, a, b), places in groups.items():
        if len(places) > 2:
            names = ["/".join(v for _k, v in _ITEM.findall(place)) for place in places]
            listed = ", ".join(names[:6]) + (f", ... ({len(names)} in all)" if len(names) > 6 else "")
            lines.append(f"{shape}: {a}  ≠  {b}   [for {listed}]")
        else:
            lines.extend(f"{place}: {a}  ≠  {b}" for place in places)
    return lines


# ---- MCP over raw HTTP ----

MODERN = "2026-07-28"
ACCEPT = "application/json, text/event-stream"


class RawMcp:
    """One MCP client over raw HTTP, byte for byte what a client of the era sends.

    Handshake era (`version` 2025-06-18 or 2025-11-25): `initialize` (no `MCP-Protocol-Version` header, as the
    specification says), then `notifications/initialized`, then every request with `Mcp-Session-Id` and
    `MCP-Protocol-Version`; `close` DELETEs the session. 2026-07-28: no session; each request carries the
    `_meta` envelope and the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers.
    """

    def __init__(self, url: str, version: str) -> None:
        self.url = url
        self.version = version
        self.session: str | None = None
        self.http = httpx.Client(timeout=REQUEST_S)

    @property
    def modern(self) -> bool:
        return self.version == MODERN

    def open(self) -> Answer:
        """The era's opening exchange: `initialize` (and `notifications/initialized`), or `server/discover`."""
        if self.modern:
            return self.request(0, "server/discover", {})
        params = {
            "protocolVersion": self.version,
            "capabilities": {},
            "clientInfo": {"name": "raw-same-protocol", "version": "1.0.0"},
        }
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        response = self.http.post(self.url, json=body, headers=headers)
        self.session = response.headers.get("mcp-session-id")
        notified = self.http.post(
            self.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self._headers()
        )
        assert notified.status_code == 202, (notified.status_code, notified.text)
        return self.answer(response)

    def _headers(self, method: str | None = None, name: str | None = None) -> dict[str, str]:
        headers = {"Accept": ACCEPT, "Content-Type": "application/json", "MCP-Protocol-Version": self.version}
        if self.session is not None:
            headers["Mcp-Session-Id"] = self.session
        if self.modern and method is not None:
            headers["Mcp-Method"] = method
            if name is not None:
                from mcp.shared.inbound import encode_header_value

                headers["Mcp-Name"] = encode_header_value(name)
        return headers

    def request(self, request_id: int, method: str, params: dict[str, Any]) -> Answer:
        params = dict(params)
        if self.modern:
            params["_meta"] = {
                **params.get("_meta", {}),
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientInfo": {"name": "raw-same-protocol", "version": "1.0.0"},
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        name = params.get({"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}.get(method, ""))
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        return self.answer(self.http.post(self.url, json=body, headers=self._headers(method, name)))

    @staticmethod
    def answer(response: httpx.Response) -> Answer:
        """The answer with its body as the list of JSON-RPC messages it carries (one for a JSON answer; each SSE
        event's for a stream, in order), and whether it named a session."""
        media = content_type(response)
        if media == "text/event-stream":
            messages: Any = [event["data"] for event in sse_events(response.text)]
        elif media == "application/json":
            messages = [response.json()] if response.content else []
        else:
            messages = response.text
        headers = {"mcp-session-id": "(a session id)"} if "mcp-session-id" in response.headers else {}
        return Answer(response.status_code, response.headers.get("content-type", ""), messages, headers)

    def close(self) -> None:
        if self.session is not None:
            self.http.delete(self.url, headers=self._headers())
        self.http.close()
