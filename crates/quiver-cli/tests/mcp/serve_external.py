"""The whole chain, for `tests/mcp_client.rs`: the Python `mcp` SDK as an MCP client of
`quiver serve --stdio`, whose config lists an external MCP server (`team-notes`, run in
Quiver's sandbox). The client finds the server's tool with `tool_search`, calls it through
`call_tool` with package consent asked by elicitation, and is refused a dangerous one; when the
server adds a tool and says its list changed, `tool_search` finds the new tool and it runs.

    python serve_external.py QUIVER_BINARY ROOT DB

`QUIVER_CONFIG` and `QUIVER_HOME` come from the environment. Prints one line per check and
exits non-zero on the first failure.
"""

import asyncio
import os
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters

import mcp_types as types
from checks import body, check

binary, root, db = sys.argv[1:4]
asked = []
answers = []


async def elicit(context, params):
    asked.append(params.message)
    action, choice = answers.pop(0)
    if action == "accept":
        return types.ElicitResult(action="accept", content={"decision": choice})
    return types.ElicitResult(action=action)


async def main():
    env = {k: os.environ[k] for k in ("QUIVER_CONFIG", "QUIVER_HOME", "PATH") if k in os.environ}
    server = StdioServerParameters(command=binary, args=["--root", root, "serve", "--stdio", "--db", db], env=env)
    async with Client(server, mode="legacy", elicitation_callback=elicit) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        check("the tool list stays fixed", "team-notes__read_note" not in names, names)

        found = body(await client.call_tool("tool_search", {"query": "read the team note stored under a key"}))
        hits = [r["name"] for r in found["results"]]
        check("tool_search finds the external server's tool", "team-notes__read_note" in hits, found)

        answers.append(("accept", "allow_conversation"))
        read = await client.call_tool("call_tool", {"name": "team-notes__read_note", "arguments": {"key": "k1"}})
        check("call_tool runs it through the sandboxed server", not read.is_error and body(read).get("text") == "note k1", body(read))
        check("consent for the whole package was asked once", len(asked) == 1 and "team-notes" in asked[0], asked)
        check("the server got the call context", body(read).get("session"), body(read))

        answers.append(("decline", None))
        removed = await client.call_tool("call_tool", {"name": "team-notes__remove_member", "arguments": {"user_id": "42"}})
        check("a dangerous tool of the server needs a person: declined, refused", removed.is_error and "refused" in body(removed)["error"], body(removed))
        check("only the approval was asked, not consent again", len(asked) == 2 and "remove_member" in asked[1], asked)

        learned = await client.call_tool("call_tool", {"name": "team-notes__learn_counting", "arguments": {}})
        check("the server learns a tool", not learned.is_error, body(learned))
        hits = []
        for _ in range(100):
            found = body(await client.call_tool("tool_search", {"query": "count the words of a text"}))
            hits = [r["name"] for r in found["results"]]
            if "team-notes__count_words" in hits:
                break
            await asyncio.sleep(0.1)
        check("after list_changed, tool_search finds the new tool", "team-notes__count_words" in hits, hits)
        counted = await client.call_tool("call_tool", {"name": "team-notes__count_words", "arguments": {"text": "one two three"}})
        check("the new tool runs", not counted.is_error and body(counted).get("words") == 3, body(counted))
        names = [t.name for t in (await client.list_tools()).tools]
        check("Quiver's own tool list is still fixed", "team-notes__count_words" not in names, names)


asyncio.run(main())
