"""weather.forecast: a deterministic, offline sample forecast.

Reads one JSON object {"arguments": {...}, "context": {...}} from stdin and writes one JSON
object to stdout. No network: the figures are computed from the climate table in
cities.json (next to this file) and a hash of the city and the date, so the same question
always gets the same answer. They are sample data, not a real forecast.

Errors are written as {"error": "...", "code": "..."} with exit status 1.
"""

import datetime
import hashlib
import json
import sys
from pathlib import Path

TABLE = Path(__file__).resolve().parent / "cities.json"
SOURCE = "offline sample table (deterministic, not a real forecast)"

RELATIVE_DAYS = {
    "today": 0, "今天": 0, "今日": 0,
    "tomorrow": 1, "明天": 1, "明日": 1,
    "day after tomorrow": 2, "day_after_tomorrow": 2, "后天": 2, "後天": 2,
    "大后天": 3,
}

# (code, 中文, English)
SUNNY = ("sunny", "晴", "sunny")
PARTLY = ("partly_cloudy", "多云", "partly cloudy")
CLOUDY = ("overcast", "阴", "overcast")
RAIN = ("rain", "小雨", "light rain")
STORM = ("thunderstorm", "雷阵雨", "thunderstorms")
SNOW = ("snow", "小雪", "light snow")


class ToolError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def normalize(name):
    name = "".join(str(name).split()).lower().replace("'", "").replace("-", "")
    if len(name) > 1 and name.endswith("市"):
        name = name[:-1]
    return name


def load_cities():
    with TABLE.open(encoding="utf-8") as f:
        return json.load(f)["cities"]


def find_city(cities, name):
    wanted = normalize(name)
    for city in cities:
        names = [city["zh"], city["en"], city["key"], *city["aliases"]]
        if wanted in {normalize(n) for n in names}:
            return city
    raise ToolError(
        "unknown_city",
        f"没有 {name} 的数据 · no data for {name}; known cities: "
        + ", ".join(f"{c['zh']} {c['en']}" for c in cities),
    )


def parse_date(text, today):
    if text is None or str(text).strip() == "":
        return today
    text = str(text).strip()
    offset = RELATIVE_DAYS.get(text.lower())
    if offset is not None:
        return today + datetime.timedelta(days=offset)
    try:
        return datetime.date.fromisoformat(text.replace("/", "-"))
    except ValueError:
        raise ToolError("bad_date", f"`{text}` is not a date; use YYYY-MM-DD") from None


def forecast(city, day):
    digest = hashlib.sha256(f"{city['key']}|{day.isoformat()}".encode()).digest()
    mean = city["monthly_mean_c"][day.month - 1]
    rain_share = city["rain_share"][day.month - 1]
    jitter = (digest[0] / 255 - 0.5) * 6
    spread = 5 + digest[1] % 5
    high = round(mean + spread / 2 + jitter)
    low = round(mean - spread / 2 + jitter)
    roll = digest[2] / 255
    if roll < rain_share:
        condition = SNOW if high <= 1 else STORM if mean >= 24 and digest[4] % 3 == 0 else RAIN
    elif roll < rain_share + 0.25:
        condition = CLOUDY
    elif roll < rain_share + 0.45:
        condition = PARTLY
    else:
        condition = SUNNY
    wet = condition in (RAIN, STORM, SNOW)
    chance = rain_share * 100 + (digest[3] % 21 - 10) + (35 if wet else 0)
    chance = max(0, min(95, round(chance / 5) * 5))
    humidity = min(98, round(35 + rain_share * 60 + digest[5] % 15 + (10 if wet else 0)))
    wind = 5 + digest[6] % 20
    return {
        "city": city["zh"],
        "city_en": city["en"],
        "date": day.isoformat(),
        "condition": condition[1],
        "condition_en": condition[2],
        "condition_code": condition[0],
        "temp_min_c": low,
        "temp_max_c": high,
        "precipitation_chance": chance,
        "humidity": humidity,
        "wind_kph": wind,
        "summary": f"{city['zh']} {day.isoformat()}：{condition[1]}，{low}~{high}°C，降水概率 {chance}%",
        "summary_en": f"{city['en']} on {day.isoformat()}: {condition[2]}, {low} to {high} °C, "
        f"{chance}% chance of rain",
        "source": SOURCE,
    }


def main():
    try:
        request = json.load(sys.stdin)
        arguments = request.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise ToolError("bad_request", "`arguments` must be an object")
        city_name = str(arguments.get("city", "")).strip()
        if not city_name:
            raise ToolError("missing_city", "`city` is required")
        city = find_city(load_cities(), city_name)
        day = parse_date(arguments.get("date"), datetime.date.today())
        result = forecast(city, day)
    except ToolError as err:
        json.dump({"error": str(err), "code": err.code}, sys.stdout, ensure_ascii=False)
        return 1
    except (ValueError, AttributeError) as err:
        json.dump({"error": f"bad request: {err}", "code": "bad_request"}, sys.stdout)
        return 1
    json.dump(result, sys.stdout, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
