"""A real Arcade worker (PyPI `arcade-serve`) serving the `arcade-math` toolkit, for upstream tests.

Runs under its own virtual environment (.venv-arcade, made by tests/upstreams/install_arcade.sh)
because Arcade's dependencies are not the gateway's.

    .venv-arcade/bin/python tests/upstreams/arcade_worker.py --port P --secret S
"""

from __future__ import annotations

import argparse

import arcade_math
import uvicorn
from arcade_core.toolkit import Toolkit
from arcade_serve.fastapi.worker import FastAPIWorker
from fastapi import FastAPI


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--secret", required=True)
    args = parser.parse_args()
    app = FastAPI()
    worker = FastAPIWorker(app, secret=args.secret)
    worker.register_toolkit(Toolkit.from_module(arcade_math))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
