//! Hidden text: characters a model reads and a person does not see. Pure, text in, findings
//! out.
//!
//! - Unicode tag characters (U+E0000–U+E007F) carry a whole second text invisibly (the "ASCII
//!   smuggling" of prompt injections); the one legitimate use, a subdivision flag (🏴 followed by
//!   tags and a cancel tag), is allowed.
//! - Bidirectional embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) make text
//!   display in another order than it is read (Trojan Source); the marks U+200E and U+200F
//!   that right-to-left writing needs are allowed.
//! - A run of two or more zero-width characters (U+200B–U+200D, U+2060–U+2064, U+FEFF, U+180E)
//!   encodes bits between visible letters; one alone (a joiner in an emoji, a non-joiner in
//!   Persian, a byte-order mark at the start) is allowed.

/// What kind of hidden text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hidden {
    /// Unicode tag characters outside a flag.
    Tags,
    /// A bidirectional embedding, override or isolate.
    Bidi,
    /// Two or more zero-width characters in a row.
    ZeroWidth,
}

impl Hidden {
    /// How the kind reads in a message.
    pub fn describe(self) -> &'static str {
        match self {
            Hidden::Tags => "Unicode tag characters",
            Hidden::Bidi => "a bidirectional control character",
            Hidden::ZeroWidth => "a run of zero-width characters",
        }
    }
}

/// One run of hidden text: its kind, how many characters, and where it starts (line and
/// column from 1, the column in characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HiddenRun {
    /// What it is.
    pub kind: Hidden,
    /// How many hidden characters in the run.
    pub chars: usize,
    /// Line, from 1.
    pub line: u64,
    /// Column, from 1.
    pub column: u64,
}

fn is_tag(c: char) -> bool {
    ('\u{E0000}'..='\u{E007F}').contains(&c)
}

fn is_bidi(c: char) -> bool {
    ('\u{202A}'..='\u{202E}').contains(&c) || ('\u{2066}'..='\u{2069}').contains(&c)
}

fn is_zero_width(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200D}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}' | '\u{180E}')
}

/// Every run of hidden text in `text`.
pub fn hidden_text(text: &str) -> Vec<HiddenRun> {
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let kind = if is_tag(c) {
                Some(Hidden::Tags)
            } else if is_bidi(c) {
                Some(Hidden::Bidi)
            } else if is_zero_width(c) {
                Some(Hidden::ZeroWidth)
            } else {
                None
            };
            let Some(kind) = kind else {
                i += 1;
                continue;
            };
            let same: fn(char) -> bool = match kind {
                Hidden::Tags => is_tag,
                Hidden::Bidi => is_bidi,
                Hidden::ZeroWidth => is_zero_width,
            };
            let end = (i..chars.len())
                .find(|&j| !same(chars[j]))
                .unwrap_or(chars.len());
            let run = end - i;
            let allowed = match kind {
                Hidden::Tags => is_flag(&chars, i, end),
                Hidden::Bidi => false,
                Hidden::ZeroWidth => run < 2,
            };
            if !allowed {
                out.push(HiddenRun {
                    kind,
                    chars: run,
                    line: index as u64 + 1,
                    column: i as u64 + 1,
                });
            }
            i = end;
        }
    }
    out
}

/// Whether the tags `chars[start..end]` are a subdivision flag: after 🏴 (U+1F3F4), printable
/// tags ending with one cancel tag (U+E007F).
fn is_flag(chars: &[char], start: usize, end: usize) -> bool {
    let after_flag = start > 0 && chars[start - 1] == '\u{1F3F4}';
    let body = &chars[start..end];
    after_flag
        && body.len() >= 2
        && body.last() == Some(&'\u{E007F}')
        && body[..body.len() - 1]
            .iter()
            .all(|c| ('\u{E0020}'..='\u{E007E}').contains(c))
}
