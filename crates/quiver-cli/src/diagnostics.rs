//! Rendering package diagnostics: miette reports with a source snippet for people, JSON for
//! scripts. Data goes to stdout, diagnostics to stderr.

use std::path::Path;

use miette::{LabeledSpan, MietteDiagnostic, NamedSource, Report};
use quiver_package::{Diagnostic, Severity};

/// Renders one diagnostic as a miette report (with the offending line when the file is readable).
pub fn to_report(diag: &Diagnostic, base: &Path) -> Report {
    // The file's name, the message and the source lines are the package's text: shown escaped.
    let shown = crate::shown(
        &diag
            .file
            .strip_prefix(base)
            .unwrap_or(&diag.file)
            .display()
            .to_string(),
    )
    .into_owned();
    let severity = match diag.severity {
        Severity::Error => miette::Severity::Error,
        Severity::Warning => miette::Severity::Warning,
        Severity::Info => miette::Severity::Advice,
    };
    let mut m = MietteDiagnostic::new(crate::shown_lines(&diag.message))
        .with_code(diag.code)
        .with_severity(severity);
    if let Some(help) = &diag.help {
        m = m.with_help(help.clone());
    }
    let source = diag
        .line
        .and_then(|_| std::fs::read_to_string(&diag.file).ok());
    match (source, diag.line) {
        (Some(text), Some(line)) => {
            let column = escaped_column(&text, line, diag.column.unwrap_or(1));
            let text = crate::shown_lines(&text);
            let offset = offset_of(&text, line, column);
            let len = text[offset..]
                .find('\n')
                .unwrap_or(text.len() - offset)
                .max(1)
                .min(text.len() - offset);
            m = m.with_label(LabeledSpan::at(offset..offset + len, "here"));
            Report::new(m).with_source_code(NamedSource::new(shown, text))
        }
        // The file is gone (a refused install's staging folder): its name and line still say where.
        (None, Some(line)) => Report::new(m.with_url(format!("{shown}:{line}"))),
        _ => Report::new(m.with_url(shown)),
    }
}

/// The 1-based `column` of `line` in `text` once the line is escaped for the terminal (each
/// hidden character before it takes several characters).
fn escaped_column(text: &str, line: u32, column: u32) -> u32 {
    let Some(source) = text.split('\n').nth(line.saturating_sub(1) as usize) else {
        return column;
    };
    let before: String = source
        .chars()
        .take(column.saturating_sub(1) as usize)
        .collect();
    u32::try_from(crate::shown(&before).chars().count()).map_or(column, |n| n.saturating_add(1))
}

/// Byte offset of 1-based `line`, `column` (in characters) in `text`, clamped to its end.
fn offset_of(text: &str, line: u32, column: u32) -> usize {
    let mut offset = 0;
    for _ in 1..line {
        match text[offset..].find('\n') {
            Some(i) => offset += i + 1,
            None => return text.len(),
        }
    }
    let rest = &text[offset..];
    let line_end = rest.find('\n').unwrap_or(rest.len());
    let col = rest[..line_end]
        .char_indices()
        .nth(column.saturating_sub(1) as usize)
        .map_or(line_end, |(i, _)| i);
    offset + col
}

/// Prints diagnostics to stderr (human) or a JSON array to stdout.
pub fn emit(diags: &[Diagnostic], json: bool, base: &Path) {
    if json {
        let value = serde_json::to_string_pretty(diags).unwrap_or_else(|_| "[]".into());
        crate::out(&value);
        return;
    }
    for d in diags {
        crate::err(&format!("{:?}", to_report(d, base)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets() {
        let text = "a: 1\nbé: 2\nc";
        assert_eq!(offset_of(text, 1, 1), 0);
        assert_eq!(offset_of(text, 2, 1), 5);
        assert_eq!(offset_of(text, 2, 3), 8);
        assert_eq!(offset_of(text, 3, 9), text.len());
        assert_eq!(offset_of(text, 9, 1), text.len());
    }
}
