"""group-admin.mute_member: mutes (or, with 0 minutes, unmutes) a member of the current group."""

import datetime
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import groupstore  # noqa: E402


def mute_member(arguments, context):
    group = groupstore.group_of(context)
    sender = groupstore.sender_of(context)
    minutes = int(arguments.get("minutes", 10))
    if not 0 <= minutes <= 43200:
        raise groupstore.ToolError("bad_minutes", "`minutes` must be between 0 and 43200 (30 days)")
    reason = str(arguments.get("reason") or "").strip()
    with groupstore.group_state(group, write=True) as state:
        groupstore.require_admin(state, sender)
        user_id, member = groupstore.target_member(state, sender, arguments.get("user_id"))
        until = groupstore.now() + datetime.timedelta(minutes=minutes) if minutes else None
        member["muted_until"] = until.isoformat() if until else None
        groupstore.log(state, sender, "mute" if minutes else "unmute", user_id=user_id, minutes=minutes, reason=reason)
    return {"muted": minutes > 0, "group": group, "user_id": user_id, "name": member["name"],
            "minutes": minutes, "muted_until": member["muted_until"]}


if __name__ == "__main__":
    sys.exit(groupstore.run(mute_member))
