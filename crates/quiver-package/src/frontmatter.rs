//! A hand-written frontmatter splitter: `---` fenced YAML at the top of a Markdown file.
//!
//! Accepts a UTF-8 BOM, CRLF line endings, trailing spaces after the fences, and an empty
//! frontmatter. The YAML text is returned verbatim (CRLF normalised to LF) together with the
//! line it starts on, so parse errors can be mapped back to the file.

use thiserror::Error;

/// A Markdown file split into its frontmatter and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split<'a> {
    /// The YAML between the fences, without the fences.
    pub yaml: std::borrow::Cow<'a, str>,
    /// The 1-based line of the file on which the YAML starts.
    pub yaml_line: u64,
    /// The body after the closing fence.
    pub body: &'a str,
    /// The 1-based line of the file on which the body starts.
    pub body_line: u64,
}

/// Why a file has no usable frontmatter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SplitError {
    /// The file does not start with a `---` line.
    #[error("the file does not start with a `---` frontmatter fence")]
    Missing,
    /// The opening fence is never closed.
    #[error("the frontmatter opened on line 1 is never closed by a `---` line")]
    Unclosed,
}

/// Splits `text` into frontmatter and body.
pub fn split(text: &str) -> Result<Split<'_>, SplitError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = LineIter {
        rest: text,
        offset: 0,
    };
    let first = lines.next().ok_or(SplitError::Missing)?;
    if !is_fence(first.content) {
        return Err(SplitError::Missing);
    }
    let yaml_start = first.end;
    let mut line_no: u64 = 1;
    for line in lines {
        line_no += 1;
        if is_fence(line.content) {
            let raw = &text[yaml_start..line.start];
            let yaml = if raw.contains('\r') {
                std::borrow::Cow::Owned(raw.replace("\r\n", "\n"))
            } else {
                std::borrow::Cow::Borrowed(raw)
            };
            return Ok(Split {
                yaml,
                yaml_line: 2,
                body: &text[line.end..],
                body_line: line_no + 1,
            });
        }
    }
    Err(SplitError::Unclosed)
}

fn is_fence(line: &str) -> bool {
    line.trim_end_matches([' ', '\t']) == "---"
}

struct Line<'a> {
    content: &'a str,
    start: usize,
    end: usize,
}

/// Iterates lines with their byte offsets; `content` has no line terminator.
struct LineIter<'a> {
    rest: &'a str,
    offset: usize,
}

impl<'a> Iterator for LineIter<'a> {
    type Item = Line<'a>;

    fn next(&mut self) -> Option<Line<'a>> {
        if self.rest.is_empty() {
            return None;
        }
        let start = self.offset;
        let (content, consumed) = match self.rest.find('\n') {
            Some(i) => (&self.rest[..i], i + 1),
            None => (self.rest, self.rest.len()),
        };
        let content = content.strip_suffix('\r').unwrap_or(content);
        self.rest = &self.rest[consumed..];
        self.offset += consumed;
        Some(Line {
            content,
            start,
            end: self.offset,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Expected = Result<(&'static str, &'static str, u64), SplitError>;

    #[test]
    fn cases() {
        let cases: &[(&str, Expected)] = &[
            ("---\nname: a\n---\nbody\n", Ok(("name: a\n", "body\n", 4))),
            (
                "\u{feff}---\nname: a\n---\nbody",
                Ok(("name: a\n", "body", 4)),
            ),
            (
                "---\r\nname: a\r\nx: 1\r\n---\r\nbody\r\n",
                Ok(("name: a\nx: 1\n", "body\r\n", 5)),
            ),
            ("---  \nname: a\n--- \n", Ok(("name: a\n", "", 4))),
            ("---\n---\n", Ok(("", "", 3))),
            ("---\nname: a\n---", Ok(("name: a\n", "", 4))),
            (
                "---\na: '---'\n----\n---\nb",
                Ok(("a: '---'\n----\n", "b", 5)),
            ),
            ("", Err(SplitError::Missing)),
            ("# title\n---\n", Err(SplitError::Missing)),
            (" ---\na: 1\n---\n", Err(SplitError::Missing)),
            ("---\nname: a\n", Err(SplitError::Unclosed)),
            ("---", Err(SplitError::Unclosed)),
        ];
        for (input, want) in cases {
            let got = split(input).map(|s| (s.yaml.into_owned(), s.body, s.body_line));
            let want = want.map(|(y, b, l)| (y.to_owned(), b, l));
            assert_eq!(got, want, "input {input:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_body_is_a_suffix(s in "(---|\r|\n|\u{feff}|a|:| ){0,40}") {
            if let Ok(split) = split(&s) {
                proptest::prop_assert!(s.ends_with(split.body));
                proptest::prop_assert!(split.body_line >= 3);
            }
        }
    }
}
