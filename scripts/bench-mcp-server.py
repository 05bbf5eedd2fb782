"""The Python side of `quiver bench mcp`: an MCP server with the same no-op tool, built with the
`mcp` SDK's high-level server (FastMCP, `mcp.server.mcpserver.MCPServer` in mcp 2.x), served
over Streamable HTTP on 127.0.0.1.

    python scripts/bench-mcp-server.py PORT
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool()
def noop(n: int = 0) -> dict:
    """Does nothing."""
    return {"ok": True}


if __name__ == "__main__":
    port = int(sys.argv[1])
    server.run(transport="streamable-http", host="127.0.0.1", port=port)
