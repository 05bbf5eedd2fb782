"""Runs `agentskills-mcp-server` (a second implementation of the MCP Skills extension,
pinned in scripts/requirements-skills-server.txt) over stdio:

    python agentskills_server.py --config server.json

The package declares Python >= 3.12 and runs on the machines' 3.11 but for `Path.is_junction`
(3.12), which is always false on Linux: it is supplied here, and nothing else is changed.
"""

import pathlib
import runpy
import sys

if not hasattr(pathlib.Path, "is_junction"):
    pathlib.Path.is_junction = lambda self: False

sys.argv[0] = "agentskills_mcp_server"
runpy.run_module("agentskills_mcp_server", run_name="__main__", alter_sys=True)
