"""The MCP backend: an MCP server upstream (see `adapters.mcp`)."""
