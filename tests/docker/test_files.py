"""The deployment files, read as Docker, compose and nginx read them; run everywhere, no engine needed.

The compose stack (issue 14): `gateway` replicas with no host port behind `nginx`, the only way in,
sharing state in a bounded `redis`, fronting the example upstream `tools`.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from gateway.config import load_config
from tests.docker.stack import (
    DOCKER,
    DOCKERFILE,
    DOCKERIGNORE,
    GATEWAY_CONFIG,
    NGINX_CONF,
    bind_mounts,
    compose,
    copy_sources,
    dockerignore_excludes,
    dockerignore_patterns,
    nginx_directives,
    service_env,
    with_defaults,
)
from tests.support import ROOT

README = ROOT / "README.md"


def test_compose_names_the_services() -> None:
    services = compose()["services"]
    for name in ("gateway", "redis", "nginx", "tools"):
        assert name in services, f"docker/compose.yaml has no service {name!r}"
    assert compose().get("name"), "without `name`, the project would be called after its folder, `docker`"


def test_gateway_scales() -> None:
    """`--scale gateway=2` needs no fixed host port and no fixed container name; nginx is the only door."""
    services = compose()["services"]
    gateway = services["gateway"]
    assert "ports" not in gateway, "a fixed host port stops a second replica from starting"
    assert "container_name" not in gateway
    published = {name for name, service in services.items() if service.get("ports")}
    assert published == {"nginx"}, f"only nginx publishes a port, not {sorted(published - {'nginx'})}"
    (port,) = services["nginx"]["ports"]
    assert str(port).startswith("${TOOLPLEX_PORT:-8080}:"), port
    assert with_defaults(str(port), {"TOOLPLEX_PORT": "9999"}).startswith("9999:")
    assert f"listen {str(port).rsplit(':', 1)[1]}" in nginx_directives(NGINX_CONF.read_text())


def test_gateway_builds_from_the_dockerfile() -> None:
    for name in ("gateway", "tools"):
        build = compose()["services"][name]["build"]
        context = (DOCKER / build["context"]).resolve()
        assert context == ROOT, f"{name}: the build context is the repository root (where .dockerignore is)"
        assert (context / build["dockerfile"]).resolve() == DOCKERFILE


def test_every_mounted_file_exists() -> None:
    mounts = [(name, source) for name, s in compose()["services"].items() for source, _ in bind_mounts(s)]
    assert ("gateway", "./gateway.yaml") in mounts and ("nginx", "./nginx.conf") in mounts, mounts
    for name, source in mounts:
        assert (DOCKER / source).is_file(), f"{name} mounts {source}, which does not exist (relative to docker/)"


def test_gateway_serves_the_mounted_config() -> None:
    gateway = compose()["services"]["gateway"]
    config = service_env(gateway)["TOOLPLEX_CONFIG"]
    assert config in [target for _, target in bind_mounts(gateway)], "TOOLPLEX_CONFIG names the mounted file"


def test_redis_is_bounded_and_evicts_only_keys_with_a_ttl() -> None:
    redis = compose()["services"]["redis"]
    assert str(redis["image"]).startswith("redis:")
    command = [with_defaults(str(word)) for word in redis["command"]]
    assert command[0] == "redis-server"
    maxmemory = command[command.index("--maxmemory") + 1]
    assert re.fullmatch(r"\d+(mb|gb)", maxmemory), maxmemory
    policy = command[command.index("--maxmemory-policy") + 1]
    assert policy.startswith("volatile-"), "every Toolplex key has a TTL: evict among those, never refuse writes"
    assert policy != "volatile-ttl", "volatile-ttl would evict the replicas' short leases first"


def test_nginx_spreads_requests_over_every_replica() -> None:
    """An upstream group re-resolved through Docker's DNS (127.0.0.11): every replica is in it, as it scales."""
    directives = nginx_directives(NGINX_CONF.read_text())
    (resolver,) = [d for d in directives if d.startswith("resolver ")]
    assert resolver.split()[1] == "127.0.0.11", "Docker's embedded DNS answers service names with every replica"
    assert "valid=" in resolver, "re-asked often, so a scale-up is seen without a reload"
    (proxy_pass,) = {d for d in directives if d.startswith("proxy_pass ")}  # `location /` and its retries
    group = proxy_pass.split("http://", 1)[1]
    servers = [d for d in directives if d.startswith("server gateway:")]
    # A replica that refused a connection is skipped 1 s, not 10: restarted, it is back at once, and one
    # restarted and another killed never leave nginx without a live replica for long.
    assert servers == ["server gateway:8080 resolve max_fails=1 fail_timeout=1s"], servers
    valid = int(resolver.split("valid=")[1].split()[0].rstrip("s"))
    assert valid <= 2, "a replica gone from Docker's DNS leaves nginx's group within 2 s"
    assert f"upstream {group}" in directives and any(d.startswith(f"zone {group}") for d in directives)
    port = load_config(GATEWAY_CONFIG, env={}).settings.server.port
    assert servers[0].split()[1] == f"gateway:{port}", "nginx reaches the gateway on the port it listens on"
    assert compose()["services"]["nginx"]["image"].startswith("nginx:1.28"), "resolve needs nginx 1.27.3+"


def test_compose_config_validates_and_uses_redis() -> None:
    """docker/gateway.yaml as `toolplex check` loads it (the stack's hosts need not resolve here)."""
    config = load_config(GATEWAY_CONFIG, env={}).settings
    assert config.server.host == "0.0.0.0"
    assert (config.state.store, config.state.url, config.state.lease_s) == ("redis", "redis://redis:6379/0", 15)
    assert "redis" in compose()["services"]
    upstreams = [b for b in config.backends if getattr(b, "url", None)]
    hosts = {re.match(r"https?://([^:/]+)", str(b.url)).group(1) for b in upstreams}  # type: ignore[union-attr]
    assert hosts == {"tools"}, f"the upstream is the compose service `tools`: {hosts}"


def test_example_upstream_config_loads() -> None:
    tools = compose()["services"]["tools"]
    path = ROOT / service_env(tools)["TOOLPLEX_CONFIG"]  # relative to /app, the image's working directory
    assert path.is_file(), path
    assert load_config(path, env={}).settings.backends


def test_dockerfile_is_slim_non_root_with_node_20_and_a_healthcheck() -> None:
    text = DOCKERFILE.read_text()
    node = re.search(r"node:(\d+)-", text)
    assert node and int(node.group(1)) >= 20, "the TypeScript sidecar needs Node.js 20+"
    engines = (ROOT / "adapters/typescript/package.json").read_text()
    assert re.search(r'"node":\s*">=\s*(\d+)', engines).group(1) <= node.group(1)  # type: ignore[union-attr]
    assert "-slim" in text
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1] not in ("root", "0"), "the image runs as an unprivileged user"
    assert re.search(r"^HEALTHCHECK .*/healthz", text, re.M | re.S)
    interval = re.search(r"^HEALTHCHECK .*--interval=(\d+)s", text, re.M)
    assert interval and int(interval.group(1)) <= 2, "a healthy gateway is seen within 2 s (no start_interval < 25)"
    assert "TOOLPLEX_PORT=8080" in text and "TOOLPLEX_CONFIG=config/gateway.yaml" in text
    assert re.search(r'^ENTRYPOINT \["toolplex", "serve"\]', text, re.M)
    # No `# syntax=` directive: BuildKit would pull docker/dockerfile from a registry the build needs nothing of.
    assert not re.search(r"^#\s*syntax\s*=", text, re.M | re.I)


def test_dockerignore_keeps_the_context_small() -> None:
    patterns = dockerignore_patterns()
    for path in copy_sources():
        assert (ROOT / path).exists(), f"the Dockerfile copies {path}, which does not exist"
        assert not dockerignore_excludes(path, patterns), f".dockerignore leaves out {path}, which the image copies"
    for path in (
        ".git/HEAD",
        ".venv/bin/python",
        ".venv-arcade/bin/python",
        "adapters/typescript/node_modules/zod/package.json",
        "gateway/__pycache__/cli.cpython-311.pyc",
        "bench/results/latest.json",
        ".pytest_cache/v/cache/nodeids",
        ".hypothesis/examples/x",
        "tests/support.py",
        "toolplex.egg-info/PKG-INFO",
    ):
        assert dockerignore_excludes(path, patterns), f".dockerignore sends {path} to the build"


def test_dockerignore_matcher_follows_dockers_rules() -> None:
    """The matcher above can say no: last match wins, `!` re-includes, `*` stays in one segment."""
    patterns = ["*", "!src", "src/**/*.tmp", "!src/keep.tmp", "docs/*.md"]
    assert dockerignore_excludes("README.md", patterns)
    assert not dockerignore_excludes("src/a/b.py", patterns)
    assert dockerignore_excludes("src/a/b.tmp", patterns) and dockerignore_excludes("src/b.tmp", patterns)
    assert not dockerignore_excludes("src/keep.tmp", patterns)
    assert not dockerignore_excludes("docs/a/b.md", ["docs/*.md"])
    assert DOCKERIGNORE.is_file()


def deploy_section() -> str:
    text = README.read_text()
    found = re.search(r"^## Deploy with docker compose\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert found, "README.md has no section 'Deploy with docker compose'"
    return found.group(1)


def test_readme_deploy_section_names_files_that_exist() -> None:
    section = deploy_section()
    named = set(re.findall(r"(?<![\w/.])((?:docker|config)/[\w./-]*\w|\.dockerignore)", section))
    assert "docker/compose.yaml" in named and "docker/gateway.yaml" in named, named
    for path in named:
        assert (ROOT / path).exists(), f"README.md's deploy section names {path}, which does not exist"
    for command in ("up -d --build --scale gateway=2", "logs", "down"):
        assert f"docker compose -f docker/compose.yaml {command}" in section, f"README does not show `{command}`"


def test_make_compose_check() -> None:
    """`make compose-check` validates the compose file where docker compose exists, and says so where not."""
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^\.PHONY:.*\bcompose-check\b", makefile, re.M)
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    result = subprocess.run(
        ["make", "--no-print-directory", "compose-check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "docker/compose.yaml" in result.stdout


def test_a_stopping_replica_drains_and_nginx_moves_on_within_a_second() -> None:
    """`docker stop` gives the gateway its drain and its grace; a replica gone from DNS costs nginx ≤ 1 s."""
    server = load_config(GATEWAY_CONFIG, env={}).settings.server
    assert server.drain_s > 0, "docker/gateway.yaml drains before it stops accepting"
    period = compose()["services"]["gateway"]["stop_grace_period"]
    seconds = int(re.fullmatch(r"(\d+)s", period).group(1))  # type: ignore[union-attr]
    assert seconds > server.drain_s + server.shutdown_grace_s, "Docker kills only after drain + grace"
    directives = nginx_directives(NGINX_CONF.read_text())
    (connect,) = [d for d in directives if d.startswith("proxy_connect_timeout ")]
    assert connect.split()[1] == "1s"
    assert "proxy_next_upstream error timeout" in directives  # never non_idempotent: no call is sent twice


def test_a_request_no_replica_received_is_sent_again_when_the_replica_list_changed() -> None:
    """nginx tries no other replica once its list changed during the request (a re-resolution while a connection
    to a stopped replica's address timed out: `make compose-test` saw it at every scale-down). nginx's own 502/504
    go to a named location that sends the request again only when no connection to a replica was ever made."""
    text = NGINX_CONF.read_text()
    directives = nginx_directives(text)
    assert "error_page 502 = @again" in directives and "error_page 504 = @again_504" in directives
    assert "proxy_request_buffering on" in directives, "the body is read whole, so it can be sent again"
    assert "proxy_intercept_errors on" not in directives, "the gateway's own 502/504 are never sent again"
    at = directives.index("map $upstream_connect_time $toolplex_never_connected")
    assert directives[at + 1 : at + 3] == ['"~[0-9]" 0', "default 1"], directives[at : at + 3]
    for name, status in (("@again", 502), ("@again_504", 504)):
        block = text.split(f"location {name} {{", 1)[1].split("\n        }", 1)[0]
        inner = nginx_directives(block)
        assert inner[:2] == ["if ($toolplex_never_connected = 0)", f"return {status}"], inner
        assert inner[2] == "proxy_pass http://toolplex_gateway", inner


def test_health_checks_see_a_healthy_service_within_two_seconds() -> None:
    """`up` waits for redis, then tools, then the gateways, then nginx, each for its health check: with
    10 s intervals the waits add up (23 s to a healthy stack); every check here runs at least every 2 s."""
    for name, service in compose()["services"].items():
        check = service.get("healthcheck")
        if check is None:
            continue
        seconds = float(str(check["interval"]).removesuffix("s"))
        assert seconds <= 2, f"{name}: healthcheck interval {check['interval']}"
