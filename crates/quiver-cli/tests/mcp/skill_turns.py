"""A skill's `disallowed-tools` over MCP, with the pinned Python `mcp` SDK: a turn of an MCP
conversation is the requests that carry the same `_meta["io.quiver/turn"]`; without one the
lists hold for the rest of the conversation (see docs/mcp.md, "Turns").

    python skill_turns.py URL MODE

The server serves the example packages and a `careful` package whose skill disallows
`calc.evaluate`; QUIVER_TEST_TOKEN holds the bearer token.
"""

import asyncio
import os
import sys

import httpx2

import mcp_types as types
from checks import body, check
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

url, mode = sys.argv[1:3]
TURN = "io.quiver/turn"


def server():
    headers = {"Authorization": f"Bearer {os.environ['QUIVER_TEST_TOKEN']}"}
    return streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30))


async def allow(context, params):
    return types.ElicitResult(action="accept", content={"decision": "allow_conversation"})


def conversation(result):
    return (result.meta or {}).get("io.quiver/conversation")


async def calc(client, handle, turn=None):
    args = {"name": "calc__evaluate", "arguments": {"expression": "1+2"}, "conversation": handle}
    return await client.call_tool("call_tool", args, meta={TURN: turn} if turn else None)


def removed(result):
    """Removed by the skill's list, or locked out after that refusal in the same turn."""
    error = body(result).get("error", "") if result.is_error else ""
    return "careful" in error or "already refused in this turn" in error


def by_the_list(result):
    """Removed by the skill's list itself (no lockout carried)."""
    return result.is_error and "careful" in body(result).get("error", "")


async def main():
    async with Client(server(), mode=mode, elicitation_callback=allow) as client:
        # Without a turn id: the lists hold for the rest of the conversation.
        first = await client.call_tool("tool_search", {"query": "calculate 1+2"})
        handle = conversation(first)
        ran = await calc(client, handle)
        check("before the skill, calc runs", not ran.is_error, body(ran))
        opened = await client.call_tool("read_skill", {"id": "careful", "conversation": handle})
        check("the skill activates", body(opened).get("status") == "activated", body(opened))
        for attempt in range(2):
            refused = await calc(client, handle)
            check(f"no turn id: disallowed by the list on request {attempt + 1} after the skill", by_the_list(refused), body(refused))

    # With turn ids (a new conversation: one per 2025-11-25 session, and in the 2026-07-28 era
    # another program's default conversation, since the first program's is still in use): the
    # lists last for the requests of the turn that read the skill.
    other = types.Implementation(name="skill-turns-second", version="1")
    async with Client(server(), mode=mode, elicitation_callback=allow, client_info=other) as client:
        first = await client.call_tool("tool_search", {"query": "calculate 1+2"})
        handle = conversation(first)
        opened = await client.call_tool("read_skill", {"id": "careful", "conversation": handle}, meta={TURN: "t1"})
        check("the skill activates in turn t1", body(opened).get("status") == "activated", body(opened))
        refused = await calc(client, handle, "t1")
        check("turn t1: disallowed", removed(refused), body(refused))
        again = await calc(client, handle)
        check("no turn id continues t1: disallowed", removed(again), body(again))
        later = await calc(client, handle, "t2")
        check("turn t2: the skill's list no longer applies", not later.is_error, body(later))
    print("all ok", flush=True)


asyncio.run(main())
