"""notes.list_notes: lists notes from notes.json, newest first, with optional filters."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import notestore  # noqa: E402


def list_notes(arguments, _context):
    query = str(arguments.get("query") or "").strip().lower()
    tag = str(arguments.get("tag") or "").strip()
    since = str(arguments.get("since") or "").strip()
    limit = int(arguments.get("limit") or 20)
    limit = max(1, min(limit, 100))
    notes = notestore.load()["notes"]
    if query:
        notes = [n for n in notes if query in (n["title"] + "\n" + n["text"]).lower()]
    if tag:
        notes = [n for n in notes if tag in n["tags"]]
    if since:
        notes = [n for n in notes if n["created_at"][:10] >= since]
    notes = sorted(notes, key=lambda n: n["id"], reverse=True)
    return {"notes": notes[:limit], "count": len(notes), "truncated": len(notes) > limit}


if __name__ == "__main__":
    sys.exit(notestore.run(list_notes))
