"""MCP tests: a reference server built on the `mcp` SDK and the official conformance suite's harness."""
