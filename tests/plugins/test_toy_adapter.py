"""A protocol installed as a separate package reaches the gateway through its entry point alone.

The toy package (tests/plugins/toy_adapter) is installed with pip into a
temporary directory, outside this repository and its virtualenv; a real
`toolplex serve` with that directory on its path then serves the toy front and
the toy backend kind, with no change to `gateway/`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support import free_port, stop, wait_for_http

TOY_SOURCE = Path(__file__).parent / "toy_adapter"

CONFIG = """
fronts:
  toy:
    prefix: /toy
backends:
  - name: math
    kind: python
    module: adapters.python.toolkits.arithmetic:toolkit
  - name: greeter
    kind: toy
    greeting: howdy
"""


@pytest.fixture(scope="module")
def toy_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy package installed (pip, entry point metadata included) into a directory of its own."""
    source = tmp_path_factory.mktemp("toy-src")
    shutil.copytree(TOY_SOURCE, source, dirs_exist_ok=True)
    site = tmp_path_factory.mktemp("toy-site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--target",
            str(site),
            str(source),
        ],
        check=True,
        timeout=180,
    )
    assert (site / "toyproto").is_dir() and list(site.glob("toyproto-*.dist-info/entry_points.txt"))
    return site


def test_the_toy_protocol_is_not_there_without_its_package(tmp_path: Path) -> None:
    config = tmp_path / "toy.yaml"
    config.write_text(CONFIG)
    checked = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "check", str(config)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 1
    assert "fronts.toy: unknown key 'toy'" in checked.stderr


def test_a_tool_is_called_through_the_installed_toy_front_and_backend(toy_site: Path, tmp_path: Path) -> None:
    config = tmp_path / "toy.yaml"
    config.write_text(CONFIG)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(toy_site), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--port", str(port), "--no-reload"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for_http(f"{base}/readyz", process)
        with httpx.Client(base_url=base, timeout=10) as client:
            listed = client.get("/toy/tools").json()["tools"]
            assert "Math_Add" in listed and "Toy_Greet" in listed
            # The toy front calls an in-process Python tool ...
            assert client.post("/toy/call", json={"tool": "Math_Add", "args": {"a": 2, "b": 3}}).json() == {"ok": 5}
            # ... and the toy backend's tool, whose setting came from the YAML file.
            greeted = client.post("/toy/call", json={"tool": "Toy_Greet", "args": {"name": "Ada"}}).json()
            assert greeted == {"ok": "howdy, Ada"}
            # Every other front reaches the toy backend too: OpenTool's JSON-RPC /call.
            rpc = {"jsonrpc": "2.0", "id": "1", "method": "Toy_Greet", "params": {"name": "Bo"}}
            assert client.post("/opentool/call", json=rpc).json()["result"] == {"result": "howdy, Bo"}
            # The pipeline applies to a plug-in's calls as to any: invalid arguments are refused before the tool runs.
            refused = client.post("/toy/call", json={"tool": "Toy_Greet", "args": {}})
            assert refused.status_code == 422 and refused.json()["error"] == "invalid_arguments"
    finally:
        stop(process)
