//! A light English stemmer: plural and verb suffixes only (`cities` → `city`, `created` and
//! `creates` → `creat`, `running` → `run`), so that a query's word forms meet a description's.

/// Writes the stem of the lowercase `word` into `out` (cleared first). Words that are not plain
/// ASCII letters, or are short, are kept as they are.
pub(crate) fn stem(word: &str, out: &mut String) {
    out.clear();
    if word.len() <= 3 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        out.push_str(word);
        return;
    }
    let mut w: &str = word;
    let mut owned: String;

    // Plurals and third person singular.
    if let Some(base) = w.strip_suffix("ies").filter(|b| b.len() >= 2) {
        owned = format!("{base}y");
        w = &owned;
    } else if w.ends_with('s')
        && !w.ends_with("ss")
        && !w.ends_with("us")
        && !w.ends_with("is")
        && w.len() > 3
    {
        w = &w[..w.len() - 1];
    }

    // Past tense and gerund.
    if let Some(base) = w.strip_suffix("ied").filter(|b| b.len() >= 2) {
        owned = format!("{base}y");
        w = &owned;
    } else if let Some(base) = w
        .strip_suffix("ing")
        .or_else(|| w.strip_suffix("ed").filter(|_| !w.ends_with("eed")))
        .filter(|b| b.len() >= 3 && has_vowel(b))
    {
        w = undouble(base);
    }

    // A final silent `e`, so that `create`, `creates`, `created` and `creating` meet.
    if w.len() > 3 && w.ends_with('e') && !w.ends_with("ee") {
        w = &w[..w.len() - 1];
    }
    out.push_str(w);
}

fn has_vowel(s: &str) -> bool {
    s.bytes()
        .any(|b| matches!(b, b'a' | b'e' | b'i' | b'o' | b'u' | b'y'))
}

/// `runn` → `run`, `stopp` → `stop`, but `fill` and `pass` stay.
fn undouble(s: &str) -> &str {
    let b = s.as_bytes();
    let n = b.len();
    if n >= 3
        && b[n - 1] == b[n - 2]
        && !matches!(
            b[n - 1],
            b'l' | b's' | b'z' | b'a' | b'e' | b'i' | b'o' | b'u'
        )
    {
        &s[..n - 1]
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::stem;

    fn s(w: &str) -> String {
        let mut out = String::new();
        stem(w, &mut out);
        out
    }

    #[test]
    fn forms_meet() {
        for group in [
            &["city", "cities"][..],
            &["create", "creates", "created", "creating"],
            &["run", "running", "runs"],
            &["stop", "stopped", "stopping"],
            &["box", "boxes"],
            &["match", "matches", "matched"],
            &["apply", "applied", "applies"],
            &["cache", "caches", "cached"],
            &["fill", "filled", "fills"],
        ] {
            let first = s(group[0]);
            for w in group {
                assert_eq!(s(w), first, "{w} vs {}", group[0]);
            }
        }
        assert_eq!(s("status"), "status");
        assert_eq!(s("class"), "class");
        assert_eq!(s("string"), "string");
        assert_eq!(s("analysis"), "analysis");
        assert_eq!(s("base64"), "base64");
        assert_eq!(s("über"), "über");
    }
}
