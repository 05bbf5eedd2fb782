"""group-admin.list_members: the members of the current group, with role and mute state."""

import datetime
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import groupstore  # noqa: E402


def list_members(arguments, context):
    group = groupstore.group_of(context)
    role = arguments.get("role")
    query = str(arguments.get("query") or "").strip().lower()
    now = groupstore.now()
    with groupstore.group_state(group) as state:
        members = []
        for user_id, member in state["members"].items():
            if role and member["role"] != role:
                continue
            if query and query not in member["name"].lower() and query not in user_id:
                continue
            until = member.get("muted_until")
            muted = bool(until) and datetime.datetime.fromisoformat(until) > now
            members.append({"user_id": user_id, "name": member["name"], "role": member["role"],
                            "muted_until": until if muted else None})
    return {"group": group, "members": members, "count": len(members)}


if __name__ == "__main__":
    sys.exit(groupstore.run(list_members))
