"""group-admin.kick_member: removes a member from the current group (dangerous)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import groupstore  # noqa: E402


def kick_member(arguments, context):
    group = groupstore.group_of(context)
    sender = groupstore.sender_of(context)
    reason = str(arguments.get("reason") or "").strip()
    with groupstore.group_state(group, write=True) as state:
        groupstore.require_admin(state, sender)
        user_id, member = groupstore.target_member(state, sender, arguments.get("user_id"))
        del state["members"][user_id]
        groupstore.log(state, sender, "kick", user_id=user_id, reason=reason)
    return {"kicked": True, "group": group, "user_id": user_id, "name": member["name"], "reason": reason}


if __name__ == "__main__":
    sys.exit(groupstore.run(kick_member))
