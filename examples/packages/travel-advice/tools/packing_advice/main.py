"""travel-advice.packing_advice: a packing list and what to wear for a trip.

Reasons only (category `decision`): no network, no data. It uses the temperatures the caller
passes (for example from weather.forecast); without them it falls back on a rough monthly
climate table for a few destinations, and says which it used.
"""

import datetime
import json
import sys

# Rough monthly mean temperatures (°C) and whether the month is usually wet.
CLIMATE = {
    "beijing": (("北京", "beijing", "peking"), [-3, 0, 7, 14, 20, 25, 27, 26, 21, 13, 5, -1], {7, 8}),
    "shanghai": (("上海", "shanghai"), [5, 6, 10, 15, 21, 25, 29, 29, 25, 20, 14, 7], {6, 7, 8, 9}),
    "guangzhou": (("广州", "guangzhou", "canton"), [14, 15, 18, 22, 26, 28, 29, 29, 27, 24, 20, 15], {4, 5, 6, 7, 8, 9}),
    "chengdu": (("成都", "chengdu"), [6, 8, 12, 17, 21, 24, 26, 25, 22, 17, 12, 7], {7, 8, 9}),
    "harbin": (("哈尔滨", "harbin"), [-17, -12, -3, 7, 15, 21, 23, 21, 15, 6, -5, -14], {7, 8}),
    "sanya": (("三亚", "sanya"), [21, 22, 24, 27, 28, 29, 29, 28, 28, 27, 25, 22], {6, 7, 8, 9, 10}),
    "tokyo": (("东京", "東京", "tokyo"), [5, 6, 9, 14, 19, 22, 26, 27, 23, 18, 13, 8], {6, 9}),
    "seoul": (("首尔", "seoul"), [-2, 1, 6, 13, 18, 23, 25, 26, 21, 15, 7, 0], {7, 8}),
    "singapore": (("新加坡", "singapore"), [27, 27, 28, 28, 28, 28, 28, 28, 28, 28, 27, 27], {11, 12, 1}),
    "london": (("伦敦", "london"), [5, 6, 8, 10, 14, 17, 19, 19, 16, 12, 8, 6], {1, 10, 11, 12}),
    "paris": (("巴黎", "paris"), [5, 6, 9, 12, 16, 19, 21, 21, 17, 13, 8, 5], {12}),
    "newyork": (("纽约", "new york", "nyc"), [1, 2, 6, 12, 17, 23, 25, 25, 21, 15, 9, 4], set()),
    "sydney": (("悉尼", "sydney"), [23, 23, 22, 19, 16, 14, 13, 14, 16, 18, 20, 22], {3}),
}

TEXT = {
    "passport": ("身份证/护照", "ID card or passport"),
    "charger": ("手机和充电器", "phone and charger"),
    "meds": ("常用药", "everyday medicine"),
    "toiletries": ("洗漱用品", "toiletries"),
    "underwear": ("内衣袜子 ×{n}", "underwear and socks ×{n}"),
    "tshirt": ("短袖 ×{n}", "T-shirts ×{n}"),
    "shorts": ("短裤或裙子", "shorts or a skirt"),
    "sunscreen": ("防晒霜", "sunscreen"),
    "sunglasses": ("太阳镜、遮阳帽", "sunglasses and a sun hat"),
    "light_jacket": ("薄外套", "a light jacket"),
    "long_sleeves": ("长袖 ×{n}", "long-sleeved shirts ×{n}"),
    "sweater": ("毛衣或卫衣", "a sweater or hoodie"),
    "coat": ("厚外套", "a warm coat"),
    "scarf": ("围巾", "a scarf"),
    "down": ("羽绒服", "a down jacket"),
    "thermals": ("保暖内衣", "thermal underwear"),
    "hat_gloves": ("帽子和手套", "a hat and gloves"),
    "snow_boots": ("防滑保暖鞋", "warm non-slip boots"),
    "umbrella": ("雨伞或雨衣", "an umbrella or raincoat"),
    "waterproof_shoes": ("防水的鞋", "waterproof shoes"),
    "suit": ("正装一套", "a suit or business outfit"),
    "laptop": ("笔记本电脑和转换头", "laptop and plug adapter"),
    "swimsuit": ("泳衣", "swimwear"),
    "sandals": ("拖鞋或凉鞋", "sandals or flip-flops"),
    "hiking_boots": ("登山鞋", "hiking boots"),
    "water_bottle": ("水壶", "a water bottle"),
    "headlamp": ("头灯", "a headlamp"),
    "ski_wear": ("滑雪服和护目镜", "ski wear and goggles"),
}

WEAR = [
    (28, "天气炎热（{lo}~{hi}°C）：穿短袖短裤，注意防晒和补水。",
     "Hot ({lo} to {hi} °C): T-shirts and shorts; sun protection and water."),
    (20, "温暖（{lo}~{hi}°C）：短袖为主，早晚带一件薄外套。",
     "Warm ({lo} to {hi} °C): T-shirts, a light jacket for mornings and evenings."),
    (10, "凉爽（{lo}~{hi}°C）：长袖加毛衣或外套，适合叠穿。",
     "Cool ({lo} to {hi} °C): long sleeves and a sweater or jacket; dress in layers."),
    (0, "冷（{lo}~{hi}°C）：毛衣加厚外套，带围巾。",
     "Cold ({lo} to {hi} °C): a sweater and a warm coat, and a scarf."),
    (-100, "严寒（{lo}~{hi}°C）：羽绒服、保暖内衣、帽子手套，鞋要防滑。",
     "Freezing ({lo} to {hi} °C): a down jacket, thermals, hat and gloves, non-slip boots."),
]


class ToolError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def has_cjk(text):
    return any("\u4e00" <= c <= "\u9fff" for c in text)


def climate(destination, month):
    name = "".join(destination.split()).lower().rstrip("市")
    for names, means, wet in CLIMATE.values():
        if any("".join(n.split()) in name for n in names):
            mean = means[month - 1]
            return mean - 4, mean + 4, month in wet
    return None


def advise(arguments):
    destination = str(arguments.get("destination", "")).strip()
    if not destination:
        raise ToolError("missing_destination", "`destination` is required")
    days = int(arguments.get("days") or 3)
    if not 1 <= days <= 60:
        raise ToolError("bad_days", "`days` must be between 1 and 60")
    month = int(arguments.get("month") or datetime.date.today().month)
    if not 1 <= month <= 12:
        raise ToolError("bad_month", "`month` must be between 1 and 12")
    purpose = arguments.get("purpose") or "leisure"
    lang = arguments.get("lang") or ("zh" if has_cjk(destination) else "en")
    idx = 0 if lang == "zh" else 1

    lo, hi = arguments.get("temp_min_c"), arguments.get("temp_max_c")
    rain = arguments.get("rain")
    if lo is not None or hi is not None:
        lo = hi if lo is None else lo
        hi = lo if hi is None else hi
        source = "given"
    else:
        guess = climate(destination, month)
        if guess is None:
            lo, hi, source = 8, 18, "unknown"
        else:
            lo, hi, guessed_rain = guess
            rain = guessed_rain if rain is None else rain
            source = "climate"
    lo, hi = min(lo, hi), max(lo, hi)

    n = min(days, 7)
    keys = ["passport", "charger", "meds", "toiletries", "underwear"]
    if hi >= 28:
        keys += ["tshirt", "shorts", "sunscreen", "sunglasses"]
    elif hi >= 20:
        keys += ["tshirt", "light_jacket", "sunscreen"]
    elif hi >= 10:
        keys += ["long_sleeves", "sweater", "light_jacket"]
    elif hi >= 0:
        keys += ["long_sleeves", "sweater", "coat", "scarf"]
    else:
        keys += ["long_sleeves", "down", "thermals", "hat_gloves", "snow_boots"]
    if hi - lo >= 10 and "light_jacket" not in keys and hi >= 10:
        keys.append("light_jacket")
    if rain:
        keys += ["umbrella", "waterproof_shoes"]
    keys += {
        "business": ["suit", "laptop"],
        "beach": ["swimsuit", "sandals", "sunscreen"],
        "hiking": ["hiking_boots", "water_bottle", "headlamp"],
        "skiing": ["ski_wear", "thermals", "hat_gloves"],
    }.get(purpose, [])
    seen = []
    for key in keys:
        if key not in seen:
            seen.append(key)
    items = [TEXT[k][idx].format(n=n) for k in seen]

    band = next(w for w in WEAR if hi >= w[0])
    wear = band[1 + idx].format(lo=round(lo), hi=round(hi))
    tips = []
    if source == "unknown":
        tips.append(["不知道当地天气，按 8~18°C 估计；出发前用 weather.forecast 查一下天气预报。",
                     "Weather unknown, assumed 8 to 18 °C; check weather.forecast before leaving."][idx])
    elif source == "climate":
        tips.append(["气温是按月份估计的气候平均值，不是预报；出发前用 weather.forecast 查一下。",
                     "Temperatures are a monthly climate estimate, not a forecast; check weather.forecast."][idx])
    if rain:
        tips.append(["可能下雨，雨具放在随身包里。", "Rain is likely: keep rain gear in your day bag."][idx])
    if days > 7:
        tips.append(["行程超过一周，衣服按 7 天准备，中途洗一次。",
                     "Over a week: pack for 7 days and do laundry once."][idx])
    return {
        "destination": destination,
        "days": days,
        "month": month,
        "purpose": purpose,
        "expected": {"temp_min_c": lo, "temp_max_c": hi, "rain": bool(rain), "source": source},
        "wear": wear,
        "items": items,
        "tips": tips,
    }


def main():
    try:
        request = json.load(sys.stdin)
        arguments = request.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise ToolError("bad_request", "`arguments` must be an object")
        result = advise(arguments)
    except ToolError as err:
        json.dump({"error": str(err), "code": err.code}, sys.stdout, ensure_ascii=False)
        return 1
    except (ValueError, TypeError, AttributeError) as err:
        json.dump({"error": f"bad request: {err}", "code": "bad_request"}, sys.stdout)
        return 1
    json.dump(result, sys.stdout, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
