"""A real MCP client (the Python `mcp` SDK, pinned in scripts/requirements-test.txt) against
`quiver serve`, over stdio or Streamable HTTP, in either protocol era.

    python python_client.py stdio|http MODE QUIVER_BINARY ROOT DB [URL]

MODE is `legacy` (2025-11-25: initialize, sessions, elicitation requests mid-call) or
`2026-07-28` (stateless: server/discover, input_required results with a requestState).
Each scenario asserts; the script prints one line per scenario and exits non-zero on the
first failure.
"""

import asyncio
import os
import sys

import httpx2

import mcp_types as types
from checks import body, check
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

transport, mode, binary, root, db = sys.argv[1:6]
url = sys.argv[6] if len(sys.argv) > 6 else None


def server():
    if transport == "stdio":
        return StdioServerParameters(
            command=binary,
            args=["--root", root, "serve", "--stdio", "--db", db],
            env={"QUIVER_CONFIG": "/nonexistent", "HOME": "/nonexistent"},
        )
    token = os.environ.get("QUIVER_TEST_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30))


class Answers:
    """An elicitation callback that answers from a script and records what it was asked."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked = []

    async def __call__(self, context, params):
        self.asked.append(params.message)
        schema = params.requested_schema
        choices = [c["const"] for c in schema["properties"]["decision"]["oneOf"]]
        action, choice = self.answers.pop(0)
        if action == "accept":
            assert choice in choices, (choice, choices)
            return types.ElicitResult(action="accept", content={"decision": choice})
        return types.ElicitResult(action=action)


def conversation(result):
    meta = result.meta or {}
    return meta.get("io.quiver/conversation")


async def call(client, name, arguments, handle=None):
    args = dict(arguments)
    if handle:
        args["conversation"] = handle
    return await client.call_tool(name, args)


async def main():
    answers = Answers()
    async with Client(server(), mode=mode, elicitation_callback=answers) as client:
        check("protocol", client.protocol_version == ("2025-11-25" if mode == "legacy" else mode), client.protocol_version)
        tools = await client.list_tools()
        names = [t.name for t in tools.tools]
        check("fixed tool list", names[:3] == ["read_skill", "tool_search", "call_tool"], names)
        by_name = {t.name: t for t in tools.tools}
        check("read-only hints", by_name["tool_search"].annotations.read_only_hint is True)
        check("destructive hint on call_tool", by_name["call_tool"].annotations.destructive_hint is True)

        found = await call(client, "tool_search", {"query": "北京明天多少度"})
        results = body(found)["results"]
        check("tool_search finds the forecast", results and results[0]["name"] == "weather__forecast", results)
        handle = conversation(found)
        check("a conversation handle", isinstance(handle, str) and handle.startswith("v1."), handle)

        skill = await call(client, "read_skill", {"id": "weather"}, handle)
        check("read_skill activates", body(skill).get("status") == "activated", body(skill))
        again = await call(client, "read_skill", {"id": "weather"}, handle)
        if mode == "legacy" or transport == "stdio":
            # The connection delivered the instructions: its transcript holds them.
            check("read_skill again is already active", "already active" in body(again).get("status", ""), body(again))
        else:
            # A stateless request may come from any client holding the handle: the
            # instructions are given again (issue 12 defect 8).
            check("read_skill again gives the instructions again", body(again).get("status") == "active" and body(again).get("instructions"), body(again))

        # Consent cancelled: nothing recorded, the call does not run; asked again next time.
        answers.answers = [("cancel", None)]
        cancelled = await call(client, "call_tool", {"name": "weather__forecast", "arguments": {"city": "北京"}}, handle)
        check("cancel: refused, not run", cancelled.is_error and "nobody answered" in body(cancelled)["error"], body(cancelled))
        check("cancel: the user was asked about the package", len(answers.asked) == 1 and "weather" in answers.asked[0], answers.asked)

        # Consent declined: refused, and the refusal is the conversation's answer.
        answers.answers = [("decline", None)]
        declined = await call(client, "call_tool", {"name": "weather__forecast", "arguments": {"city": "北京"}}, handle)
        check("decline: refused", declined.is_error and "refused" in body(declined)["error"], body(declined))

        # Consent accepted in a new conversation: the package runs its tool (or, without the
        # sandbox, fails with the executor's message, not a refusal); no second question.
        answers.asked.clear()
        answers.answers = [("accept", "allow_conversation")]
        first = await call(client, "tool_search", {"query": "what should I pack for Tokyo"})
        fresh = conversation(first) if mode != "legacy" else None
        accepted = await call(client, "call_tool", {"name": "travel-advice__packing_advice", "arguments": {"destination": "Tokyo"}}, fresh)
        check("accept: consent asked once", len(answers.asked) == 1, answers.asked)
        check("accept: the tool ran in its sandbox", "items" in body(accepted), body(accepted))
        handle2 = conversation(accepted)
        second = await call(client, "call_tool", {"name": "travel-advice__packing_advice", "arguments": {"destination": "Paris"}}, handle2)
        check("accept: no second question in the conversation", len(answers.asked) == 1, answers.asked)
        check("accept: the second call ran", body(second).get("destination") == "Paris", body(second))

        # A dangerous tool: consent, then a person's approval for this one call; declined.
        answers.asked.clear()
        answers.answers = [("accept", "allow_conversation"), ("decline", None)]
        kick = await call(client, "call_tool", {"name": "group-admin__kick_member", "arguments": {"user_id": "10006"}}, handle2)
        check("dangerous: refused", kick.is_error and "refused" in body(kick)["error"], body(kick))
        check("dangerous: asked consent then approval", len(answers.asked) == 2 and "kick_member" in answers.asked[1], answers.asked)

        # Unknown tools say so, with no hint.
        unknown = await call(client, "call_tool", {"name": "nope__nothing", "arguments": {}}, handle2)
        check("unknown tool", unknown.is_error and "unknown tool" in body(unknown)["error"], body(unknown))
        # Named directly by the client, it is a JSON-RPC error (-32602).
        try:
            direct = await call(client, "nope__nothing", {}, handle2)
            check("unknown tool called directly: an error", False, direct)
        except MCPError as error:
            check("unknown tool called directly: -32602", error.code == -32602, error)

        # Skills extension over resources.
        resources = await client.list_resources()
        uris = [r.uri for r in resources.resources]
        check("skill resources", "skill://weather/SKILL.md" in uris and "skill://weather/references/cities.md" in uris, uris)
        read = await client.read_resource("skill://weather/references/cities.md")
        check("resources/read", "北京" in read.contents[0].text or len(read.contents[0].text) > 0)
    print("all ok", flush=True)


asyncio.run(main())
