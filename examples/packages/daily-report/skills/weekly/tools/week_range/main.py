"""daily-report.week_range: the ISO week (Monday to Sunday) containing a day.

Standard library only (python-dateutil in requirements.txt is not installed yet).
"""

import datetime
import json
import sys


def week_range(arguments):
    text = str(arguments.get("date") or "").strip()
    try:
        day = datetime.date.fromisoformat(text) if text else datetime.date.today()
    except ValueError:
        raise ValueError(f"`{text}` is not a date; use YYYY-MM-DD") from None
    weeks_ago = int(arguments.get("weeks_ago", 0))
    if not 0 <= weeks_ago <= 52:
        raise ValueError("`weeks_ago` must be between 0 and 52")
    day -= datetime.timedelta(weeks=weeks_ago)
    start = day - datetime.timedelta(days=day.weekday())
    end = start + datetime.timedelta(days=6)
    year, week, _ = start.isocalendar()
    return {
        "week": f"{year}-W{week:02d}",
        "start": start.isoformat(),
        "end": end.isoformat(),
        "workdays": [(start + datetime.timedelta(days=i)).isoformat() for i in range(5)],
    }


def main():
    try:
        request = json.load(sys.stdin)
        result = week_range(request.get("arguments") or {})
    except (ValueError, TypeError, AttributeError) as err:
        json.dump({"error": str(err), "code": "bad_request"}, sys.stdout)
        return 1
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
