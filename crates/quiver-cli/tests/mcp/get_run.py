"""`get_run` through the pinned Python MCP SDK against `quiver serve --http`: calling an
exposed workflow that waits on a timer returns `{run_id, status}`; `get_run` reads the waiting
run, another user does not see it, and once the server's scheduler woke the timer it reads the
run's output; a call whose step outlasts the server's `workflow_call_wait` returns the running
run, whose end `get_run` reads later.

    python get_run.py URL MODE OWNER_TOKEN OTHER_TOKEN

MODE is `legacy` (2025-11-25) or `2026-07-28`. Prints one line per check, `all ok` at the end.
"""

import asyncio
import sys
import time

import httpx2

import mcp_types as types
from checks import body, check
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

url, mode, token, other_token = sys.argv[1:5]


def server(bearer):
    headers = {"Authorization": f"Bearer {bearer}"}
    return streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30))


async def allow(context, params):
    return types.ElicitResult(action="accept", content={"decision": "allow_conversation"})


async def main():
    async with Client(server(token), mode=mode, elicitation_callback=allow) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        check("get_run is offered", "get_run" in names, names)
        started = body(await client.call_tool("call_tool", {"name": "clock__nap", "arguments": {"text": "hi"}}))
        check("the call returns the waiting run", started.get("status") == "waiting" and "run_id" in started, started)
        run_id = started["run_id"]
        read = body(await client.call_tool("get_run", {"run_id": run_id}))
        check("get_run: waiting on a timer", read["status"] == "waiting" and read["waiting_for"][0]["kind"] == "timer", read)

        async with Client(server(other_token), mode=mode) as other:
            refused = await other.call_tool("get_run", {"run_id": run_id})
            check("another user does not see the run", refused.is_error and "no run" in body(refused)["error"], body(refused))

        deadline = time.monotonic() + 10
        while read["status"] != "completed" and time.monotonic() < deadline:
            await asyncio.sleep(0.3)
            read = body(await client.call_tool("get_run", {"run_id": run_id}))
        check("get_run: completed with the output", read["status"] == "completed" and read.get("output") == {"said": "hi"}, read)

        # A step longer than the server's `workflow_call_wait` (0.5 s): the call returns while
        # the run goes on, and get_run reads its end.
        began = time.monotonic()
        lagging = body(await client.call_tool("call_tool", {"name": "clock__lag", "arguments": {"text": "late"}}))
        took = time.monotonic() - began
        check("a long step: the call returns the running run", lagging.get("status") == "running" and took < 2.5, (lagging, took))
        run_id = lagging["run_id"]
        deadline = time.monotonic() + 15
        read = body(await client.call_tool("get_run", {"run_id": run_id}))
        while read["status"] != "completed" and time.monotonic() < deadline:
            await asyncio.sleep(0.3)
            read = body(await client.call_tool("get_run", {"run_id": run_id}))
        check("get_run: the long run completed", read["status"] == "completed" and read.get("output") == {"said": "late"}, read)
    print("all ok", flush=True)


asyncio.run(main())
