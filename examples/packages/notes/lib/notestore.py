"""Shared storage of the notes package: notes.json in the data folder.

The data folder is the working directory and is also named by QUIVER_DATA_DIR. Writes go to
a temporary file that replaces notes.json, under an exclusive lock, so a crash or two calls
at once never leave a half-written file.
"""

import contextlib
import datetime
import fcntl
import json
import os
import sys
from pathlib import Path


class ToolError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def data_dir():
    return Path(os.environ.get("QUIVER_DATA_DIR") or ".")


@contextlib.contextmanager
def locked():
    """Holds the package's write lock while the block runs."""
    folder = data_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".notes.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def load():
    path = data_dir() / "notes.json"
    if not path.exists():
        return {"next_id": 1, "notes": []}
    with path.open(encoding="utf-8") as f:
        return json.load(f)


def save(store):
    path = data_dir() / "notes.json"
    tmp = path.with_name(".notes.json.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(store, f, ensure_ascii=False, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def now():
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def sender(context):
    """The user id of the caller, when the runtime sent one."""
    principal = (context or {}).get("principal") or {}
    user = principal.get("user_id") or principal.get("id")
    return str(user) if user is not None else None


def run(handler):
    """Reads the request from stdin, calls handler(arguments, context), prints the result."""
    try:
        request = json.load(sys.stdin)
        arguments = request.get("arguments") or {}
        context = request.get("context") or {}
        if not isinstance(arguments, dict):
            raise ToolError("bad_request", "`arguments` must be an object")
        result = handler(arguments, context)
    except ToolError as err:
        json.dump({"error": str(err), "code": err.code}, sys.stdout, ensure_ascii=False)
        return 1
    except (ValueError, AttributeError, TypeError) as err:
        json.dump({"error": f"bad request: {err}", "code": "bad_request"}, sys.stdout)
        return 1
    json.dump(result, sys.stdout, ensure_ascii=False)
    return 0
