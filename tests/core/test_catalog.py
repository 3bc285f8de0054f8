import pytest

from gateway.catalog import Catalog
from gateway.errors import ConfigError, ErrorKind, GatewayError
from gateway.model import ToolSpec

SCHEMA = {"type": "object", "properties": {}}


def spec(toolkit: str, name: str, version: str = "1.0.0", backend: str = "b") -> ToolSpec:
    return ToolSpec(toolkit=toolkit, name=name, version=version, description="d", input_schema=SCHEMA, backend=backend)


def test_names_are_derived() -> None:
    s = spec("Calculator", "Add", "1.2.3")
    assert (s.flat_name, s.qualified_name, s.versioned_id) == (
        "Calculator_Add",
        "Calculator.Add",
        "Calculator.Add@1.2.3",
    )


def test_resolution_latest_exact_and_major() -> None:
    catalog = Catalog([spec("C", "Add", "1.0.0"), spec("C", "Add", "1.10.0"), spec("C", "Add", "2.0.0")])
    assert catalog.resolve("C_Add").version == "2.0.0"  # semver order, not string order
    assert catalog.resolve("C.Add").version == "2.0.0"
    assert catalog.resolve("C_Add", "1.10.0").version == "1.10.0"
    assert catalog.resolve("C.Add", "1").version == "1.0.0"  # x means x.0.0 exactly
    assert catalog.versions_of("C.Add") == ["2.0.0", "1.10.0", "1.0.0"]


def test_unknown_version_says_what_exists() -> None:
    catalog = Catalog([spec("C", "Add", "1.0.0"), spec("C", "Add", "1.1.0")])
    with pytest.raises(GatewayError) as info:
        catalog.resolve("C.Add", "3")
    failure = info.value.failure
    assert failure.kind == ErrorKind.NOT_FOUND
    assert failure.message == "Tool 'C_Add' was not found"
    assert failure.details["available_versions"] == ["1.1.0", "1.0.0"]
    assert "3.0.0" in (failure.developer_message or "")
    with pytest.raises(GatewayError):
        Catalog([spec("C", "Add", "1.1.0")]).resolve("C.Add", "1")  # no 1.0.0


def test_unknown_tool() -> None:
    with pytest.raises(GatewayError) as info:
        Catalog([]).resolve("Nope_Tool")
    assert info.value.failure.kind == ErrorKind.NOT_FOUND


def test_flat_name_collision_names_both_sources() -> None:
    a = ToolSpec("My_Kit", "Add", "1.0.0", "d", SCHEMA, backend="one", source="backend 'one'")
    b = ToolSpec("My", "Kit_Add", "1.0.0", "d", SCHEMA, backend="two", source="backend 'two'")
    with pytest.raises(ConfigError) as info:
        Catalog([a, b])
    [problem] = info.value.problems
    assert "backend 'one'" in problem and "backend 'two'" in problem and "My_Kit_Add" in problem


def test_same_version_twice_is_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        Catalog([spec("C", "Add", backend="one"), spec("C", "Add", backend="two")])
    assert "one" in info.value.problems[0] and "two" in info.value.problems[0]


@pytest.mark.parametrize(
    ("toolkit", "name", "version"),
    [("Bad-Kit", "Add", "1.0.0"), ("Kit", "Add!", "1.0.0"), ("Kit", "Add", "1.0"), ("K" * 40, "N" * 30, "1.0.0")],
)
def test_invalid_names_are_configuration_errors(toolkit: str, name: str, version: str) -> None:
    with pytest.raises(ConfigError):
        Catalog([spec(toolkit, name, version)])


def test_hidden_tools_are_resolvable_but_not_listed() -> None:
    hidden = ToolSpec("C", "Secret", "1.0.0", "d", SCHEMA, visible=False)
    catalog = Catalog([hidden, spec("C", "Add")])
    assert [s.flat_name for s in catalog.latest()] == ["C_Add"]
    assert catalog.resolve("C_Secret") is hidden


def test_an_upstreams_tools_keep_its_order_in_the_places_they_hold() -> None:
    """A proxied server's tools are listed as the server listed them (`listed_at`), in the places its tools
    hold in name order; the gateway's own tools, and another server's, stay where they are."""

    def tool(name: str, backend: str, listed_at: int | None = None) -> ToolSpec:
        return ToolSpec(
            toolkit="K",
            name=name,
            version="1.0.0",
            description="",
            input_schema={},
            backend=backend,
            listed_at=listed_at,
        )

    catalog = Catalog(
        [tool("a", "up", 2), tool("b", "python"), tool("c", "up", 0), tool("d", "other", 0), tool("e", "up", 1)]
    )
    assert [s.name for s in catalog.listed(None)] == ["c", "b", "e", "d", "a"]
    assert [s.name for s in catalog.latest()] == ["c", "b", "e", "d", "a"]
    assert [s.name for s in Catalog([tool("b", "python"), tool("a", "python")]).listed(None)] == ["a", "b"]
