"""What the test clients of `tests/mcp/` share: the JSON a tool result carries, and a check
that prints one line and exits non-zero on the first failure."""

import json
import sys


def body(result):
    """The JSON text of a tool result's first content block, parsed."""
    return json.loads(result.content[0].text)


def check(name, condition, detail=""):
    """Prints `ok NAME`, or `FAIL NAME: DETAIL` and exits 1."""
    if not condition:
        print(f"FAIL {name}: {detail}", flush=True)
        sys.exit(1)
    print(f"ok {name}", flush=True)
