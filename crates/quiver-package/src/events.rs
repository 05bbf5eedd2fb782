//! Event subscriptions in `quiver.yaml` (`events: [order.paid, order.*, shop.**]`): names of
//! dot-separated segments, where a whole segment `*` matches any one segment and a last
//! segment `**` matches one or more. Pure; the scheduler asks [`matches()`].

/// Why a subscription is not a valid pattern, if it is not.
pub fn check(pattern: &str) -> Result<(), String> {
    let segments: Vec<&str> = pattern.split('.').collect();
    for (i, segment) in segments.iter().enumerate() {
        if segment.is_empty() {
            return Err(format!("`{pattern}` has an empty segment"));
        }
        if *segment == "**" && i + 1 != segments.len() {
            return Err(format!("`{pattern}`: `**` may only be the last segment"));
        }
        if segment.contains('*') && *segment != "*" && *segment != "**" {
            return Err(format!(
                "`{pattern}`: `*` stands for a whole segment (`order.*`), not part of one"
            ));
        }
        if segment.chars().any(char::is_whitespace) {
            return Err(format!("`{pattern}` contains a space"));
        }
    }
    Ok(())
}

/// Whether the subscription `pattern` covers the event `name`.
pub fn matches(pattern: &str, name: &str) -> bool {
    let mut wanted = pattern.split('.');
    let mut got = name.split('.');
    loop {
        match (wanted.next(), got.next()) {
            (Some("**"), Some(_)) => return wanted.next().is_none(),
            (Some("*"), Some(_)) => {}
            (Some(w), Some(g)) if w == g => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_segments() {
        let cases = [
            ("order.paid", "order.paid", true),
            ("order.paid", "order.paid.late", false),
            ("order.paid", "order", false),
            ("order.*", "order.paid", true),
            ("order.*", "order.paid.late", false),
            ("order.*", "order", false),
            ("*.paid", "invoice.paid", true),
            ("order.**", "order.paid", true),
            ("order.**", "order.paid.late", true),
            ("order.**", "order", false),
            ("**", "anything.at.all", true),
            ("订单.*", "订单.已付", true),
            ("order.*", "orders.paid", false),
        ];
        for (pattern, name, expected) in cases {
            assert_eq!(matches(pattern, name), expected, "{pattern} ~ {name}");
        }
    }

    #[test]
    fn malformed_patterns_are_refused() {
        for good in ["order.paid", "order.*", "order.**", "*", "**", "订单.已付"] {
            assert_eq!(check(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "order.",
            ".paid",
            "order..paid",
            "ord*",
            "order.**.late",
            "a b",
        ] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }
}
