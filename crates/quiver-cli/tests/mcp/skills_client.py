"""A plain MCP client (the Python `mcp` SDK, pinned in scripts/requirements-test.txt) reads
the skills `quiver serve` offers as `skill://` resources, and checks every byte:

    python skills_client.py QUIVER_BINARY ROOT CONFIG MODE URI=FILE...

MODE is `legacy` (2025-11-25) or `2026-07-28`. Each URI must be listed by `resources/list`
and read back (text or blob) with exactly the bytes of FILE. Prints one line per check and
exits non-zero on the first failure.
"""

import asyncio
import base64
import os
import sys

from checks import check
from mcp import Client
from mcp.client.stdio import StdioServerParameters

binary, root, config, mode = sys.argv[1:5]
expected = dict(arg.split("=", 1) for arg in sys.argv[5:])


async def main():
    params = StdioServerParameters(
        command=binary,
        args=["--root", root, "serve", "--stdio"],
        env={
            "QUIVER_CONFIG": config,
            "QUIVER_HOME": os.environ["QUIVER_HOME"],
            "HOME": "/nonexistent",
        },
    )
    async with Client(params, mode=mode) as client:
        listed = await client.list_resources()
        uris = {r.uri for r in listed.resources}
        for uri, path in sorted(expected.items()):
            check(f"listed {uri}", uri in uris, sorted(uris))
            read = await client.read_resource(uri)
            content = read.contents[0]
            got = content.text.encode() if hasattr(content, "text") else base64.b64decode(content.blob)
            with open(path, "rb") as f:
                want = f.read()
            check(f"bytes of {uri}", got == want, (got[:80], want[:80]))


asyncio.run(main())
