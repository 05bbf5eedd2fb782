"""An external MCP server for `tests/mcp_client.rs`, written with the Python `mcp` SDK
(`MCPServer`, FastMCP in mcp 2.x). Quiver lists it in a config file's `mcp_servers:` and is its
client.

    python external_server.py stdio
    python external_server.py http PORT TOKEN     # Streamable HTTP on 127.0.0.1:PORT/mcp,
                                                  # every request needs `Bearer TOKEN`

Tools: `read_note` (readOnlyHint, returns JSON with the call context Quiver sent in `_meta`),
`add_note` (no hints: an action), `read_path` (reads any path it is given: the sandbox must
stop it), `fetch_url` (connects anywhere: the sandbox must stop it), `remove_member`
(destructiveHint; its name is on Quiver's dangerous list), `whoami` (the environment it got),
`starts` (how many times it was started with this data folder: each start adds a line to
`$QUIVER_DATA_DIR/starts`), `learn_counting` (adds the tool `count_words` and tells the client
its tool list changed).
"""

import os
import sys
import urllib.request

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

STARTS = os.path.join(os.environ.get("QUIVER_DATA_DIR", "."), "starts")
if "QUIVER_DATA_DIR" in os.environ:
    with open(STARTS, "a", encoding="utf-8") as f:
        f.write("started\n")

server = MCPServer("notes-server", instructions="Team notes kept by an external MCP server. Read and add notes.")


def _context(ctx: Context) -> dict:
    meta = ctx.request_context.meta
    if meta is None:
        return {}
    if hasattr(meta, "model_dump"):
        meta = meta.model_dump(by_alias=True)
    return dict(meta).get("quiver.dev/context", {})


@server.tool(title="Read a note", annotations=ToolAnnotations(readOnlyHint=True))
def read_note(key: str, ctx: Context) -> dict:
    """Reads the team note stored under a key."""
    context = _context(ctx)
    return {"key": key, "text": f"note {key}", "session": context.get("session_id", "")}


@server.tool()
def add_note(key: str, text: str) -> dict:
    """Adds a team note under a key."""
    return {"added": key, "text": text}


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_path(path: str) -> dict:
    """Reads a file by path."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return {"read": f.read(100)}
    except Exception as e:  # the sandbox's refusal, reported as the tool's own failure
        raise ToolError(f"{type(e).__name__}: {e}") from e


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def fetch_url(url: str) -> dict:
    """Fetches a web page."""
    try:
        return {"body": urllib.request.urlopen(url, timeout=5).read(100).decode()}
    except Exception as e:
        raise ToolError(f"{type(e).__name__}: {e}") from e


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def remove_member(user_id: str) -> dict:
    """Removes a member from the team."""
    return {"removed": user_id}


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def whoami() -> dict:
    """Says which environment the server runs with."""
    return {"mode": os.environ.get("NOTES_MODE", ""), "home": os.environ.get("HOME", ""), "cwd": os.getcwd()}


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def starts() -> dict:
    """Counts the server's starts."""
    try:
        with open(STARTS, encoding="utf-8") as f:
            return {"starts": len(f.readlines())}
    except FileNotFoundError:
        return {"starts": 0}


def count_words(text: str) -> dict:
    """Counts the words of a text."""
    return {"words": len(text.split())}


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def learn_counting(ctx: Context) -> dict:
    """Teaches the server to count words."""
    server.add_tool(count_words, annotations=ToolAnnotations(readOnlyHint=True))
    await ctx.session.send_tool_list_changed()
    return {"learned": "count_words"}


def http(port: int, token: str) -> None:
    import uvicorn

    app = server.streamable_http_app()

    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != f"Bearer {token}":
                await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": b'{"error": "invalid_token"}'})
                return
        await app(scope, receive, send)

    print("listening", flush=True)
    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run()
    else:
        http(int(sys.argv[2]), sys.argv[3])
