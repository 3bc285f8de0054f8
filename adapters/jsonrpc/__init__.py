"""JSON-RPC 2.0 (seed 002): the cross-language `tool.execute` front and its wire codec."""
