"""The pinned Python `mcp` SDK's own `input_required` retry against `quiver serve --http`, with
no Quiver conversation handle passed, and an anonymous caller facing a card only a person may
answer.

    python sdk_retry.py URL retry|anonymous|ask-later MODE

`retry` (a bearer token in QUIVER_TEST_TOKEN, MODE 2026-07-28): the SDK answers the consent
question and retries with the sealed requestState; the retry continues the conversation sealed
in it, accepted (the tool runs) and declined (refused).
`anonymous` (no token, MODE legacy or 2026-07-28): a dangerous tool's consent may be given,
but its approval (a `human` tool of the test's `payout` package) is refused without being asked.
`ask-later` (a bearer token, no elicitation callback, no handle passed: the SDK's default
client): a consent-gated call is answered at once with the command that answers it; once
`quiver approvals approve` (QUIVER_TEST_BIN, with QUIVER_TEST_HOME as its home) has answered,
the same call runs, and the next call to the package asks nothing (one default conversation).
"""

import asyncio
import os
import subprocess
import sys
import time

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
    # Another package (this client's default conversation already has travel-advice's consent).
    answers.answers = [("decline", None)]
    declined = await client.call_tool("call_tool", {"name": "notes__list_notes", "arguments": {}})
    check("declined: asked once", len(answers.asked) == 1, answers.asked)
    check("declined: the retry is refused, not a bad requestState", declined.is_error and "refused" in body(declined)["error"], body(declined))


async def anonymous(client, answers):
    answers.answers = [("accept", "allow_conversation"), ("accept", "allow_once")]
    sent = await client.call_tool("call_tool", {"name": "payout__send", "arguments": {"amount": 100}})
    # The dangerous gate comes before consent: an anonymous caller is refused before anything is asked.
    check("anonymous: asked nothing", len(answers.asked) == 0, answers.asked)
    check("anonymous: the dangerous call is refused", sent.is_error and "anonymous" in body(sent)["error"], body(sent))


async def ask_later(client):
    quiver, home = os.environ["QUIVER_TEST_BIN"], os.environ["QUIVER_TEST_HOME"]
    tokyo = {"name": "travel-advice__packing_advice", "arguments": {"destination": "Tokyo"}}
    started = time.monotonic()
    asked = await client.call_tool("call_tool", tokyo)
    waited = time.monotonic() - started
    check("answered at once", waited < 2, waited)
    said = body(asked)
    check("says what is needed and where", asked.is_error and "quiver approvals approve" in said["error"], said)
    card = said["waiting_for"]["approval"]
    done = subprocess.run([quiver, "approvals", "approve", card], env={**os.environ, "QUIVER_HOME": home}, capture_output=True, text=True)
    check("a person approved", done.returncode == 0, done.stdout + done.stderr)
    ran = await client.call_tool("call_tool", tokyo)
    check("the same call now runs", not ran.is_error and "items" in body(ran), body(ran))
    paris = {"name": "travel-advice__packing_advice", "arguments": {"destination": "Paris"}}
    again = await client.call_tool("call_tool", paris)
    check("the next call to the package asks nothing", not again.is_error and "items" in body(again), body(again))
    # The figure: time to the actionable answer, each call a new program's first (a consent
    # card queued and explained).
    times = []
    for i in range(20):
        fresh = types.Implementation(name=f"ask-later-{i}", version="1")
        async with Client(server(), mode=mode, client_info=fresh) as other:
            started = time.monotonic()
            said = await other.call_tool("call_tool", tokyo)
            times.append(time.monotonic() - started)
            check("a new program is asked", "waiting_for" in body(said), body(said))
    times.sort()
    p50, p95 = times[len(times) // 2], times[int(len(times) * 0.95) - 1]
    check("answered at once, p95 under 2 s", p95 < 2, times)
    print(f"time to the actionable answer over {len(times)} calls: p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms", flush=True)


async def main():
    if scenario == "ask-later":
        async with Client(server(), mode=mode) as client:
            await ask_later(client)
    else:
        answers = Answers()
        async with Client(server(), mode=mode, elicitation_callback=answers) as client:
            await (retry if scenario == "retry" else anonymous)(client, answers)
    print("all ok", flush=True)


asyncio.run(main())
