"""Reading an OpenAPI document: a file or a URL, JSON or YAML, and the `$ref`s it holds.

A document is parsed once; each `$ref` is resolved once (a JSON pointer into the document, or into
another file of the same document, itself parsed once) and remembered, so building a thousand
operations never re-reads or deep-copies anything. Where a `$ref` may lead is bounded:

- within the document, and to files beside it (a document on disk: files under its own directory;
  a document at a URL: URLs of the same origin), always;
- to other hosts (any http(s) URL from a document on disk) only with `remote_refs: true`;
- never to a `file:` URL from a document fetched over HTTP.

A referenced URL that is not fetched yet raises `NeedDocument`: the backend fetches it (asynchronously,
through its upstream client, bounded) and builds the operation again. Every problem is a `DocumentError`
naming the document, the JSON pointer and what is wrong there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import orjson
import yaml

JSON_START = (b"{", b"[")


class DocumentError(Exception):
    """Something unusable in a document: which document, where (a JSON pointer) and what."""

    def __init__(self, document: str, pointer: str, problem: str) -> None:
        super().__init__(f"{document}#{pointer}: {problem}")
        self.document = document
        self.pointer = pointer
        self.problem = problem


class NeedDocument(Exception):
    """A `$ref` leads to a URL that is not fetched yet."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


def _yaml_loader() -> type[yaml.SafeLoader]:
    """The C safe loader when built (YAML is slow to parse in Python), with timestamps left as strings:
    a schema's `default: 2024-01-01` is the string JSON would carry, not a `date`."""
    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc,valid-type]
        pass

    Loader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in base.yaml_implicit_resolvers.items()
    }
    return Loader


_LOADER = _yaml_loader()


def parse(data: bytes, where: str) -> Any:
    """JSON (by orjson, fast) when it looks like JSON, else YAML; a DocumentError naming `where` otherwise."""
    if data.lstrip()[:1] in JSON_START:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # YAML is a superset: a lenient document may still read as YAML
    try:
        return yaml.load(data, Loader=_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise DocumentError(where, "", f"neither JSON nor YAML{at}: {getattr(exc, 'problem', None) or exc}") from None


def is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def escape(token: str) -> str:
    """One JSON pointer token (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def pointer_get(root: Any, pointer: str, where: str) -> Any:
    """The node at `pointer` (RFC 6901, already percent-decoded); a DocumentError when there is none."""
    node = root
    if pointer in ("", "/"):
        return node
    if not pointer.startswith("/"):
        raise DocumentError(where, pointer, "only JSON pointers are supported in $ref fragments (no anchors)")
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            if token not in node:
                raise DocumentError(where, pointer, f"not found (no {token!r})")
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise DocumentError(where, pointer, f"not found (no {token!r})")
    return node


@dataclass
class Documents:
    """The main document and every file its `$ref`s reached, each parsed once; `$ref`s resolved once each."""

    main: str  # the main document's URL or absolute path
    root: dict[str, Any]
    remote_refs: bool = False
    max_bytes: int = 128 * 1024 * 1024
    parsed: dict[str, Any] = field(default_factory=dict)  # URL or absolute path -> parsed document
    _resolved: dict[tuple[str, str], tuple[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.parsed[self.main] = self.root

    def target(self, ref: str, base: str, where: str) -> tuple[str, Any]:
        """(`uri#pointer` of the target, the node there) of `ref` read in the document `base`.

        `where` is the pointer of the `$ref` itself, for errors. Memoized per (base, ref).
        """
        memo = self._resolved.get((base, ref))
        if memo is not None:
            return memo
        location, _, fragment = ref.partition("#")
        document = self._locate(location, base, where) if location else base
        root = self._document(document, base, where)
        pointer = unquote(fragment)
        try:
            node = pointer_get(root, pointer, document)
        except DocumentError as exc:  # said where the $ref is, which is what needs fixing
            raise DocumentError(base, where, f"$ref {ref!r}: {exc.problem}") from None
        found = (f"{document}#{pointer}", node)
        self._resolved[(base, ref)] = found
        return found

    def follow(self, node: Any, base: str, where: str) -> tuple[Any, str, str]:
        """A non-schema object (parameter, request body, response, security scheme) with its `$ref` chain
        followed: (the object, the document it is in, its pointer there)."""
        seen: set[str] = set()
        pointer = where
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            uri, node = self.target(node["$ref"], base, pointer)
            if uri in seen:
                raise DocumentError(base, pointer, "$ref loop")
            seen.add(uri)
            base, _, pointer = uri.partition("#")
        return node, base, pointer

    def _locate(self, location: str, base: str, where: str) -> str:
        """The absolute URL or path `location` names from `base`, if it may be read."""
        if is_url(base):
            target = urljoin(base, location)
            if not is_url(target):
                raise DocumentError(base, where, f"$ref {location!r}: a document fetched over HTTP refers to URLs only")
            if not self.remote_refs and _origin(target) != _origin(base):
                raise DocumentError(base, where, f"$ref {location!r} is on another host (allow with remote_refs: true)")
            return target.partition("#")[0]
        if is_url(location):
            if not self.remote_refs:
                raise DocumentError(base, where, f"$ref {location!r} is remote (allow with remote_refs: true)")
            return location
        if location.startswith("file:"):
            location = unquote(urlsplit(location).path)
        path = os.path.normpath(os.path.join(os.path.dirname(base), location))
        home = os.path.dirname(self.main) if not is_url(self.main) else None
        if home is not None and os.path.commonpath([home, path]) != home:
            raise DocumentError(base, where, f"$ref {location!r} leaves the document's directory")
        return path

    def _document(self, document: str, base: str, where: str) -> Any:
        found = self.parsed.get(document)
        if found is not None:
            return found
        if is_url(document):
            raise NeedDocument(document)
        path = Path(document)
        try:
            size = path.stat().st_size
            if size > self.max_bytes:
                raise DocumentError(base, where, f"{document} is larger than max_document_bytes ({self.max_bytes})")
            data = path.read_bytes()
        except OSError as exc:
            raise DocumentError(base, where, f"cannot read {document}: {exc.strerror or exc}") from None
        parsed = parse(data, document)
        self.parsed[document] = parsed
        return parsed

    def add(self, url: str, data: bytes) -> None:
        """A fetched document (`NeedDocument`), parsed and kept."""
        self.parsed[url] = parse(data, url)


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc


def openapi_root(parsed: Any, where: str) -> tuple[dict[str, Any], str]:
    """The document as OpenAPI 3 (Swagger 2.0 converted) and its version, `3.0` or `3.1`."""
    if not isinstance(parsed, dict):
        raise DocumentError(where, "", "the document is not an object")
    if str(parsed.get("swagger", "")).startswith("2"):
        from adapters.openapi.swagger2 import convert  # only documents that need it pay for the import

        try:
            parsed = convert(parsed)
        except Exception as exc:  # a converter refusing says why, as a problem of the document
            raise DocumentError(where, "", f"Swagger 2.0 document could not be converted: {exc}") from None
    version = str(parsed.get("openapi", ""))
    if not version.startswith("3."):
        found = parsed.get("openapi", parsed.get("swagger"))
        raise DocumentError(where, "/openapi", f"not an OpenAPI 3 document (openapi: {found!r})")
    if not isinstance(parsed.get("paths", {}), dict):
        raise DocumentError(where, "/paths", "paths is not an object")
    return parsed, "3.0" if version.startswith("3.0") else "3.1"


def read_file(path: str, max_bytes: int) -> bytes:
    """A document on disk, bounded; a DocumentError naming it when it cannot be read."""
    try:
        size = os.stat(path).st_size
        if size > max_bytes:
            raise DocumentError(path, "", f"larger than max_document_bytes ({max_bytes})")
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise DocumentError(path, "", f"cannot read it: {exc.strerror or exc}") from None
