"""group-admin.send_group_notice: posts a notice to the current group (dangerous: publishes)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import groupstore  # noqa: E402


def send_group_notice(arguments, context):
    group = groupstore.group_of(context)
    sender = groupstore.sender_of(context)
    content = str(arguments.get("content") or "").strip()
    if not content:
        raise groupstore.ToolError("missing_content", "`content` is required")
    pinned = bool(arguments.get("pinned", False))
    with groupstore.group_state(group, write=True) as state:
        groupstore.require_admin(state, sender)
        notice = {"id": len(state["notices"]) + 1, "content": content, "pinned": pinned,
                  "by": sender, "at": groupstore.now().isoformat()}
        state["notices"].append(notice)
        groupstore.log(state, sender, "notice", notice_id=notice["id"])
    return {"sent": True, "group": group, "notice": notice}


if __name__ == "__main__":
    sys.exit(groupstore.run(send_group_notice))
