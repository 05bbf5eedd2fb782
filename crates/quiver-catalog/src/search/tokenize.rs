//! The analyzer: English words with light stemming, identifiers split into their parts, and
//! Chinese text as jieba words plus CJK character unigrams and bigrams.

use std::sync::LazyLock;

use jieba_rs::Jieba;

use super::stem::stem;

/// The jieba segmenter with its embedded default dictionary, built once (it takes a while).
pub(crate) static JIEBA: LazyLock<Jieba> = LazyLock::new(Jieba::new);

/// Longest text analyzed, in bytes; the rest of a longer text is ignored.
pub(crate) const MAX_TEXT_BYTES: usize = 256 * 1024;

/// Length of the [`Kind::Prefix`] terms of longer words.
const PREFIX: usize = 5;

/// What kind of token a term is; the index weighs kinds differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// A Latin (or other alphabetic or numeric) word, stemmed.
    Word,
    /// A whole identifier made of several parts (`get_weather`, `requests.get`, `getWeather`).
    Compound,
    /// A jieba word of two characters or more.
    CjkWord,
    /// One CJK character.
    CjkUnigram,
    /// Two adjacent CJK characters.
    CjkBigram,
    /// The first characters of a long word, so that `conversion` meets `convert`.
    Prefix,
}

impl Kind {
    /// The prefix that keeps a kind's terms apart from same-looking terms of other kinds.
    pub(crate) fn tag(self) -> &'static str {
        match self {
            Kind::Word | Kind::Compound | Kind::CjkWord => "",
            Kind::CjkUnigram => "\u{1}",
            Kind::CjkBigram => "\u{2}",
            Kind::Prefix => "\u{3}",
        }
    }
}

/// Splits `text` into the terms the search index uses, in text order. The same analyzer runs over
/// documents and queries: lowercased, full-width ASCII folded, English stopwords dropped and
/// words lightly stemmed, identifiers (`get_current_weather`, `getWeather`, `requests.get`) given
/// as their parts plus the whole, and CJK text given as jieba words plus every character and
/// every pair of adjacent characters. Long English words also give their first five letters
/// (`conversion` → `conve`), a weak extra term that lets word families meet.
pub fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    analyze(text, &mut |term, _kind| out.push(term.to_owned()));
    out
}

/// Calls `emit` with each term of `text` (without its kind tag) and its kind.
pub(crate) fn analyze(text: &str, emit: &mut dyn FnMut(&str, Kind)) {
    Analyzer::default().analyze(text, emit);
}

/// The analyzer with buffers that it reuses from one text to the next, so that analyzing many
/// texts allocates little.
#[derive(Debug, Default)]
pub(crate) struct Analyzer {
    /// The text's characters, folded.
    chars: Vec<char>,
    /// The lowercased parts of the identifier at hand, one after the other.
    parts: String,
    /// The end of each part in `parts`.
    part_ends: Vec<usize>,
    /// A term being put together: a stem, a pair of characters, a whole identifier.
    term: String,
    /// A name lowercased as a whole.
    whole: String,
}

impl Analyzer {
    /// Calls `emit` with each term of `text` (without its kind tag) and its kind.
    pub(crate) fn analyze(&mut self, text: &str, emit: &mut dyn FnMut(&str, Kind)) {
        let text = clip(text, MAX_TEXT_BYTES);
        let Analyzer {
            chars,
            parts,
            part_ends,
            term,
            ..
        } = self;
        chars.clear();
        chars.extend(text.chars().map(fold));
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if is_cjk(c) {
                let start = i;
                while i < chars.len() && is_cjk(chars[i]) {
                    i += 1;
                }
                analyze_cjk(&chars[start..i], term, emit);
            } else if is_alnum(c) {
                let start = i;
                i += 1;
                while i < chars.len() {
                    if is_alnum(chars[i]) {
                        i += 1;
                    } else if is_connector(chars[i])
                        && i + 1 < chars.len()
                        && is_alnum(chars[i + 1])
                    {
                        i += 2;
                    } else {
                        break;
                    }
                }
                analyze_identifier(&chars[start..i], parts, part_ends, term, emit);
            } else {
                i += 1;
            }
        }
    }

    /// Analyzes a name: its parts as in [`Analyzer::analyze`], plus the whole name lowercased
    /// as one term (`Weather Pro` → `weather pro`) when that is not already one of them.
    pub(crate) fn analyze_name(&mut self, name: &str, emit: &mut dyn FnMut(&str, Kind)) {
        let mut whole = std::mem::take(&mut self.whole);
        whole.clear();
        whole.extend(
            clip(name, MAX_TEXT_BYTES)
                .chars()
                .map(fold)
                .flat_map(char::to_lowercase),
        );
        let trimmed = whole.trim();
        let mut seen = false;
        self.analyze(name, &mut |term, kind| {
            seen |= term == trimmed;
            emit(term, kind);
        });
        if !seen
            && !trimmed.is_empty()
            && !trimmed.chars().any(is_cjk)
            && trimmed.chars().any(is_alnum)
        {
            emit(trimmed, Kind::Compound);
        }
        self.whole = whole;
    }
}

/// Analyzes a query like [`analyze`], also telling for each term whether it stands in a negated
/// part of a Chinese clause ("不用二维码，就要个短链接": 二维码 is what the user does not want).
/// Such a part runs from a negation word (不用, 不要, 不是, 别, 先别, a lone 不 before a word...)
/// to the end of its clause.
pub(crate) fn analyze_query(query: &str, emit: &mut dyn FnMut(&str, Kind, bool)) {
    let query = clip(query, MAX_TEXT_BYTES);
    let negated = negated_ranges(query);
    let mut analyzer = Analyzer::default();
    let mut at = 0;
    for (start, end) in negated {
        if start > at {
            analyzer.analyze(&query[at..start], &mut |t, k| emit(t, k, false));
        }
        analyzer.analyze(&query[start..end], &mut |t, k| emit(t, k, true));
        at = end;
    }
    if at < query.len() {
        analyzer.analyze(&query[at..], &mut |t, k| emit(t, k, false));
    }
}

/// Words after which the rest of a clause is what the user does not want.
const NEGATIONS: &[&str] = &[
    "不",
    "不用",
    "不要",
    "不需要",
    "无需",
    "不必",
    "没必要",
    "不想",
    "不是",
    "并非",
    "而不是",
    "不再",
    "不看",
    "别",
    "先别",
    "别光",
    "别看",
    "别再",
    "甭",
];

fn is_clause_end(c: char) -> bool {
    matches!(
        c,
        '，' | '。' | '；' | '！' | '？' | '、' | '：' | '…' | ',' | ';' | '!' | '?' | '\n' | '\r'
    )
}

/// Byte ranges of `query` in negated parts of clauses, in order, not overlapping.
fn negated_ranges(query: &str) -> Vec<(usize, usize)> {
    if !query.chars().any(is_han) {
        return Vec::new();
    }
    let tokens = JIEBA.cut(query, true);
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        if !NEGATIONS.contains(&token.word) {
            continue;
        }
        let Some(next) = tokens.get(i + 1) else {
            continue;
        };
        let next_first = next.word.chars().next().unwrap_or(' ');
        if !(is_han(next_first) || next_first.is_alphanumeric()) {
            continue;
        }
        if token.word == "不" {
            // A-not-A questions (对不对, 充不充) negate nothing.
            let prev_last = i
                .checked_sub(1)
                .and_then(|p| tokens.get(p))
                .and_then(|p| p.word.chars().last());
            if prev_last == Some(next_first) {
                continue;
            }
        }
        let start = token.byte_end;
        let end = query[start..]
            .char_indices()
            .find(|&(_, c)| is_clause_end(c))
            .map_or(query.len(), |(o, _)| start + o);
        if end <= start {
            continue;
        }
        match ranges.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => ranges.push((start, end)),
        }
    }
    ranges
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub(crate) fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Folds full-width ASCII and the ideographic space to their ASCII forms.
fn fold(c: char) -> char {
    match c {
        '\u{3000}' => ' ',
        '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        _ => c,
    }
}

/// Whether `c` is a CJK ideograph, kana or Hangul syllable.
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30FF}'
        | '\u{3400}'..='\u{4DBF}'
        | '\u{4E00}'..='\u{9FFF}'
        | '\u{AC00}'..='\u{D7AF}'
        | '\u{F900}'..='\u{FAFF}'
        | '\u{20000}'..='\u{2FA1F}')
}

fn is_alnum(c: char) -> bool {
    c.is_alphanumeric() && !is_cjk(c)
}

fn is_connector(c: char) -> bool {
    matches!(c, '_' | '.' | '-' | '/' | ':')
}

/// Jieba words (search mode) of two or more characters, every character and every pair.
/// `term` is a buffer.
fn analyze_cjk(run: &[char], term: &mut String, emit: &mut dyn FnMut(&str, Kind)) {
    let mut buf = [0u8; 8];
    for &c in run {
        if !is_cjk_stop(c) {
            emit(c.encode_utf8(&mut buf), Kind::CjkUnigram);
        }
    }
    for w in run.windows(2) {
        term.clear();
        term.push(w[0]);
        term.push(w[1]);
        emit(term, Kind::CjkBigram);
    }
    if run.len() >= 2 && run.iter().any(|&c| is_han(c)) {
        term.clear();
        term.extend(run);
        for token in JIEBA.cut_for_search(term, true) {
            if token.word.chars().count() >= 2 {
                emit(token.word, Kind::CjkWord);
            }
        }
    }
}

fn is_han(c: char) -> bool {
    matches!(c,
        '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}' | '\u{20000}'..='\u{2FA1F}')
}

/// Function characters that carry no topic on their own (as unigrams only).
fn is_cjk_stop(c: char) -> bool {
    matches!(
        c,
        '的' | '了'
            | '吗'
            | '呢'
            | '吧'
            | '啊'
            | '呀'
            | '么'
            | '嘛'
            | '哦'
            | '是'
            | '我'
            | '你'
            | '他'
            | '她'
            | '它'
            | '们'
            | '在'
            | '和'
            | '与'
            | '及'
            | '或'
            | '这'
            | '那'
            | '就'
            | '也'
            | '都'
            | '还'
            | '个'
            | '一'
            | '把'
            | '被'
            | '给'
            | '让'
            | '着'
            | '之'
            | '其'
    )
}

/// An identifier-like run: alphanumerics joined by `_ . - / :`. `parts`, `part_ends` and `term`
/// are buffers.
fn analyze_identifier(
    run: &[char],
    parts: &mut String,
    part_ends: &mut Vec<usize>,
    term: &mut String,
    emit: &mut dyn FnMut(&str, Kind),
) {
    parts.clear();
    part_ends.clear();
    for segment in run.split(|&c| is_connector(c)) {
        split_case(segment, parts, part_ends);
    }
    let mut start = 0;
    for &end in part_ends.iter() {
        let part = &parts[start..end];
        start = end;
        if is_stopword(part) {
            continue;
        }
        stem(part, term);
        if !term.is_empty() {
            emit(term, Kind::Word);
        }
        if part.len() > PREFIX && part.bytes().all(|b| b.is_ascii_lowercase()) {
            emit(&part[..PREFIX], Kind::Prefix);
        }
    }
    if part_ends.len() > 1 {
        term.clear();
        term.extend(run.iter().flat_map(|c| c.to_lowercase()));
        emit(term, Kind::Compound);
    }
}

/// Splits a run of alphanumerics at camelCase humps and letter/digit boundaries: appends each
/// part lowercased to `parts`, and where it ends to `part_ends`.
fn split_case(segment: &[char], parts: &mut String, part_ends: &mut Vec<usize>) {
    let mut push = |chars: &[char]| {
        parts.extend(chars.iter().flat_map(|c| c.to_lowercase()));
        part_ends.push(parts.len());
    };
    let mut start = 0;
    for i in 1..segment.len() {
        let (p, c) = (segment[i - 1], segment[i]);
        let next_lower = segment.get(i + 1).is_some_and(|n| n.is_lowercase());
        let boundary = (p.is_lowercase() && c.is_uppercase())
            || (p.is_uppercase() && c.is_uppercase() && next_lower)
            || (p.is_alphabetic() && c.is_numeric())
            || (p.is_numeric() && c.is_alphabetic());
        if boundary {
            push(&segment[start..i]);
            start = i;
        }
    }
    if start < segment.len() {
        push(&segment[start..]);
    }
}

/// A short English stopword list: words that say nothing about what a tool does.
fn is_stopword(word: &str) -> bool {
    matches!(
        word,
        "a" | "an"
            | "the"
            | "and"
            | "or"
            | "of"
            | "to"
            | "in"
            | "on"
            | "at"
            | "by"
            | "for"
            | "with"
            | "from"
            | "as"
            | "is"
            | "are"
            | "was"
            | "were"
            | "be"
            | "been"
            | "being"
            | "it"
            | "its"
            | "this"
            | "that"
            | "these"
            | "those"
            | "i"
            | "me"
            | "my"
            | "we"
            | "our"
            | "you"
            | "your"
            | "he"
            | "she"
            | "his"
            | "her"
            | "they"
            | "them"
            | "their"
            | "can"
            | "could"
            | "would"
            | "should"
            | "will"
            | "shall"
            | "may"
            | "might"
            | "must"
            | "do"
            | "does"
            | "did"
            | "have"
            | "has"
            | "had"
            | "please"
            | "s"
            | "t"
            | "if"
            | "then"
            | "so"
            | "but"
            | "not"
            | "no"
            | "into"
            | "about"
            | "some"
            | "any"
            | "which"
            | "what"
            | "who"
            | "whom"
            | "how"
            | "when"
            | "where"
            | "there"
            | "here"
            | "also"
            | "than"
            | "too"
            | "very"
            | "just"
            | "am"
            | "us"
            | "him"
            | "e"
            | "g"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_identifiers() {
        let t = tokenize("getCurrentWeather");
        assert!(t.contains(&"weather".to_owned()), "{t:?}");
        assert!(t.contains(&"getcurrentweather".to_owned()), "{t:?}");
        let t = tokenize("get_current_weather");
        assert_eq!(
            t,
            [
                "get",
                "current",
                "curre",
                "weather",
                "weath",
                "get_current_weather"
            ]
        );
        let t = tokenize("HTTPServer requests.get");
        assert!(t.contains(&"http".to_owned()), "{t:?}");
        assert!(t.contains(&"server".to_owned()), "{t:?}");
        assert!(t.contains(&"requests.get".to_owned()), "{t:?}");
    }

    #[test]
    fn chinese_words_and_ngrams() {
        let t = tokenize("查询天气预报");
        assert!(t.contains(&"天气".to_owned()), "{t:?}");
        assert!(t.contains(&"气预".to_owned()), "{t:?}");
        assert!(t.contains(&"天".to_owned()), "{t:?}");
    }

    #[test]
    fn negated_parts_of_chinese_clauses() {
        let parts = |q: &'static str| -> Vec<&'static str> {
            negated_ranges(q)
                .into_iter()
                .map(|(s, e)| &q[s..e])
                .collect()
        };
        assert_eq!(parts("不用二维码，就要个短点的链接"), ["二维码"]);
        assert_eq!(parts("先别充，看看话费还有多少"), ["充"]);
        assert_eq!(parts("这笔自己掏的不报销，记本子上"), ["报销"]);
        // A-not-A questions and question particles negate nothing.
        assert!(parts("下载的iso校验下sha256对不对").is_empty());
        assert!(parts("服务器现在能进不 mc.example.cn").is_empty());
        assert!(parts("help me, not that").is_empty());
    }

    #[test]
    fn full_width_is_folded() {
        assert_eq!(tokenize("ＪＳＯＮ"), tokenize("json"));
    }
}
