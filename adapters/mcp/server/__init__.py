"""The MCP front: MCP clients of the gateway (see `adapters.mcp`)."""
