//! `/audit`: the audit log, newest first, with filters kept in the URL, cursor paging
//! (`before=<id>`) and exports as JSONL and CSV.

use askama::Template;
use axum::Extension;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use quiver_store::{AuditKind, AuditQuery, AuditRecord};
use serde::{Deserialize, Serialize};

use crate::pages::{self, Chrome};
use crate::server::{Ctx, Who};
use crate::{ConsoleError, escape_invisible};

/// Rows per page, unless the URL asks for up to [`MAX_PAGE`].
const PAGE: usize = 100;
/// The most rows one page shows.
const MAX_PAGE: usize = 500;
/// Rows in one export at most.
const MAX_EXPORT: usize = 100_000;

/// The filters, as the URL carries them.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub(crate) struct Filters {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// `rows`: the table alone (the live tail re-fetches it).
    #[serde(default, skip_serializing)]
    pub part: Option<String>,
}

fn non_empty(value: &Option<String>) -> Option<String> {
    value
        .as_ref()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

impl Filters {
    /// The store's query for these filters, at most `limit` rows.
    pub fn query(&self, limit: usize) -> AuditQuery {
        AuditQuery {
            session: non_empty(&self.session),
            tool: non_empty(&self.tool),
            kind: non_empty(&self.kind).map(AuditKind::from),
            before_id: self.before,
            limit: Some(limit),
            ..AuditQuery::default()
        }
    }

    /// The URL query of these filters with the cursor `before` (for "older").
    pub fn with_before(&self, before: Option<i64>) -> String {
        let mut pairs = Vec::new();
        for (key, value) in [
            ("session", non_empty(&self.session)),
            ("tool", non_empty(&self.tool)),
            ("kind", non_empty(&self.kind)),
            ("limit", self.limit.map(|l| l.to_string())),
            ("before", before.map(|b| b.to_string())),
        ] {
            if let Some(value) = value {
                pairs.push(format!("{key}={}", url_encode(&value)));
            }
        }
        pairs.join("&")
    }
}

/// Percent-encodes a query value (everything but unreserved characters).
pub(crate) fn url_encode(value: &str) -> String {
    let mut out = String::new();
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// One row, as the page shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    pub id: i64,
    pub at: String,
    pub kind: String,
    pub session: String,
    pub tool: String,
    pub who: String,
    pub status: String,
    pub decisions: String,
}

fn row(record: &AuditRecord) -> Row {
    let e = &record.entry;
    Row {
        id: record.id,
        at: pages::time_text(e.time),
        kind: e.kind.to_string(),
        session: escape_invisible(&e.session),
        tool: escape_invisible(e.tool.as_deref().or(e.skill.as_deref()).unwrap_or("")),
        who: escape_invisible(e.principal["user_id"].as_str().unwrap_or("")),
        status: e.status.to_string(),
        decisions: escape_invisible(
            &e.decisions
                .iter()
                .map(|d| format!("{}: {}", d.decision, d.reason))
                .collect::<Vec<_>>()
                .join("; "),
        ),
    }
}

/// A CSV field, quoted when needed.
pub(crate) fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

#[derive(Template)]
#[template(path = "audit.html")]
struct AuditPage {
    chrome: Chrome,
    filters: Filters,
    rows: Vec<Row>,
    older: Option<String>,
    export: String,
    live: bool,
}

#[derive(Template)]
#[template(path = "audit_table.html")]
struct AuditRows {
    rows: Vec<Row>,
    export: String,
    live: bool,
}

async fn fetch(ctx: &Ctx, query: AuditQuery) -> Result<Vec<AuditRecord>, ConsoleError> {
    pages::with_admin(ctx, move |admin| Ok(admin.audit(&query)?)).await
}

/// `GET /audit`.
pub(crate) async fn list(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    headers: HeaderMap,
    Query(filters): Query<Filters>,
) -> Result<Response, ConsoleError> {
    let page = filters.limit.unwrap_or(PAGE).clamp(1, MAX_PAGE);
    let records = fetch(&ctx, filters.query(page)).await?;
    if pages::wants_json(&headers) {
        return Ok(pages::json(&records));
    }
    let older = (records.len() == page)
        .then(|| records.last().map(|r| filters.with_before(Some(r.id))))
        .flatten();
    let rows = records.iter().map(row).collect();
    let export = filters.with_before(None);
    // The newest page follows the log live; a page further back stays put.
    let live = filters.before.is_none();
    if filters.part.as_deref() == Some("rows") {
        return pages::html(&AuditRows { rows, export, live });
    }
    let chrome = pages::chrome(&ctx, &who).await?;
    pages::html(&AuditPage {
        chrome,
        filters,
        rows,
        older,
        export,
        live,
    })
}

/// `GET /audit/export?format=jsonl|csv`: the filtered records, at most 100,000.
pub(crate) async fn export(
    State(ctx): State<Ctx>,
    Query(filters): Query<Filters>,
) -> Result<Response, ConsoleError> {
    let records = fetch(&ctx, filters.query(MAX_EXPORT)).await?;
    match filters.format.as_deref().unwrap_or("jsonl") {
        "jsonl" => {
            let mut body = String::new();
            for record in &records {
                body.push_str(&serde_json::to_string(record).unwrap_or_default());
                body.push('\n');
            }
            Ok((
                [
                    (header::CONTENT_TYPE, "application/x-ndjson; charset=utf-8"),
                    (
                        header::CONTENT_DISPOSITION,
                        "attachment; filename=\"audit.jsonl\"",
                    ),
                ],
                body,
            )
                .into_response())
        }
        "csv" => {
            let mut body = String::from("id,time,kind,session,tool,who,status,decisions\n");
            for record in &records {
                let r = row(record);
                let fields = [
                    r.id.to_string(),
                    r.at,
                    r.kind,
                    r.session,
                    r.tool,
                    r.who,
                    r.status,
                    r.decisions,
                ];
                body.push_str(
                    &fields
                        .iter()
                        .map(|f| csv_field(f))
                        .collect::<Vec<_>>()
                        .join(","),
                );
                body.push('\n');
            }
            Ok((
                [
                    (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
                    (
                        header::CONTENT_DISPOSITION,
                        "attachment; filename=\"audit.csv\"",
                    ),
                ],
                body,
            )
                .into_response())
        }
        other => Err(ConsoleError::BadRequest(format!(
            "format must be `jsonl` or `csv`, not `{other}`"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_and_urls() {
        let cases = [
            ("plain", "plain"),
            ("a,b", "\"a,b\""),
            ("say \"hi\"", "\"say \"\"hi\"\"\""),
            ("l1\nl2", "\"l1\nl2\""),
        ];
        for (text, want) in cases {
            assert_eq!(csv_field(text), want);
        }
        let filters = Filters {
            session: Some("s 1".into()),
            tool: Some(" ".into()),
            kind: Some("call".into()),
            ..Filters::default()
        };
        assert_eq!(
            filters.with_before(Some(7)),
            "session=s%201&kind=call&before=7"
        );
        let paged = Filters {
            limit: Some(500),
            ..Filters::default()
        };
        assert_eq!(paged.with_before(Some(3)), "limit=500&before=3");
        assert_eq!(url_encode("群&="), "%E7%BE%A4%26%3D");
    }
}
