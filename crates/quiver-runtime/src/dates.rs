//! Relative dates in `format: date` arguments (DESIGN.md §3 step 4).
//!
//! A model often writes `明天` or `tomorrow` where a date is expected, or passes today's date
//! although the user asked about tomorrow. Both are resolved from the session's clock, and the
//! result says what was changed so the model (and the audit) can see it.

use chrono::{Days, NaiveDate};
use serde::Serialize;
use serde_json::Value;

/// Relative day words, longest first so `大后天` is not read as `后天`.
const RELATIVE_DAYS: [(&str, i64); 12] = [
    ("the day after tomorrow", 2),
    ("day after tomorrow", 2),
    ("大后天", 3),
    ("后天", 2),
    ("明天", 1),
    ("明日", 1),
    ("tomorrow", 1),
    ("今天", 0),
    ("今日", 0),
    ("today", 0),
    ("昨天", -1),
    ("yesterday", -1),
];

/// One change made to an argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DateChange {
    /// JSON path of the field (`/date`, `/trip/start`).
    pub field: String,
    /// The value the model gave.
    pub from: String,
    /// The date used instead.
    pub to: String,
    /// Why, in words the model reads.
    pub reason: String,
}

/// Resolves relative dates in every `format: date` field of `arguments` (per `schema`), and
/// moves today's date to the day the user's message names (`明天`, `后天`, `tomorrow`, ...).
pub fn resolve_dates(
    arguments: &mut Value,
    schema: &Value,
    today: NaiveDate,
    user_message: &str,
) -> Vec<DateChange> {
    let mut changes = Vec::new();
    let said = day_offset_in(user_message).filter(|&d| d != 0);
    walk(arguments, schema, today, said, String::new(), &mut changes);
    changes
}

fn walk(
    value: &mut Value,
    schema: &Value,
    today: NaiveDate,
    said: Option<i64>,
    path: String,
    changes: &mut Vec<DateChange>,
) {
    if schema.get("format").and_then(Value::as_str) == Some("date") {
        if let Value::String(text) = value {
            let original = text.clone();
            let resolved = if let Some(offset) = exact_relative(text) {
                shift(today, offset).map(|d| {
                    (
                        d,
                        format!("`{original}` resolved from today's date {today}"),
                    )
                })
            } else if let (Ok(given), Some(offset)) =
                (NaiveDate::parse_from_str(text, "%Y-%m-%d"), said)
                && given == today
            {
                shift(today, offset).map(|d| {
                    (d, format!("the user's message names a day {offset} day(s) from today, so today's date was moved"))
                })
            } else {
                None
            };
            if let Some((date, reason)) = resolved {
                let to = date.format("%Y-%m-%d").to_string();
                *text = to.clone();
                changes.push(DateChange {
                    field: if path.is_empty() { "/".into() } else { path },
                    from: original,
                    to,
                    reason,
                });
            }
        }
        return;
    }
    match value {
        Value::Object(map) => {
            let Some(props) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            for (key, sub_schema) in props {
                if let Some(sub) = map.get_mut(key) {
                    walk(
                        sub,
                        sub_schema,
                        today,
                        said,
                        format!("{path}/{key}"),
                        changes,
                    );
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.get("items") else {
                return;
            };
            for (i, item) in items.iter_mut().enumerate() {
                walk(
                    item,
                    item_schema,
                    today,
                    said,
                    format!("{path}/{i}"),
                    changes,
                );
            }
        }
        _ => {}
    }
}

/// The offset of a value that is exactly a relative day word.
fn exact_relative(text: &str) -> Option<i64> {
    let t = text.trim().to_lowercase();
    RELATIVE_DAYS.iter().find(|(w, _)| *w == t).map(|&(_, d)| d)
}

/// The first relative day the message names, longest words first.
pub fn day_offset_in(message: &str) -> Option<i64> {
    let lower = message.to_lowercase();
    RELATIVE_DAYS
        .iter()
        .filter_map(|(w, d)| lower.find(w).map(|pos| (pos, w.len(), *d)))
        .min_by_key(|&(pos, len, _)| (pos, usize::MAX - len))
        .map(|(_, _, d)| d)
}

fn shift(today: NaiveDate, offset: i64) -> Option<NaiveDate> {
    if offset >= 0 {
        today.checked_add_days(Days::new(offset.unsigned_abs()))
    } else {
        today.checked_sub_days(Days::new(offset.unsigned_abs()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn today() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, 29).unwrap()
    }

    #[test]
    fn table() {
        let schema = json!({"type": "object", "properties": {"date": {"type": "string", "format": "date"}, "city": {"type": "string"}}});
        let cases: &[(&str, &str, &str, Option<&str>)] = &[
            ("明天", "北京天气", "2026-11-30", Some("明天")),
            ("后天", "", "2026-12-01", Some("后天")),
            ("大后天", "", "2026-12-02", Some("大后天")),
            ("Tomorrow", "", "2026-11-30", Some("Tomorrow")),
            ("today", "", "2026-11-29", Some("today")),
            (
                "2026-11-29",
                "北京明天多少度",
                "2026-11-30",
                Some("2026-11-29"),
            ),
            (
                "2026-11-29",
                "后天会下雨吗",
                "2026-12-01",
                Some("2026-11-29"),
            ),
            ("2026-11-29", "大后天呢", "2026-12-02", Some("2026-11-29")),
            (
                "2026-11-29",
                "what about the day after tomorrow?",
                "2026-12-01",
                Some("2026-11-29"),
            ),
            ("2026-11-29", "今天冷不冷", "2026-11-29", None),
            ("2026-12-05", "明天呢", "2026-12-05", None),
            ("next week", "", "next week", None),
        ];
        for (given, message, want, changed_from) in cases {
            let mut args = json!({"date": given, "city": "明天"});
            let changes = resolve_dates(&mut args, &schema, today(), message);
            assert_eq!(args["date"], *want, "{given} / {message}");
            assert_eq!(args["city"], "明天", "only format: date fields change");
            assert_eq!(
                changes.first().map(|c| c.from.as_str()),
                *changed_from,
                "{given} / {message}"
            );
        }
    }

    #[test]
    fn nested_and_array_fields() {
        let schema = json!({"type": "object", "properties": {
            "trip": {"type": "object", "properties": {"start": {"type": "string", "format": "date"}}},
            "days": {"type": "array", "items": {"type": "string", "format": "date"}}
        }});
        let mut args = json!({"trip": {"start": "明天"}, "days": ["今天", "后天"]});
        let changes = resolve_dates(&mut args, &schema, today(), "");
        assert_eq!(
            args,
            json!({"trip": {"start": "2026-11-30"}, "days": ["2026-11-29", "2026-12-01"]})
        );
        assert_eq!(
            changes.iter().map(|c| c.field.as_str()).collect::<Vec<_>>(),
            ["/trip/start", "/days/0", "/days/1"]
        );
    }
}
