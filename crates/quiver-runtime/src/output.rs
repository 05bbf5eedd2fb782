//! Trimming long tool output (DESIGN.md §3 step 7): the model sees the first `max_output`
//! characters with `has_more` and the call id, and reads the rest with `tool_output`.

use serde::Serialize;

/// The part of an output the model sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Page {
    /// The text of this page.
    pub text: String,
    /// Character offset of the next page, when there is more.
    pub next_offset: Option<usize>,
    /// Characters in the whole output.
    pub total_chars: usize,
}

/// The page of `output` starting at character `offset`, at most `max_chars` long.
pub fn page(output: &str, offset: usize, max_chars: usize) -> Page {
    let total_chars = output.chars().count();
    let text: String = output.chars().skip(offset).take(max_chars).collect();
    let end = offset.saturating_add(max_chars);
    Page {
        text,
        next_offset: (end < total_chars).then_some(end),
        total_chars,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages() {
        let out = "天气".repeat(5);
        assert_eq!(
            page(&out, 0, 4),
            Page {
                text: "天气天气".into(),
                next_offset: Some(4),
                total_chars: 10
            }
        );
        assert_eq!(
            page(&out, 8, 4),
            Page {
                text: "天气".into(),
                next_offset: None,
                total_chars: 10
            }
        );
        assert_eq!(
            page(&out, 20, 4),
            Page {
                text: String::new(),
                next_offset: None,
                total_chars: 10
            }
        );
        assert_eq!(page("short", 0, 4000).next_offset, None);
    }
}
