"""Shared code of the group-admin tools.

The group and the sender come from the call context the runtime sends, never from the
arguments, so the model cannot act on another group or in someone else's name:

    {"origin": {"platform": "qq", "scope": {"kind": "group", "id": "123456"}, "channel": null},
     "principal": {"user_id": "10001", "role": "trusted", "platform_roles": ["admin"]}}

(`origin.scope` as the word "group" with `origin.group_id` or `origin.channel` is read too.) This example keeps each group's roster
in the data folder (groups/<group>.json), seeded from demo_roster.json the first time; a real
package would call the chat platform's API instead.
"""

import contextlib
import datetime
import fcntl
import hashlib
import json
import os
import re
import sys
from pathlib import Path

DEMO_ROSTER = Path(__file__).resolve().parent / "demo_roster.json"
ADMIN_ROLES = ("owner", "admin")


class ToolError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def data_dir():
    return Path(os.environ.get("QUIVER_DATA_DIR") or ".")


def now():
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


def group_of(context):
    origin = (context or {}).get("origin") or {}
    scope = origin.get("scope")
    kind, scope_id = (scope.get("kind"), scope.get("id")) if isinstance(scope, dict) else (scope, None)
    if kind == "private":
        raise ToolError("not_in_group", "这个工具只能在群聊里用 · this tool only works in a group chat")
    group = scope_id if kind == "group" else None
    group = group or origin.get("group_id") or origin.get("channel")
    if not group:
        raise ToolError("not_in_group", "调用上下文里没有群号 · the call context names no group")
    return str(group)


def sender_of(context):
    principal = (context or {}).get("principal") or {}
    user = principal.get("user_id") or principal.get("id")
    if not user:
        raise ToolError("no_sender", "调用上下文里没有发送者 · the call context names no sender")
    return str(user)


def _file(group):
    safe = group if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", group) else hashlib.sha256(group.encode()).hexdigest()[:16]
    return data_dir() / "groups" / f"{safe}.json"


@contextlib.contextmanager
def group_state(group, write=False):
    """Yields the group's state (a dict); saves it afterwards when `write` is true."""
    path = _file(group)
    path.parent.mkdir(parents=True, exist_ok=True)
    with (path.parent / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if write else fcntl.LOCK_SH)
        try:
            if path.exists():
                with path.open(encoding="utf-8") as f:
                    state = json.load(f)
            else:
                with DEMO_ROSTER.open(encoding="utf-8") as f:
                    state = json.load(f)
                state.update({"group": group, "notices": [], "log": []})
            yield state
            if write:
                tmp = path.with_name(path.name + ".tmp")
                with tmp.open("w", encoding="utf-8") as f:
                    json.dump(state, f, ensure_ascii=False, indent=1)
                os.replace(tmp, path)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def require_admin(state, sender):
    role = state["members"].get(sender, {}).get("role")
    if role not in ADMIN_ROLES:
        raise ToolError("not_admin", "发送者不是本群的群主或管理员 · the sender is not an owner or admin of this group")


def target_member(state, sender, user_id):
    user_id = str(user_id or "").strip()
    member = state["members"].get(user_id)
    if member is None:
        raise ToolError("no_such_member", f"群里没有 {user_id} · {user_id} is not in this group")
    if user_id == sender:
        raise ToolError("self", "不能对自己操作 · cannot act on yourself")
    if member["role"] in ADMIN_ROLES:
        raise ToolError("protected", "不能对群主或管理员操作 · cannot act on the owner or an admin")
    return user_id, member


def log(state, sender, action, **details):
    state["log"].append({"at": now().isoformat(), "by": sender, "action": action, **details})


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
