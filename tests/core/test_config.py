import json
from pathlib import Path

import pytest

from gateway.cli import main
from gateway.config import load_config, parse_config
from gateway.config.reference import reference_markdown
from gateway.config.schema import json_schema
from gateway.errors import ConfigError
from tests.support import ROOT

REGENERATE = "generated from the settings models: run `make schema` and commit the result"


def problems_of(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "g.yaml", env=env or {})
    return info.value.problems


def test_defaults_are_filled_in() -> None:
    config = parse_config("", "g.yaml", env={})
    server = config.data["server"]
    assert (server["host"], server["port"], server["shutdown_grace_s"]) == ("127.0.0.1", 8080, 30)
    assert config.data["limits"]["max_body_bytes"] == 1048576
    assert config.data["limits"]["default_timeout_s"] == 30
    assert config.data["fronts"]["opentool"]["prefix"] == "/opentool"
    assert config.data["backends"] == []


def test_env_expansion_with_and_without_default() -> None:
    text = "server:\n  host: ${HOST}\n  port: ${PORT:-9000}\nsecrets:\n  price: '$$5'\n"
    config = parse_config(text, "g.yaml", env={"HOST": "0.0.0.0"})
    server = config.data["server"]
    assert (server["host"], server["port"]) == ("0.0.0.0", 9000)  # a whole-value ${} keeps its YAML type
    assert config.data["secrets"]["price"] == "$5"


def test_missing_env_var_names_it_and_its_place() -> None:
    [problem] = problems_of("auth:\n  api_keys:\n    - key: ${API_KEY}\n      name: ci\n")
    assert problem.startswith("g.yaml:3:")
    assert "API_KEY is not set" in problem and "auth.api_keys[0].key" in problem


def test_unknown_keys_are_errors_with_locations() -> None:
    text = "server:\n  hots: x\nbackends:\n  - name: m\n    kind: python\n    module: a.b:c\n    colour: red\n"
    problems = problems_of(text)
    assert "g.yaml:2:3: server.hots: unknown key 'hots'" in problems
    assert "g.yaml:7:5: backends[0].colour: unknown key 'colour'" in problems


def test_every_problem_is_reported_at_once() -> None:
    text = "server:\n  port: 99999\nlimits:\n  max_body_bytes: 0\nbackends:\n  - name: x\n    kind: carrier-pigeon\n"
    problems = problems_of(text)
    assert len(problems) >= 3
    assert any("server.port" in p for p in problems)
    assert any("limits.max_body_bytes" in p for p in problems)
    assert any("backends[0].kind" in p for p in problems)


def test_invalid_yaml_points_at_the_line() -> None:
    [problem] = problems_of("server:\n  host: [unclosed\n")
    assert problem.startswith("g.yaml:") and "invalid YAML" in problem


def test_duplicate_backend_names() -> None:
    text = "backends:\n  - {name: m, kind: python, module: a}\n  - {name: m, kind: python, module: b}\n"
    assert any("used twice" in p for p in problems_of(text))


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "absent.yaml")
    assert "cannot read" in info.value.problems[0]


def test_the_published_schema_is_the_generated_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    printed = capsys.readouterr().out
    assert json.loads(printed) == json_schema()
    assert (ROOT / "config" / "schema.json").read_text() == printed, f"config/schema.json is {REGENERATE}"
    assert not (ROOT / "gateway" / "config" / "schema.json").exists(), "one copy of the schema only"


def test_the_configuration_reference_is_the_generated_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--markdown"]) == 0
    printed = capsys.readouterr().out
    assert printed == reference_markdown()
    committed = (ROOT / "docs" / "configuration-reference.md").read_text()
    assert committed == printed, f"docs/configuration-reference.md is {REGENERATE}"


def test_default_config_is_valid() -> None:
    config = load_config(ROOT / "config" / "gateway.yaml", env={})
    assert {b["name"] for b in config.data["backends"]} >= {"math", "text", "time", "demo"}
