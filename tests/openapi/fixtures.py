"""Real OpenAPI documents, a Prism mock server and the reference Swagger 2.0 converter, for tests/openapi.

The npm packages (pinned by tests/openapi/fixtures/package-lock.json) are installed into .tools/openapi/ by
tests/openapi/install_openapi_fixtures.sh, which `make test` runs. Every server listens on 127.0.0.1 only.

    docs = documents_dir()
    with Prism(docs.openapi30 / "json" / "petstore.json") as prism:
        httpx.get(f"{prism.base}/pet/1", headers={"api_key": "k"})
    with EchoApp() as echo:  # tests/openapi/echo_app.py as a real uvicorn process
        httpx.get(f"{echo.base}/openapi.json")
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any
from urllib.parse import unquote

from tests.support import ROOT, free_port, stop, wait_for_port

try:  # a test dependency: the OpenAPI 2.0/3.0/3.1 specification's own schemas and rules
    from openapi_spec_validator import validate as validate_spec
except ImportError:  # pragma: no cover - structural checks only, then
    validate_spec = None

PREFIX = ROOT / ".tools" / "openapi"  # where install_openapi_fixtures.sh puts the npm packages
NODE_MODULES = PREFIX / "node_modules"
OAS_EXAMPLES = NODE_MODULES / "@readme" / "oas-examples"
GITHUB_DOCUMENT = NODE_MODULES / "@octokit" / "openapi" / "generated" / "api.github.com.json"
PRISM_CLI = NODE_MODULES / "@stoplight" / "prism-cli" / "dist" / "index.js"
SWAGGER2OPENAPI = NODE_MODULES / "swagger2openapi"
START_TIMEOUT_S = 60.0  # an upper bound: Prism takes ~1 s on an example, ~15 s on GitHub's document
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
INSTALL_HINT = "run tests/openapi/install_openapi_fixtures.sh (make test does)"


@dataclass(frozen=True)
class Documents:
    """Where the installed documents are. Each example folder has json/ and yaml/ subfolders."""

    oas_examples: Path  # @readme/oas-examples
    swagger20: Path  # its 2.0/ (7 documents)
    openapi30: Path  # its 3.0/ (41 documents; json/openapi-workshop/ holds 11 fragments)
    openapi31: Path  # its 3.1/ (12 documents)
    github: Path  # @octokit/openapi's api.github.com.json (OpenAPI 3.0.3, 1,223 operations, 13 MB)

    def examples(self, version: str, fmt: str = "json") -> list[Path]:
        """The example documents of `version` ("2.0", "3.0" or "3.1") in `fmt` ("json" or "yaml"), sorted."""
        folder = self.oas_examples / version / fmt
        return sorted(p for p in folder.iterdir() if p.suffix in (".json", ".yaml", ".yml") and p.is_file())


def documents_dir() -> Documents:
    """The installed documents (see missing_reason() first: the paths exist only once installed)."""
    return Documents(
        oas_examples=OAS_EXAMPLES,
        swagger20=OAS_EXAMPLES / "2.0",
        openapi30=OAS_EXAMPLES / "3.0",
        openapi31=OAS_EXAMPLES / "3.1",
        github=GITHUB_DOCUMENT,
    )


def node_binary() -> str | None:
    return shutil.which("node")


def missing_reason(*, node: bool = False) -> str | None:
    """Why the documents (and, with `node`, Prism and the reference converter) cannot be used here, or None."""
    if not (OAS_EXAMPLES / "package.json").is_file() or not GITHUB_DOCUMENT.is_file():
        return f"the OpenAPI example documents are not installed in .tools/openapi: {INSTALL_HINT}"
    if node:
        if node_binary() is None:
            return "node is not on PATH: Prism and swagger2openapi need Node.js 20.19+"
        if not PRISM_CLI.is_file() or not (SWAGGER2OPENAPI / "package.json").is_file():
            return f"@stoplight/prism-cli or swagger2openapi is not installed in .tools/openapi: {INSTALL_HINT}"
    return None


def operation_count(document: dict[str, Any]) -> int:
    """Paths × methods: how many operations a document (2.0, 3.0 or 3.1) declares."""
    paths = document.get("paths") or {}
    return sum(1 for item in paths.values() if isinstance(item, dict) for method in METHODS if method in item)


def unresolved_refs(document: Any) -> list[str]:
    """Every local $ref ("#/...") of `document` that does not resolve in it (an empty list: all resolve)."""
    missing: list[str] = []

    def resolves(ref: str) -> bool:
        node = document
        for token in ref[2:].split("/") if ref != "#" else []:
            token = unquote(token).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return False
        return True

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#") and not resolves(ref):
                missing.append(ref)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document)
    return missing


# The reference converter, as its README says to call it (patch mode: fixes the small errors it can).
_REFERENCE_SCRIPT = """
const s2o = require(process.argv[1]);
const documents = JSON.parse(require('fs').readFileSync(0, 'utf8'));
Promise.all(documents.map(d => s2o.convertObj(d, {patch: true, warnOnly: true, direct: true})))
  .then(r => process.stdout.write(JSON.stringify(r)))
  .catch(e => { console.error(e); process.exit(1); });
"""


def reference_convert(documents: list[dict[str, Any]], timeout: float = 60.0) -> list[dict[str, Any]]:
    """Each Swagger 2.0 document as npm swagger2openapi converts it (one node process for all)."""
    result = subprocess.run(
        [node_binary() or "node", "-e", _REFERENCE_SCRIPT, str(SWAGGER2OPENAPI)],
        input=json.dumps(documents).encode(),
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"swagger2openapi failed: {result.stderr.decode(errors='replace')[-2000:]}")
    return list(json.loads(result.stdout))


class _Server:
    """A server process in its own process group on a free loopback port; the group is killed on exit."""

    name = "server"

    def __init__(self, start_timeout: float = START_TIMEOUT_S) -> None:
        self.start_timeout = start_timeout
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def base(self) -> str:
        """http://127.0.0.1:<port>"""
        return f"http://127.0.0.1:{self.port}"

    def command(self, port: int) -> list[str]:
        raise NotImplementedError

    def __enter__(self) -> _Server:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> _Server:
        for attempt in range(3):  # the free port can be taken between free_port() and the bind
            self.port = free_port()
            self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
            self.process = subprocess.Popen(
                self.command(self.port),
                cwd=ROOT,
                env={**os.environ, "NO_COLOR": "1", "SCARF_ANALYTICS": "false"},
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                start_new_session=True,
            )
            try:
                wait_for_port(self.port, self.process, timeout=self.start_timeout)
                return self
            except (RuntimeError, TimeoutError) as exc:
                log = self.log()
                self.close()
                if ("EADDRINUSE" in log or "address already in use" in log) and attempt < 2:
                    continue
                raise RuntimeError(f"{self.name} did not start: {exc}\n{log[-4000:]}") from None
            except BaseException:
                self.close()
                raise
        raise AssertionError("unreachable")

    def log(self) -> str:
        """What the server wrote (stdout and stderr) so far."""
        if self._log is None or self._log.closed:
            return ""
        self._log.seek(0)
        text = self._log.read().decode("utf-8", "replace")
        self._log.seek(0, os.SEEK_END)
        return text

    def close(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            # Signals go to the group while its leader is not reaped yet (the group id is still ours).
            for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
                if process.poll() is not None:
                    break
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=grace)
            stop(process)  # reaped in every case
        if self._log is not None:
            self._log.close()
            self._log = None


class Prism(_Server):
    """`prism mock <document> --host 127.0.0.1 --port <free port>`: answers as the document says.

    `dynamic`: responses generated from the schemas (`seed` makes them repeatable) instead of the examples;
    `errors`: a request that breaks the document gets a 422 problem (not just a sl-violations header).
    """

    name = "prism"

    def __init__(
        self,
        document: Path | str,
        *,
        dynamic: bool = False,
        errors: bool = False,
        seed: str | None = None,
        extra_args: tuple[str, ...] = (),
        start_timeout: float = START_TIMEOUT_S,
    ) -> None:
        super().__init__(start_timeout)
        self.document = str(document)
        self.options = ["--dynamic"] if dynamic else []
        if errors:
            self.options.append("--errors")
        if seed is not None:
            self.options += ["--seed", seed]
        self.options += list(extra_args)

    def command(self, port: int) -> list[str]:
        prism = [node_binary() or "node", str(PRISM_CLI), "mock", self.document]
        return [*prism, "--host", "127.0.0.1", "--port", str(port), *self.options]

    def __enter__(self) -> Prism:
        self.start()
        return self


class EchoApp(_Server):
    """tests/openapi/echo_app.py under uvicorn, a real process; its document is at `.document_url`."""

    name = "echo app"

    def command(self, port: int) -> list[str]:
        return [sys.executable, "-m", "tests.openapi.echo_app", "--port", str(port)]

    @property
    def document_url(self) -> str:
        return f"{self.base}/openapi.json"

    @property
    def api(self) -> str:
        """The document's server URL: every operation's path is under it."""
        return f"{self.base}/api"

    def __enter__(self) -> EchoApp:
        self.start()
        return self
