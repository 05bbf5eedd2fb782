//! Lines of a workflow file's parts, so diagnostics point at the step they are about.

use crate::yaml;

/// The 1-based line of each item of the block list under top-level `key` (`steps:` followed
/// by `- ...` lines), in order. Empty when the list is written in flow style (`[...]`) or the
/// key is absent; callers then fall back to the key's own line.
pub(super) fn list_item_lines(text: &str, key: &str) -> Vec<u64> {
    let Some(key_line) = yaml::key_line(text, 1, key) else {
        return Vec::new();
    };
    let mut items = Vec::new();
    let mut indent: Option<usize> = None;
    for (i, line) in text.lines().enumerate().skip(key_line as usize) {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let this_indent = line.len() - trimmed.len();
        if this_indent == 0 && !trimmed.starts_with('-') {
            break;
        }
        if trimmed == "-" || trimmed.starts_with("- ") {
            match indent {
                None => {
                    indent = Some(this_indent);
                    items.push(i as u64 + 1);
                }
                Some(n) if n == this_indent => items.push(i as u64 + 1),
                Some(_) => {}
            }
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items() {
        let cases: &[(&str, &[u64])] = &[
            (
                "a: 1\nsteps:\n  - id: x\n    tool: t\n    with:\n      - 1\n  - id: y\nout: 2\n",
                &[3, 7],
            ),
            ("steps:\n- a\n# c\n- b\n", &[2, 4]),
            ("steps: [{tool: t}]\n", &[]),
            ("other: 1\n", &[]),
        ];
        for (text, want) in cases {
            assert_eq!(list_item_lines(text, "steps"), *want, "{text}");
        }
    }
}
