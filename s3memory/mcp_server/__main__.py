"""``python -m s3memory.mcp_server``: the MCP server over stdio."""

from . import main

main()
