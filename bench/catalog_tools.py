"""A large, realistic catalog for the `kind: python` backend: `BENCH_CATALOG_TOOLS` tools (default 10,000).

Names, descriptions and 1-4 typed parameters come from a few hundred words through a seeded
random, so the catalog is the same on every run and retrieval has something to rank. The
tools are spread over toolkits of about 200 tools each, as a ToolServerNode's envs are. Every
tool is a real `@tool` (`blocking=False`) that answers `{"tool": <name>, "arguments": {...}}`.

Two forms of the same tools:
- `write_module(directory, count)`: a Python source file of `count` plain `@tool` functions,
  byte-compiled, as a deployed package of 10,000 tools would be. bench/catalog_scale.py serves
  this one, so start-up measures the gateway, not the generator: making the blueprints and
  building functions from them at start-up cost about 0.9 s of the 2 s start-up target.
- `build(blueprint)` / `toolkit`: functions built from closures at run time (tests, quick
  experiments); `toolkit` is generated when first read, so importing the module for its words
  costs nothing.
"""

from __future__ import annotations

import functools
import inspect
import os
import py_compile
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from adapters.python import tool

DEFAULT_TOOLS = 10_000
TOOLS_PER_KIT = 200
SEED = 20_240_611


def _words(text: str) -> list[str]:
    return text.split()


DOMAINS = _words("""Billing Crm Calendar Weather Maps Travel Flights Hotels Inventory Shipping Payments Invoices Payroll
    Recruiting Support Tickets Wiki Docs Sheets Slides Email Chat Sms Voice Video Photos Music Podcasts News Finance
    Stocks Crypto Tax Legal Health Fitness Recipes Grocery Retail Orders Returns Reviews Surveys Analytics Metrics
    Logs Alerts Incidents Deploys Builds Tests Repos Issues Secrets Dns Cdn Storage Backups Database Search Vectors
    Translate Speech Vision Ocr Pdf Images Charts Geo Iot Sensors Energy Fleet Rides Parking Events Tickets2
    Library Courses Grades Hr Assets Contracts Leads Campaigns Ads Social Forms Notes Tasks Projects""")
VERBS = _words("""get list find search create update delete archive restore export import sync send schedule cancel
    approve reject merge split convert translate summarize classify tag rank score predict estimate compare
    validate verify check monitor track notify share publish upload download resize compress encrypt decrypt
    sign refund charge transfer book reserve assign close reopen escalate forecast analyze aggregate count
    detect extract parse render preview lock unlock rotate""")
NOUNS = _words("""invoice customer account contact lead deal order payment refund subscription plan coupon product
    sku warehouse shipment parcel carrier route driver vehicle trip flight hotel room booking itinerary
    passenger ticket seat event meeting calendar reminder task project milestone sprint issue bug commit
    branch build release deployment incident alert metric dashboard report chart log trace span query
    index document page paragraph sentence file folder image photo video audio track playlist podcast episode
    article headline comment review rating survey response form field record table row column schema
    message email thread channel attachment contract clause signature policy claim patient appointment
    prescription doctor recipe ingredient meal workout stock portfolio trade price quote currency wallet
    transaction budget expense receipt salary employee candidate interview offer course lesson student grade
    book author loan asset license device sensor reading temperature forecast location address region
    country city zone domain certificate secret key token user group role permission backup snapshot
    volume bucket object cluster node container job pipeline workflow webhook campaign audience segment""")
QUALIFIERS = _words("""daily weekly monthly recent pending overdue active archived draft public private shared
    encrypted large small duplicate missing failed successful scheduled recurring urgent critical
    internal external regional global local remote mobile historical upcoming unpaid paid open closed
    flagged verified unverified primary secondary default custom bulk single nested raw cleaned""")
FILLER = _words("""using the configured provider with optional filters and returns a compact summary for the caller
    including totals status and timestamps when available sorted by relevance newest first across every
    workspace the user can access within the current organisation respecting quotas and rate limits""")
TEMPLATES = (
    "{Verb} {what} records of the {kit} service by {about}, {tail}.",
    "{Verb} a {what} in {kit}. Matches on {about}; {tail}.",
    "{Verb} {what} entries ({kit}) for the given {about} {tail}.",
    "{Verb} the {what}: looks at {about} in {kit} {tail}.",
)
PARAMETERS: list[tuple[str, Any, str]] = [
    ("query", str, "free text to match"),
    ("limit", int, "how many results at most"),
    ("offset", int, "results to skip"),
    ("customer_id", str, "the customer's identifier"),
    ("account_id", str, "the account to act on"),
    ("start_date", str, "first day, ISO 8601"),
    ("end_date", str, "last day, ISO 8601"),
    ("amount", float, "the amount in the account's currency"),
    ("currency", str, "ISO 4217 currency code"),
    ("include_archived", bool, "also consider archived records"),
    ("dry_run", bool, "report what would change without changing it"),
    ("tags", list[str], "labels to filter by"),
    ("region", str, "the region code"),
    ("threshold", float, "the minimum score kept"),
    ("page_size", int, "results per page"),
    ("language", str, "BCP 47 language tag"),
    ("email", str, "an email address"),
    ("priority", int, "1 (highest) to 5"),
    ("recursive", bool, "descend into nested items"),
    ("fields", list[str], "the fields to return"),
]


@dataclass(frozen=True)
class Blueprint:
    """What one generated tool is made of, before it becomes a function."""

    toolkit: str
    name: str
    description: str
    parameters: tuple[tuple[str, Any, str, bool], ...]  # name, type, description, required


def _camel(*words: str) -> str:
    return "".join(w[:1].upper() + w[1:] for word in words for w in word.split("_"))


def blueprints(count: int, seed: int = SEED) -> list[Blueprint]:
    """`count` distinct tools, the same for the same count and seed."""
    rng = random.Random(seed)
    kits = max(1, -(-count // TOOLS_PER_KIT))
    toolkits = [DOMAINS[i % len(DOMAINS)] + ("" if i < len(DOMAINS) else str(i // len(DOMAINS))) for i in range(kits)]
    out: list[Blueprint] = []
    seen: set[tuple[str, str]] = set()
    while len(out) < count:
        toolkit = toolkits[len(out) % kits]
        verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
        qualifier = rng.choice(QUALIFIERS) if rng.random() < 0.5 else ""
        name = _camel(verb, qualifier, noun) if qualifier else _camel(verb, noun)
        if (toolkit, name) in seen:
            continue
        seen.add((toolkit, name))
        about = [rng.choice(NOUNS) for _ in range(rng.randint(1, 3))]
        tail = rng.sample(FILLER, rng.randint(4, 12))
        what = f"{qualifier} {noun}" if qualifier else noun
        description = rng.choice(TEMPLATES).format(
            Verb=verb.capitalize(), what=what, kit=toolkit.lower(), about=", ".join(about), tail=" ".join(tail)
        )
        chosen = rng.sample(PARAMETERS, rng.randint(1, 4))
        params = tuple((p, kind, text, i == 0 or rng.random() < 0.5) for i, (p, kind, text) in enumerate(chosen))
        out.append(Blueprint(toolkit, name, description, params))
    return out


def _default(kind: Any) -> Any:
    return {str: "", int: 0, float: 0.0, bool: False}.get(kind)


@functools.lru_cache(maxsize=8)
def _takes_blocking(declare: Callable[..., Any]) -> bool:
    """Asked once per decorator, not once per tool: `inspect.signature` of `tool` costs more than a tool."""
    return "blocking" in inspect.signature(declare).parameters


def build(blueprint: Blueprint, *, declare: Callable[..., Any] = tool) -> Callable[..., Any]:
    """A real `@tool` function with the blueprint's name, description and typed keyword parameters."""
    name = blueprint.name

    def run(**arguments: Any) -> dict[str, Any]:
        return {"tool": name, "arguments": arguments}

    parameters = []
    annotations: dict[str, Any] = {}
    for param, kind, text, required in blueprint.parameters:
        default = inspect.Parameter.empty if required else _default(kind)
        annotations[param] = Annotated[kind | None, text] if default is None else Annotated[kind, text]
        parameters.append(inspect.Parameter(param, inspect.Parameter.KEYWORD_ONLY, default=default))
    annotations["return"] = dict[str, Any]
    run.__name__ = run.__qualname__ = name
    run.__doc__ = blueprint.description
    run.__annotations__ = annotations
    run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    options: dict[str, Any] = {"name": name, "toolkit": blueprint.toolkit, "side_effects": False}
    if _takes_blocking(declare):  # older trees' `tool` has no `blocking`
        options["blocking"] = False
    return declare(run, **options)  # type: ignore[no-any-return]


_SOURCE_TYPES = {str: "str", int: "int", float: "float", bool: "bool", list[str]: "list[str]"}
_SOURCE_HEAD = '''"""{count:,} generated tools (bench/catalog_tools.py, seed {seed}): do not edit."""

import inspect
from typing import Annotated, Any

from adapters.python import tool

# Older trees' `tool` has no `blocking`.
_QUICK = {{"blocking": False}} if "blocking" in inspect.signature(tool).parameters else {{}}
toolkit: list[Any] = []


def _listed(fn: Any) -> Any:
    toolkit.append(fn)
    return fn

'''


def source(blueprint: Blueprint, index: int) -> str:
    """One blueprint as a plain `@tool` function, as a person would write it (keyword-only parameters)."""
    params = []
    for param, kind, text, required in blueprint.parameters:
        written = _SOURCE_TYPES[kind]
        if required:
            params.append(f"{param}: Annotated[{written}, {text!r}]")
        else:
            default = _default(kind)
            written = f"{written} | None" if default is None else written
            params.append(f"{param}: Annotated[{written}, {text!r}] = {default!r}")
    return (
        f"\n\n@_listed\n"
        f"@tool(name={blueprint.name!r}, toolkit={blueprint.toolkit!r}, side_effects=False, **_QUICK)\n"
        f"def tool_{index}(*, {', '.join(params)}) -> dict[str, Any]:\n"
        f"    {blueprint.description!r}\n"
        f'    return {{"tool": {blueprint.name!r}, "arguments": locals()}}\n'
    )


def write_module(directory: Path, count: int, seed: int = SEED) -> str:
    """`<directory>/bench_catalog_<count>.py` with `count` tools, byte-compiled; its module name.

    The module's `toolkit` lists the functions. Compiled here, before anything is timed, as an
    installed package is: compiling 10,000 functions is not what a gateway's start-up costs.
    """
    name = f"bench_catalog_{count}"
    path = directory / f"{name}.py"
    text = _SOURCE_HEAD.format(count=count, seed=seed) + "".join(
        source(b, i) for i, b in enumerate(blueprints(count, seed))
    )
    path.write_text(text)
    py_compile.compile(str(path), doraise=True)
    return name


def tool_count() -> int:
    return int(os.environ.get("BENCH_CATALOG_TOOLS", DEFAULT_TOOLS))


def generate(count: int) -> list[Callable[..., Any]]:
    return [build(b) for b in blueprints(count)]


def vocabulary() -> list[str]:
    """Words a question may be built from (bench/catalog_scale.py asks with them)."""
    return [*VERBS, *NOUNS, *QUALIFIERS, *(d.lower() for d in DOMAINS)]


_generated: list[Callable[..., Any]] | None = None


def __getattr__(name: str) -> Any:
    """`toolkit` is generated on first access (by the backend), so the words can be imported cheaply."""
    global _generated
    if name != "toolkit":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _generated is None:
        _generated = generate(tool_count())
    return _generated
