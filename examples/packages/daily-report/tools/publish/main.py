"""daily-report.publish: puts an approved report into outbox/ of the package's data folder.

The file is named by the call's idempotency key, so a step run again after a crash (the same
key) replaces its own report instead of publishing a second one.
"""

import json
import os
import sys
from pathlib import Path


def main():
    request = json.load(sys.stdin)
    arguments = request.get("arguments") or {}
    context = request.get("context") or {}
    report = str(arguments.get("report", "")).strip()
    if not report:
        print(json.dumps({"error": "`report` is required", "code": "missing_report"}))
        return 1
    key = str(context.get("idempotency_key") or context.get("call_id") or "report")
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in key)[:120]
    outbox = Path(os.environ["QUIVER_DATA_DIR"]) / "outbox"
    outbox.mkdir(parents=True, exist_ok=True)
    path = outbox / f"{name}.md"
    date = str(arguments.get("date") or "").strip()
    path.write_text((f"# {date}\n\n" if date else "") + report + "\n", encoding="utf-8")
    print(json.dumps({"published": True, "file": f"outbox/{path.name}", "chars": len(report)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
