"""Plain REST endpoints declared in YAML, one per tool."""
