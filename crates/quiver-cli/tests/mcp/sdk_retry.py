"""The pinned Python `mcp` SDK's own `input_required` retry against `quiver serve --http`, with
no Quiver conversation handle passed, and an anonymous caller facing a card only a person may
answer.

    python sdk_retry.py URL retry|anonymous MODE

`retry` (a bearer token in QUIVER_TEST_TOKEN, MODE 2026-07-28): the SDK answers the consent
question and retries with the sealed requestState; the retry continues the conversation sealed
in it, accepted (the tool runs) and declined (refused).
`anonymous` (no token, MODE legacy or 2026-07-28): a dangerous tool's consent may be given,
but its approval (a `human` tool of the test's `payout` package) is refused without being asked.
"""

import asyncio
import os
import sys

import httpx2

import mcp_types as types
from checks import body, check
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

url, scenario, mode = sys.argv[1:4]


def server():
    token = os.environ.get("QUIVER_TEST_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30))


class Answers:
    def __init__(self):
        self.answers = []
        self.asked = []

    async def __call__(self, context, params):
        self.asked.append(params.message)
        action, choice = self.answers.pop(0)
        if action == "accept":
            return types.ElicitResult(action="accept", content={"decision": choice})
        return types.ElicitResult(action=action)


async def retry(client, answers):
    answers.answers = [("accept", "allow_once")]
    accepted = await client.call_tool("call_tool", {"name": "travel-advice__packing_advice", "arguments": {"destination": "Tokyo"}})
    check("accepted: asked once, about the package", len(answers.asked) == 1 and "travel-advice" in answers.asked[0], answers.asked)
    check("accepted: the retry ran the tool", not accepted.is_error and "items" in body(accepted), body(accepted))
    answers.asked.clear()
    answers.answers = [("decline", None)]
    declined = await client.call_tool("call_tool", {"name": "travel-advice__packing_advice", "arguments": {"destination": "Paris"}})
    check("declined: asked once", len(answers.asked) == 1, answers.asked)
    check("declined: the retry is refused, not a bad requestState", declined.is_error and "refused" in body(declined)["error"], body(declined))


async def anonymous(client, answers):
    answers.answers = [("accept", "allow_conversation"), ("accept", "allow_once")]
    sent = await client.call_tool("call_tool", {"name": "payout__send", "arguments": {"amount": 100}})
    # The dangerous gate comes before consent: an anonymous caller is refused before anything is asked.
    check("anonymous: asked nothing", len(answers.asked) == 0, answers.asked)
    check("anonymous: the dangerous call is refused", sent.is_error and "anonymous" in body(sent)["error"], body(sent))


async def main():
    answers = Answers()
    async with Client(server(), mode=mode, elicitation_callback=answers) as client:
        await (retry if scenario == "retry" else anonymous)(client, answers)
    print("all ok", flush=True)


asyncio.run(main())
