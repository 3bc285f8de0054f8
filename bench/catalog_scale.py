"""The catalog at scale: start-up, listings and retrieval of a gateway serving 10,000 tools.

Starts `toolplex serve` (the fronts of bench/gateway.yaml; one `kind: python` backend whose
module declares `--tools` generated `@tool` functions: bench/catalog_tools.py writes it as
plain source and byte-compiles it before anything is timed, as an installed package would be)
on a free loopback port, with the source tree's own code first on the path, and measures:

- start-up: from spawning the process until `GET /healthz` answers 200 (the gateway has
  discovered every tool by then), next to the same for a config with only the 4 Math tools
  (interpreter, imports and the server's own start), in alternating rounds;
- listings: OXP `GET /tools`, OpenTool `GET /opentool/load` and ToolServerNode
  `POST /get_available_tools` (in a cookie session), median and p95 with response sizes,
  the endpoints alternating; the first request of each is reported apart;
- retrieval: ToolServerNode `POST /retrieving_tools` `{"question", "top_k": 5}` with
  different questions made from the catalog's words; the first one (which builds the
  index) is reported apart;
- one call of a generated tool through `/opentool/call`, whose answer is checked.

A plain blocking client (httpx) on one keep-alive connection; `GET /healthz` times the
round-trip floor. Every answer is checked; bounded in count and by `deadline`; servers are
always stopped. Prints a table with the issue's targets next to each figure.

    .venv/bin/python -m bench.catalog_scale [--tools 10000] [--rounds 2] [--tree PATH] [--max-seconds 900]
    .venv/bin/python -m bench.catalog_scale --before /tmp/catalog-before   # both trees, one run, alternating
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.processes import Served, spawn

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TOOLS = 10_000
TOP_K = 5
# The targets, at 10,000 tools.
STARTUP_TARGET_S = 2.0
LISTING_TARGET_MS = 100.0
RETRIEVAL_TARGET_MS = 10.0
LISTINGS = {
    "oxp GET /tools": ("GET", "/tools"),
    "opentool GET /opentool/load": ("GET", "/opentool/load"),
    "toolserver POST /get_available_tools": ("POST", "/get_available_tools"),
}
CONFIG = """\
# Written by bench/catalog_scale.py: the fronts of bench/gateway.yaml, one Python backend.
server:
  host: 127.0.0.1
  port: 8080
fronts:
  opentool:
    prefix: /opentool
  oxp:
    prefix: ""
  toolserver:
    prefix: ""
  jsonrpc:
    path: /rpc
  metrics:
    enabled: true
middleware:
  - use: gateway.metrics:Metrics
backends:
  - name: {name}
    kind: python
    module: {module}
"""


def serve(config: Path, tree: Path, env: dict[str, str], deadline: float) -> contextlib.AbstractContextManager[Served]:
    """`toolplex serve --config <config>` from `tree` on a free port, timed until /healthz answers 200."""
    command = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--no-reload"]
    return spawn(command, tree, env, deadline=deadline)


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _figures(times_s: list[float]) -> dict[str, Any]:
    ms = [t * 1000 for t in times_s]
    return {"p50_ms": statistics.median(ms), "p95_ms": _percentile(ms, 0.95), "max_ms": max(ms), "n": len(ms)}


def _timed(client: httpx.Client, method: str, path: str, **kwargs: Any) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    response = client.request(method, path, **kwargs)
    response.read()
    return time.perf_counter() - started, response


def _ok(response: httpx.Response, what: str) -> Any:
    if response.status_code != 200:
        raise RuntimeError(f"{what}: {response.status_code} {response.text[:300]}")
    return response.json()


def _listing_count(name: str, body: Any) -> int:
    if name.startswith("oxp"):
        return len(body["items"])
    if name.startswith("opentool"):
        return len(body["functions"])
    return len(body["available_tools"])


def questions(count: int, seed: int = 7) -> list[str]:
    """Different questions in the catalog's words, phrased as a user would."""
    from bench.catalog_tools import NOUNS, QUALIFIERS, VERBS

    rng = random.Random(seed)
    forms = (
        "please {v} the {q} {n} for this {m}",
        "{v} {n}",
        "how do I {v} a {q} {n}?",
        "I need to {v} every {n} of the {m} and then {w} it",
        "{v} {q} {n} by {m}",
    )
    asked = []
    for i in range(count):
        text = forms[i % len(forms)].format(
            v=rng.choice(VERBS), w=rng.choice(VERBS), n=rng.choice(NOUNS), m=rng.choice(NOUNS), q=rng.choice(QUALIFIERS)
        )
        asked.append(text)
    return asked


def _measure(server: Served, tools: int, listing_requests: int, retrieval_requests: int, deadline: float) -> dict:
    def left() -> None:
        if time.monotonic() > deadline:
            raise TimeoutError("the deadline passed during the catalog measurements")

    out: dict[str, Any] = {}
    with httpx.Client(base_url=server.base, timeout=120) as client:
        ready = _ok(client.get("/readyz"), "/readyz")
        if ready.get("tools") != tools:
            raise RuntimeError(f"/readyz says {ready.get('tools')} tools, expected {tools}")
        _ok(client.post("/get_cookie"), "/get_cookie")  # the node_id cookie stays in the client's jar

        # Listings, alternating; the first of each apart (anything built lazily is built then).
        samples: dict[str, list[float]] = {name: [] for name in [*LISTINGS, "floor GET /healthz"]}
        for name, (method, path) in LISTINGS.items():
            elapsed, response = _timed(client, method, path)
            count = _listing_count(name, _ok(response, name))
            if count != tools:
                raise RuntimeError(f"{name} listed {count} tools, expected {tools}")
            out.setdefault("listing", {})[name] = {"first_ms": elapsed * 1000, "bytes": len(response.content)}
        order = [*LISTINGS.items(), ("floor GET /healthz", ("GET", "/healthz"))]
        for index in range(listing_requests):
            for name, (method, path) in order if index % 2 == 0 else order[::-1]:
                left()
                elapsed, response = _timed(client, method, path)
                if response.status_code != 200:
                    raise RuntimeError(f"{name}: {response.status_code} {response.text[:300]}")
                samples[name].append(elapsed)
        for name in LISTINGS:
            out["listing"][name].update(_figures(samples[name]))
        out["floor"] = _figures(samples["floor GET /healthz"])

        # Retrieval: the first question builds the index; then different questions.
        asked = questions(retrieval_requests + 1)
        elapsed, response = _timed(client, "POST", "/retrieving_tools", json={"question": asked[0], "top_k": TOP_K})
        _ok(response, "/retrieving_tools")
        times, found = [], 0
        for question in asked[1:]:
            left()
            asking = {"question": question, "top_k": TOP_K}
            elapsed_q, response = _timed(client, "POST", "/retrieving_tools", json=asking)
            body = _ok(response, f"/retrieving_tools {question!r}")
            if len(body["retrieved_tools"]) > TOP_K or len(body["tools_json"]) != len(body["retrieved_tools"]):
                raise RuntimeError(f"/retrieving_tools {question!r}: {body}")
            found += len(body["retrieved_tools"]) == TOP_K
            times.append(elapsed_q)
        out["retrieval"] = _figures(times) | {"first_ms": elapsed * 1000, "full_answers": found}

        # One call of a generated tool, answer checked.
        out["call"] = _call_generated(client)
    return out


def _call_generated(client: httpx.Client) -> dict[str, Any]:
    from bench.catalog_tools import blueprints

    blueprint = blueprints(1)[0]
    samples = {str: "abc", int: 3, float: 2.5, bool: True, list[str]: ["x", "y"]}
    arguments = {name: samples.get(kind, "abc") for name, kind, _, _ in blueprint.parameters}
    method = f"{blueprint.toolkit}_{blueprint.name}"
    body = {"jsonrpc": "2.0", "method": method, "params": arguments, "id": "catalog-1"}
    elapsed, response = _timed(client, "POST", "/opentool/call", json=body)
    answer = _ok(response, f"/opentool/call {method}")
    expected = {"tool": blueprint.name, "arguments": arguments}
    if answer.get("result") != expected or answer.get("id") != "catalog-1":
        raise RuntimeError(f"/opentool/call {method}: {answer}, expected result {expected}")
    return {"tool": method, "arguments": arguments, "ok": True, "ms": elapsed * 1000}


def run_catalog(
    tree: Path,
    deadline: float,
    *,
    tools: int = DEFAULT_TOOLS,
    rounds: int = 2,
    listing_requests: int = 20,
    retrieval_requests: int = 50,
    show: bool = True,
    before: Path | None = None,
) -> dict[str, Any]:
    """Start-up (against the 4-tool baseline, alternating), listings, retrieval and one call at `tools` tools.

    With `before` (another source tree), both trees are measured in the same run, round by
    round in alternating order, with the same generated module: then the answer holds each
    tree's figures (`before`, `after`, medians over the rounds) and the table compares them.
    """
    trees = {"after": tree.resolve()} if before is None else {"before": before.resolve(), "after": tree.resolve()}
    last = max(1, rounds) - 1
    startup: dict[str, dict[str, list[float]]] = {name: {"baseline": [], "catalog": []} for name in trees}
    measured: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="catalog-scale-") as scratch_dir:
        scratch = Path(scratch_dir)
        from bench.catalog_tools import write_module  # this tree's catalog, for every tree measured

        module = f"{write_module(scratch, tools)}:toolkit"
        catalog_config = scratch / "catalog.yaml"
        catalog_config.write_text(CONFIG.format(name="catalog", module=module))
        baseline_config = scratch / "baseline.yaml"
        baseline_config.write_text(CONFIG.format(name="math", module="adapters.python.toolkits.arithmetic:toolkit"))
        for index in range(last + 1):
            for name in list(trees) if index % 2 == 0 else list(trees)[::-1]:
                path = trees[name]
                env = {"PYTHONPATH": os.pathsep.join([str(path), str(scratch)])}  # the tree's code first
                with serve(baseline_config, path, env, deadline) as server:
                    startup[name]["baseline"].append(server.startup_s)
                with serve(catalog_config, path, env, deadline) as server:
                    startup[name]["catalog"].append(server.startup_s)
                    if before is not None or index == last:
                        measured[name].append(_measure(server, tools, listing_requests, retrieval_requests, deadline))
    results = {name: _result(tools, trees[name], startup[name], _medians(measured[name])) for name in trees}
    if before is None:
        if show:
            print(table(results["after"]))
        return results["after"]
    compared = {"tools": tools, **results}
    if show:
        print(table(results["before"]))
        print(table(results["after"]))
        print(comparison(compared))
    return compared


def _result(tools: int, tree: Path, startup: dict[str, list[float]], measured: dict[str, Any]) -> dict[str, Any]:
    base, cat = statistics.median(startup["baseline"]), statistics.median(startup["catalog"])
    result: dict[str, Any] = {
        "tools": tools,
        "tree": str(tree),
        "startup_s": startup | {"baseline_median": base, "catalog_median": cat, "ratio": cat / base},
        **measured,
    }
    result["targets"] = targets(result)
    return result


def _medians(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One round's figures, or each number's median over the rounds (anything else: the last round's)."""
    if len(rounds) == 1:
        return rounds[0]
    merged: dict[str, Any] = {}
    for key, value in rounds[-1].items():
        values = [r[key] for r in rounds]
        if isinstance(value, dict):
            merged[key] = _medians(values)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            merged[key] = statistics.median(values)
        else:
            merged[key] = value
    return merged


def comparison(compared: dict[str, Any]) -> str:
    """Before and after side by side: each figure the issue sets a target for, and the first listings."""
    before, after = compared["before"], compared["after"]
    lines = [
        f"\nCatalog at {compared['tools']:,} tools: {before['tree']} -> {after['tree']} (medians over the rounds)",
        "| what | before | after | after/before | target | met after |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for key, row in after["targets"].items():
        old, new, unit = before["targets"][key]["figure"], row["figure"], row["unit"]
        met = "yes" if row["met"] else "NO"
        lines.append(
            f"| {key} | {fmt(old)} {unit} | {fmt(new)} {unit} | {new / old:.3f} | < {row['target']:g} {unit} | {met} |"
        )
    su_b, su_a = before["startup_s"]["baseline_median"], after["startup_s"]["baseline_median"]
    lines.append(f"| start-up, 4 Math tools (baseline) | {su_b:.2f} s | {su_a:.2f} s | {su_a / su_b:.3f} | | |")
    for name in after["listing"]:
        old, new = before["listing"][name]["first_ms"], after["listing"][name]["first_ms"]
        lines.append(f"| first {name} | {fmt(old)} ms | {fmt(new)} ms | {new / old:.3f} | | |")
    old, new = before["retrieval"]["first_ms"], after["retrieval"]["first_ms"]
    lines.append(f"| first retrieval (builds the index) | {fmt(old)} ms | {fmt(new)} ms | {new / old:.3f} | | |")
    old, new = before["floor"]["p50_ms"], after["floor"]["p50_ms"]
    lines.append(f"| floor: GET /healthz round trip | {old:.2f} ms | {new:.2f} ms | | | |")
    return "\n".join(lines)


def targets(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each figure the issue sets a target for, with the target and whether it is met."""
    rows: dict[str, dict[str, Any]] = {
        "start-up": {
            "figure": result["startup_s"]["catalog_median"],
            "unit": "s",
            "target": STARTUP_TARGET_S,
        }
    }
    for name, figures in result["listing"].items():
        rows[f"listing {name}"] = {"figure": figures["p50_ms"], "unit": "ms", "target": LISTING_TARGET_MS}
    rows["retrieval top-5"] = {"figure": result["retrieval"]["p50_ms"], "unit": "ms", "target": RETRIEVAL_TARGET_MS}
    for row in rows.values():
        row["met"] = row["figure"] < row["target"]
    return rows


def fmt(value: float) -> str:
    return f"{value:,.1f}"


def table(result: dict[str, Any]) -> str:
    su = result["startup_s"]
    lines = [
        f"\nCatalog at {result['tools']:,} tools ({result['tree']})",
        "| what | median | p95 | first | size | target | met |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        f"| start-up, {len(su['catalog'])} runs | {su['catalog_median']:.2f} s | | | | < {STARTUP_TARGET_S:g} s | "
        f"{'yes' if result['targets']['start-up']['met'] else 'NO'} |",
        f"| start-up, 4 Math tools (baseline) | {su['baseline_median']:.2f} s | | | | | |",
    ]
    for name, f in result["listing"].items():
        met = "yes" if result["targets"][f"listing {name}"]["met"] else "NO"
        lines.append(
            f"| {name} | {fmt(f['p50_ms'])} ms | {fmt(f['p95_ms'])} ms | {fmt(f['first_ms'])} ms | "
            f"{f['bytes'] / 1e6:.2f} MB | < {LISTING_TARGET_MS:g} ms | {met} |"
        )
    r = result["retrieval"]
    met = "yes" if result["targets"]["retrieval top-5"]["met"] else "NO"
    lines.append(
        f"| toolserver POST /retrieving_tools top-5 | {r['p50_ms']:.2f} ms | {r['p95_ms']:.2f} ms | "
        f"{fmt(r['first_ms'])} ms (index) | | < {RETRIEVAL_TARGET_MS:g} ms | {met} |"
    )
    fl = result["floor"]
    lines.append(f"| floor: GET /healthz round trip | {fl['p50_ms']:.2f} ms | {fl['p95_ms']:.2f} ms | | | | |")
    lines.append(f"| call {result['call']['tool']} via /opentool/call | {result['call']['ms']:.2f} ms | | | | | ok |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=DEFAULT_TOOLS)
    parser.add_argument("--rounds", type=int, default=2, help="start-ups of each config, alternating")
    parser.add_argument("--listing-requests", type=int, default=20)
    parser.add_argument("--retrieval-requests", type=int, default=50)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the source tree whose gateway is measured")
    parser.add_argument("--before", type=Path, help="another source tree, measured in the same run for comparison")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--max-seconds", type=float, default=900)
    args = parser.parse_args()
    result = run_catalog(
        args.tree,
        time.monotonic() + args.max_seconds,
        tools=args.tools,
        rounds=args.rounds,
        listing_requests=args.listing_requests,
        retrieval_requests=args.retrieval_requests,
        before=args.before,
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
