"""`toolplex serve | check | tools | pins | schema`."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
from typing import Any

from gateway.catalog import Catalog
from gateway.config import GatewayConfig, load_config
from gateway.errors import ConfigError


def _load(path: str) -> GatewayConfig:
    return load_config(path)


async def _catalog(config: GatewayConfig) -> tuple[Catalog, list[dict[str, Any]]]:
    """The catalog and each backend's state, after one strict discovery (then everything is closed)."""
    from gateway.middleware import build_middleware
    from gateway.runtime import close_backends, discover_all, report_backends

    build_middleware(config.settings.middleware)  # import errors are configuration errors too
    catalog, backends, states = await discover_all(config)
    try:
        return catalog, await report_backends(states, backends)
    finally:
        await close_backends(backends)


def _states_table(states: list[dict[str, Any]]) -> str:
    lines = ["BACKEND STATES"]
    for state in states:
        detail = f"  ({state['error']})" if state["error"] else ""
        lines.append(
            f"  {state['name']:<20} {state['kind']:<11} {state['state']:<5} {state['tools']:>3} tool(s){detail}"
        )
        warnings = state.get("warnings") or []
        if warnings:
            lines.append(f"    {len(warnings)} warning(s):")
            lines.extend(f"    - {warning}" for warning in warnings)
    return "\n".join(lines)


def _rows(catalog: Catalog) -> list[dict[str, Any]]:
    return [
        {
            "name": spec.flat_name,
            "id": spec.versioned_id,
            "backend": spec.backend,
            "language": spec.language,
            "visible": spec.visible,
            "description": spec.description,
        }
        for spec in catalog.all_versions()
    ]


def _table(rows: list[dict[str, Any]]) -> str:
    headers = ["name", "id", "backend", "visible"]
    cells = [[str(row[h]) for h in headers] for row in rows]
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(cell, widths, strict=True)) for cell in cells]
    return "\n".join(lines)


def cmd_check(args: argparse.Namespace) -> int:
    try:
        config = _load(args.path)
        catalog, states = asyncio.run(_catalog(config))
    except ConfigError as exc:
        print(f"{args.path}: {len(exc.problems)} problem(s)", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    print(_table(_rows(catalog)))
    print()
    print(_states_table(states))
    down = [s["name"] for s in states if s["state"] != "up"]
    note = f"; unreachable now: {', '.join(down)} (their tools appear when they come up)" if down else ""
    print(f"\n{args.path}: OK, {len(catalog)} tool version(s){note}")
    return 0


def cmd_tools(args: argparse.Namespace) -> int:
    try:
        catalog, states = asyncio.run(_catalog(_load(args.config)))
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 1
    rows = _rows(catalog)
    if args.json:
        print(json.dumps({"tools": rows, "backends": states}, indent=2))
    else:
        print(_table(rows))
        print()
        print(_states_table(states))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from gateway.app import create_app
    from gateway.observability import configure_logging
    from gateway.serving import GatewayServer, event_loop_factory, uvicorn_config

    configure_logging("info")  # JSON from the first line on (loading the configuration logs), its level later
    try:
        config = _load(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 1
    server = config.settings.server
    host = args.host or server.host
    port = args.port if args.port is not None else server.port
    configure_logging(config.settings.logging.level)
    if server.workers > 1 and args.listen_fd is None:  # the supervisor: it binds the port and starts the workers
        from gateway.workers import serve_workers

        return serve_workers(
            args.config, host, port, server.workers, float(server.shutdown_grace_s), watch=not args.no_reload
        )
    try:
        # ConfigError: e.g. auth.jwt names an unset environment variable
        app = create_app(config, start_with_server=False, bind_host=host)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 1
    http = GatewayServer(
        uvicorn_config(app, server, host, port),
        app.gateway,
        float(server.shutdown_grace_s),
        drain=float(server.drain_s),
    )
    if args.listen_fd is not None:  # a worker: the supervisor's shared port, and a private one to be forwarded to
        from gateway.workers import bind

        private = bind(host, 0)
        private.set_inheritable(False)
        http.listen_on([socket.socket(fileno=args.listen_fd), private], advertise_port=private.getsockname()[1])
    with asyncio.Runner(loop_factory=event_loop_factory(server.loop)) as runner:
        return runner.run(_serve(app.gateway, http, args.config, watch=not args.no_reload))


async def _serve(gateway: Any, server: Any, path: str, *, watch: bool) -> int:
    """Start the gateway before the server listens, so configuration errors are said cleanly, once.

    The signal handlers cover the whole life, closing included: a SIGTERM at any
    point ends in `gateway.close()`, which stops every sidecar and worker. SIGHUP,
    and with `watch` a change of the file, reload the configuration.
    """
    from gateway.heap import settle_heap
    from gateway.reload import ConfigReloader

    reloader = ConfigReloader(gateway, path)
    server.on_hangup = lambda: reloader.request("SIGHUP")
    with server.signals():
        try:
            await gateway.start()
        except ConfigError as exc:
            for problem in exc.problems:
                print(problem, file=sys.stderr)
            return 1
        settle_heap(start=True)
        reloader.start(watch=watch)
        try:
            await server.serve()
        finally:
            await reloader.stop()
            await gateway.close()
    return 0 if server.started else 1


async def _pins(args: argparse.Namespace) -> int:
    """`toolplex pins ...` against the configured state store (Redis: what every replica shares).

    With the in-memory store no running gateway's pins can be reached: the command discovers the backends itself
    and compares them with the pin file, so `approve --write-file` (then a reload of the gateway) is the way."""
    from gateway.pinning import PinAdmin, PinBook, PinError, Pinning, PinPolicy
    from gateway.runtime import build_store, close_backends, discover_all, wait_for_store

    config = _load(args.config)
    policy = PinPolicy.from_config(config)
    state = config.settings.state
    store = build_store(state)
    book = PinBook(store)
    try:
        if state.store == "redis":
            await wait_for_store(store, state)
        else:
            if args.action in ("approve", "reject") and not getattr(args, "write_file", False):
                print(
                    "with state.store: memory the gateway's pins live in its own process: approve into the pin file "
                    "(--write-file, then reload the gateway), or share the pins in Redis (state.store: redis)",
                    file=sys.stderr,
                )
                return 1
            _catalog, backends, _states = await discover_all(config, Pinning(book, policy))
            await close_backends(backends)
        admin = PinAdmin(book, policy)
        try:
            return await _pins_action(admin, args)
        except PinError as exc:
            print(str(exc), file=sys.stderr)
            return 1
    finally:
        await store.close()


async def _pins_action(admin: Any, args: argparse.Namespace) -> int:
    if args.action == "list":
        views = await admin.list(status="changed" if args.changed else None)
        if args.json:
            print(json.dumps([v.to_dict() for v in views], indent=2))
            return 0
        rows = [
            {
                "pin": v.pin,
                "mode": v.mode,
                "status": v.status + (" (in file)" if v.in_file else ""),
                "approved": (v.approved or {}).get("hash", "")[:19],
                "pending": (v.pending or {}).get("hash", "")[:19],
            }
            for v in views
        ]
        headers = ["pin", "mode", "status", "approved", "pending"]
        widths = [max([len(h), *(len(str(r[h])) for r in rows)]) for h in headers]
        print("  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)))
        for row in rows:
            print("  ".join(str(row[h]).ljust(w) for h, w in zip(headers, widths, strict=True)))
        return 0
    if args.action == "diff":
        found = await admin.diff(args.pin)
        if args.json:
            print(json.dumps(found, indent=2))
        else:
            print(f"{found['pin']}: {', '.join(found['changed'])} changed")
            print(f"approved {found['approved_hash']}\npending  {found['pending_hash']}")
            sys.stdout.write(found["diff"])
        return 0
    names = list(args.pins)
    if args.all:
        views = await admin.list(status="changed" if args.action == "reject" else None)
        names += [v.pin for v in views if v.status != "rejected"]  # a rejected added tool has nothing to approve
    if not names:
        print("name at least one pin (see toolplex pins list), or --all", file=sys.stderr)
        return 1
    for name in dict.fromkeys(names):
        if args.action == "approve":
            view = await admin.approve(name, by=args.by, write_file=args.write_file)
        else:
            view = await admin.reject(name, by=args.by)
        done = "approved" if args.action == "approve" else "rejected"
        print(f"{view.pin}: {done}, approved {(view.approved or {}).get('hash')}")
    return 0


def cmd_pins(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_pins(args))
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 1


def cmd_schema(args: argparse.Namespace) -> int:
    """The configuration's JSON Schema (config/schema.json), or its reference (docs/configuration-reference.md)."""
    if args.markdown:
        from gateway.config.reference import reference_markdown

        sys.stdout.write(reference_markdown())
    else:
        from gateway.config.schema import schema_text

        sys.stdout.write(schema_text())
    return 0


def _port(text: str) -> int:
    """A port from --port or TOOLPLEX_PORT; a bad one is named as such rather than as "invalid int value"."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535; from --port or TOOLPLEX_PORT)")
    return port


class _Version(argparse.Action):
    """`--version`: `toolplex <version>`; the version is looked up only when asked (the runtime is slow to import)."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any, **_kwargs: Any) -> None:
        from gateway.runtime import GATEWAY_VERSION

        print(f"{parser.prog} {GATEWAY_VERSION}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toolplex", description="Toolplex: one gateway, many tool protocols")
    parser.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the gateway")
    # A flag wins over its environment variable, which wins over the file (what a container sets).
    env_config = os.environ.get("TOOLPLEX_CONFIG") or None
    serve.add_argument(
        "--config",
        default=env_config,
        required=env_config is None,
        help="path to the YAML configuration (default: $TOOLPLEX_CONFIG)",
    )
    serve.add_argument(
        "--host",
        default=os.environ.get("TOOLPLEX_HOST") or None,
        help="address to bind (default: $TOOLPLEX_HOST, else server.host, 127.0.0.1)",
    )
    serve.add_argument(
        "--port",
        type=_port,
        default=os.environ.get("TOOLPLEX_PORT") or None,  # a string default goes through _port too
        help="port to bind (default: $TOOLPLEX_PORT, else server.port, 8080)",
    )
    serve.add_argument(
        "--no-reload",
        action="store_true",
        help="do not watch the configuration file for changes (SIGHUP still reloads it)",
    )
    # Set by the supervisor of `server.workers` > 1 for each worker it starts; not for people.
    serve.add_argument("--listen-fd", type=int, default=None, help=argparse.SUPPRESS)
    serve.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    serve.set_defaults(func=cmd_serve)
    check = sub.add_parser("check", help="validate a configuration and print its catalog")
    check.add_argument("path")
    check.set_defaults(func=cmd_check)
    tools = sub.add_parser("tools", help="list the catalog of a configuration")
    tools.add_argument("--config", required=True)
    tools.add_argument("--json", action="store_true", help="print JSON instead of a table")
    tools.set_defaults(func=cmd_tools)
    pins = sub.add_parser("pins", help="list, diff, approve or reject tool-definition pins (docs/pinning.md)")
    pin_actions = pins.add_subparsers(dest="action", required=True)
    listing = pin_actions.add_parser("list", help="every pin, with its approved and pending hashes")
    listing.add_argument("--changed", action="store_true", help="only the pins whose change awaits a decision")
    diff = pin_actions.add_parser("diff", help="a pin's pending change against its approved definition")
    diff.add_argument("pin", help="a pin id (<backend>/<tool>) or a tool name")
    approve = pin_actions.add_parser("approve", help="make pending definitions the approved ones")
    reject = pin_actions.add_parser("reject", help="keep the approved definitions, reject the pending ones")
    for decide in (approve, reject):
        decide.add_argument("pins", nargs="*", help="pin ids (<backend>/<tool>) or tool names")
        decide.add_argument("--all", action="store_true", help="every pin awaiting a decision (approve: every pin)")
        decide.add_argument("--by", default=os.environ.get("USER"), help="who decides (recorded; default $USER)")
    approve.add_argument(
        "--write-file", action="store_true", help="also write the approved definitions into pinning.file"
    )
    for action in (listing, diff, approve, reject):
        action.add_argument("--config", default=env_config, required=env_config is None, help="the configuration")
        action.add_argument("--json", action="store_true", help="print JSON")
        action.set_defaults(func=cmd_pins)
    schema = sub.add_parser("schema", help="print the configuration's JSON Schema, generated from the settings models")
    schema.add_argument("--markdown", action="store_true", help="print the configuration reference instead")
    schema.set_defaults(func=cmd_schema)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command != "serve":
        # stdout is for the catalog; whatever backends log while starting goes to stderr.
        from gateway.observability import configure_logging

        configure_logging("warning")
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
