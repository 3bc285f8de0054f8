"""XAgent ToolServerNode protocol: cookie sessions, tool listing and retrieval, 450 "call again"."""
