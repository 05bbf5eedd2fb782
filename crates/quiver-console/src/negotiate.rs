//! Content negotiation: one handler answers HTML to a browser and JSON to a script, by the
//! request's `Accept`.

/// Whether a request with `accept` wants JSON rather than HTML: `application/json` ranked
/// strictly above `text/html` (by `q`, then by order); no `Accept`, `*/*` or a tie is HTML.
pub fn wants_json(accept: Option<&str>) -> bool {
    let Some(accept) = accept else {
        return false;
    };
    let mut json: Option<f32> = None;
    let mut html: Option<f32> = None;
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        match media.as_str() {
            "application/json" => json = Some(json.map_or(q, |j| j.max(q))),
            "text/html" | "application/xhtml+xml" | "text/*" => {
                html = Some(html.map_or(q, |h| h.max(q)))
            }
            _ => {}
        }
    }
    match (json, html) {
        (Some(j), Some(h)) => j > h,
        (Some(j), None) => j > 0.0,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_picks_json_or_html() {
        let cases = [
            (None, false),
            (Some("*/*"), false),
            (Some("application/json"), true),
            (Some("text/html"), false),
            (
                Some("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
                false,
            ),
            (Some("application/json, text/html;q=0.5"), true),
            (Some("text/html;q=0.4, application/json;q=0.9"), true),
            (Some("application/json;q=0.5, text/html"), false),
            (Some("application/json;q=0"), false),
            (Some("APPLICATION/JSON"), true),
            (Some("text/event-stream"), false),
        ];
        for (accept, want) in cases {
            assert_eq!(wants_json(accept), want, "{accept:?}");
        }
    }
}
