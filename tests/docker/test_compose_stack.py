"""The compose stack for real: build the image, `up --scale gateway=2`, call through nginx, tear down;
and the scaling scenario of tests/docker/load.py under load on the engine (`make compose-test`).

Runs only where `docker compose` works and `docker info` reaches an engine that can pull the base
images; skipped otherwise, saying which (the machines this project is developed on have a docker
client and no engine). The stack gets a project name and image tag of its own and a free host
port, and is removed, volumes included, whatever happens.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from tests.docker.load import STEP_TIMEOUT_S, check, run_scenario
from tests.docker.stack import COMPOSE, DOCKERFILE, compose, wait_until_ok
from tests.support import ROOT, free_port

UP_TIMEOUT_S = 900  # a first build downloads the base images and installs every package
CALL_TIMEOUT_S = 120


def docker(*args: str, timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def _why_not() -> str | None:
    """None when this machine can build and run the stack; otherwise why not."""
    if shutil.which("docker") is None:
        return "docker is not installed"
    if docker("compose", "version").returncode != 0:
        return "`docker compose` (the compose plugin) is not installed"
    info = docker("info", "--format", "{{.ServerVersion}}")
    if info.returncode != 0 or not info.stdout.strip():
        first = (info.stderr.strip().splitlines() or ["no answer"])[0]
        return f"`docker info` reaches no engine: {first}"
    return None


def base_images() -> list[str]:
    """Every image the stack pulls: the Dockerfile's bases and the compose services' own images."""
    text = DOCKERFILE.read_text()
    found = re.findall(r"^ARG \w+_IMAGE=(\S+)", text, re.M)
    found += [str(s["image"]) for s in compose()["services"].values() if "build" not in s]
    return found


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[str, list[str], dict[str, str]]]:
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    for image in base_images():
        if docker("image", "inspect", image).returncode == 0:
            continue  # already here (pulled before, or a local stand-in where no registry is reachable)
        pulled = docker("pull", "--quiet", image, timeout=UP_TIMEOUT_S)
        if pulled.returncode != 0:
            pytest.skip(f"the docker engine cannot pull {image}: {pulled.stderr.strip()[:300]}")
    tag = f"test-{uuid.uuid4().hex[:8]}"
    port = free_port()
    env = {**os.environ, "TOOLPLEX_PORT": str(port), "TOOLPLEX_TAG": tag}
    command = ["compose", "-p", f"toolplex-test-{tag}", "-f", str(COMPOSE)]
    try:
        up = docker(
            *command,
            *("up", "-d", "--build", "--scale", "gateway=2", "--wait", "--wait-timeout", str(UP_TIMEOUT_S)),
            timeout=UP_TIMEOUT_S + 60,
            env=env,
        )
        if up.returncode != 0:
            logs = docker(*command, "logs", "--no-color", "--tail", "60", env=env, timeout=120)
            pytest.fail(f"`up` failed ({up.returncode}):\n{up.stderr[-4000:]}\n{logs.stdout[-6000:]}")
        yield f"http://127.0.0.1:{port}", command, env
    finally:
        keep = os.environ.get("TOOLPLEX_COMPOSE_LOGS")  # a file for every container's log, before they are removed
        if keep:
            logs = docker(*command, "logs", "--no-color", "--timestamps", env=env, timeout=120)
            Path(keep).write_text(logs.stdout + logs.stderr)
        docker(*command, "down", "--volumes", "--remove-orphans", "--timeout", "30", env=env, timeout=300)
        docker("image", "rm", "--force", f"toolplex:{tag}", timeout=120)


def test_two_replicas_behind_nginx(stack: tuple[str, list[str], dict[str, str]]) -> None:
    base, command, env = stack
    replicas = docker(*command, "ps", "--quiet", "gateway", env=env).stdout.split()
    assert len(replicas) == 2, replicas
    assert wait_until_ok(f"{base}/healthz", CALL_TIMEOUT_S).json() == {"status": "ok"}

    with httpx.Client(base_url=base, timeout=CALL_TIMEOUT_S) as client:
        added = client.post(
            "/opentool/call", json={"jsonrpc": "2.0", "method": "Math_Add", "params": {"a": 10, "b": 5}, "id": "1"}
        )
        assert added.json()["result"] == {"result": 15}, added.text
        # Url_Parse runs in the `tools` container's Node.js sidecar, reached through the gateway.
        parsed = client.post("/tools/call", json={"tool_id": "Url.Parse", "input": {"url": "https://example.com/a"}})
        assert parsed.json()["value"]["hostname"] == "example.com", parsed.text
        for _ in range(10):
            assert client.get("/healthz").status_code == 200

    logs = docker(*command, "logs", "--no-color", "--no-log-prefix", "nginx", env=env).stdout
    upstreams = {m.group(1) for m in re.finditer(r"upstream=(\d+\.\d+\.\d+\.\d+:8080)", logs)}
    assert len(upstreams) == 2, f"nginx did not use both replicas: {upstreams}"


def instant(text: str) -> datetime:
    """An engine's RFC 3339 time (nanoseconds, trailing zeros dropped) as a datetime."""
    whole, _, fraction = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{whole}.{(fraction + '000000')[:6]}+00:00")


class ComposeDeployment:
    """The stack's gateway replicas changed with the engine's own commands (`tests.docker.load.Deployment`)."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.command = command
        self.env = env

    def _run(self, *args: str, timeout: float = 180) -> str:
        done = docker(*args, timeout=timeout, env=self.env)
        assert done.returncode == 0, f"docker {' '.join(args)}: {done.stderr[-2000:]}"
        return done.stdout

    def replicas(self) -> list[str]:
        return self._run(*self.command, "ps", "--quiet", "gateway").split()

    def _healthy(self, container: str) -> None:
        """Until a health check begun since the container's (re)start passed: right after `docker restart` the
        engine may still report the health of the process before."""
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while True:
            state = json.loads(self._run("inspect", "--format", "{{json .State}}", container))
            checks = state.get("Health", {}).get("Log") or []
            since = instant(state["StartedAt"])
            if any(check.get("ExitCode") == 0 and instant(check["Start"]) > since for check in checks):
                return
            assert time.monotonic() < deadline, f"{container} not healthy: {state}"
            time.sleep(0.2)

    def scale(self, replicas: int) -> None:
        """`up --scale`: new replicas started and waited for; extra ones stopped (drained) and removed."""
        self._run(*self.command, "up", "-d", "--no-build", "--no-recreate", "--wait", "--scale", f"gateway={replicas}")
        assert len(self.replicas()) == replicas

    def restart_each(self) -> list[str]:
        names = self.replicas()
        for container in names:
            self._run("restart", "--time", "40", container)  # SIGTERM: drain, grace, then start again
            self._healthy(container)
        return names

    def kill_one(self) -> None:
        self._run("kill", self.replicas()[0])


@pytest.mark.skipif(os.environ.get("TOOLPLEX_SCALE_TEST") != "1", reason="run by `make compose-test`")
def test_scaling_restarting_and_losing_replicas_under_load_on_the_engine(
    stack: tuple[str, list[str], dict[str, str]],
) -> None:
    base, command, env = stack
    deployment = ComposeDeployment(command, env)
    deployment.scale(2)
    wait_until_ok(f"{base}/healthz", CALL_TIMEOUT_S)
    check(run_scenario(base, deployment))
