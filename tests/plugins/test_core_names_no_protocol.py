"""The core names no protocol: every protocol is a plug-in, found through its entry point.

Code in `gateway/` may not import `adapters` nor use a protocol's name in an
identifier or a string. Comments and docstrings may cite a protocol as an example.
"""

from __future__ import annotations

import ast
import re

from tests.support import ROOT

PROTOCOLS = re.compile(r"opentool|oxp|toolserver|jsonrpc|json_rpc|typescript|arcade", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def protocol_names(source: str) -> list[str]:
    """Each import of `adapters`, identifier or string literal (docstrings aside) naming a protocol."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"import {m}" for m in modules if m == "adapters" or m.startswith("adapters.")]
        words: list[str] = []
        if isinstance(node, ast.Name):
            words = [node.id]
        elif isinstance(node, ast.Attribute):
            words = [node.attr]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            words = [node.name]
        elif isinstance(node, ast.arg):
            words = [node.arg]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words = [node.value]
        found += [f"{type(node).__name__} {word!r}" for word in words if PROTOCOLS.search(word)]
    return found


def test_the_checker_finds_what_it_looks_for() -> None:
    sample = '"""Mentions OXP: fine."""\nfrom adapters.oxp import front\nx = "oxp:call"  # OXP, fine\n'
    sample += "def to_opentool(): ...\n"
    assert sorted(protocol_names(sample)) == ["Constant 'oxp:call'", "FunctionDef 'to_opentool'", "import adapters.oxp"]


def test_gateway_names_no_protocol() -> None:
    offending = {
        str(path.relative_to(ROOT)): names
        for path in sorted((ROOT / "gateway").rglob("*.py"))
        if (names := protocol_names(path.read_text()))
    }
    assert offending == {}


# A front reaches the core only through FrontServices and the shared vocabulary (model, errors, http helpers).
CORE_INTERNALS = ("gateway.runtime", "gateway.dispatch", "gateway.pipeline", "gateway.catalog", "gateway.config")


def test_fronts_use_the_services_not_the_core_internals() -> None:
    reached = {}
    for path in sorted((ROOT / "adapters").glob("*/front.py")):
        modules = [
            node.module or "" for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ImportFrom)
        ]
        internal = [m for m in modules if m.startswith(CORE_INTERNALS)]
        if internal:
            reached[str(path.relative_to(ROOT))] = internal
    assert reached == {}
