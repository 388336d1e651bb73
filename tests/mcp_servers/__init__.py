"""MCP servers the tests start as subprocesses (stdio or streamable HTTP on loopback)."""
