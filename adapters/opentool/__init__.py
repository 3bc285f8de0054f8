"""OpenTool (seeds 000 and 001): description documents, the JSON-RPC `/call` front."""
