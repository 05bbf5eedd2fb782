"""notes.add_note: appends a note to notes.json in the data folder."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import notestore  # noqa: E402


def add_note(arguments, context):
    text = str(arguments.get("text", "")).strip()
    if not text:
        raise notestore.ToolError("missing_text", "`text` is required")
    title = str(arguments.get("title") or "").strip() or text.splitlines()[0][:40]
    tags = sorted({str(t).strip() for t in arguments.get("tags") or [] if str(t).strip()})
    with notestore.locked():
        store = notestore.load()
        note = {
            "id": store["next_id"],
            "title": title,
            "text": text,
            "tags": tags,
            "created_at": notestore.now(),
            "author": notestore.sender(context),
        }
        store["next_id"] += 1
        store["notes"].append(note)
        notestore.save(store)
    return {"added": True, "note": note, "count": len(store["notes"])}


if __name__ == "__main__":
    sys.exit(notestore.run(add_note))
