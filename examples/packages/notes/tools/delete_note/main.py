"""notes.delete_note: removes one note by id from notes.json."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import notestore  # noqa: E402


def delete_note(arguments, _context):
    note_id = arguments.get("id")
    if not isinstance(note_id, int) or isinstance(note_id, bool):
        raise notestore.ToolError("bad_id", "`id` must be a note id (an integer)")
    with notestore.locked():
        store = notestore.load()
        kept = [n for n in store["notes"] if n["id"] != note_id]
        if len(kept) == len(store["notes"]):
            raise notestore.ToolError("not_found", f"没有编号为 {note_id} 的笔记 · no note with id {note_id}")
        removed = next(n for n in store["notes"] if n["id"] == note_id)
        store["notes"] = kept
        notestore.save(store)
    return {"deleted": True, "note": removed, "count": len(kept)}


if __name__ == "__main__":
    sys.exit(notestore.run(delete_note))
