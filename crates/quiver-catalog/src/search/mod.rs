//! The `tool_search` index: bilingual (English and Chinese) BM25F over the fields of packages,
//! tools, agents, workflows, skills and built-in tools, fused with dense retrieval when a
//! sentence-embedding model is installed ([`Semantic`](crate::search::Semantic),
//! [`DenseIndex`](crate::search::DenseIndex), [`fuse`](crate::search::fuse)), optionally with the
//! English booster ([`Booster`](crate::search::Booster)).
//!
//! Build one [`SearchIndex`](crate::search::SearchIndex) (and
//! [`DenseIndex`](crate::search::DenseIndex)) per catalog snapshot; they are immutable and
//! shared. BM25 is pure; the dense index reads and writes its vector cache file.

mod bm25;
mod hybrid;
mod stem;
mod tokenize;

pub use bm25::SearchIndex;
pub use hybrid::{
    BOOSTED_WEIGHT, Booster, DEFAULT_WEIGHT, DenseIndex, Method, Semantic, dense_text, fuse,
    has_cjk,
};
pub use tokenize::tokenize;

/// One searchable entry: a package, a tool, an agent, a workflow, a skill or a built-in tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchDoc {
    /// The name the model calls or reads it by: `get_current_weather`, `weather.forecast`,
    /// `requests.get`, `weather/cities`.
    pub name: String,
    /// The summary, or the first sentence of the description.
    pub summary: String,
    /// Every description part joined (when to use, input rules, examples...); may repeat the
    /// summary.
    pub description: String,
    /// The "when not to use" text. It names other tools, so it is weighed very low.
    pub when_not_to_use: String,
    /// Trigger phrases.
    pub triggers: Vec<String>,
    /// Example user requests that should find it.
    pub examples: Vec<String>,
    /// Requests that must not find it first (dense retrieval ranks it lower for requests
    /// closer to one of these than to the item itself).
    pub negative_examples: Vec<String>,
    /// (parameter name, parameter description), nested properties flattened.
    pub params: Vec<(String, String)>,
    /// The owning package's display name and id ("" if none).
    pub package_name: String,
    /// The owning package's description.
    pub package_description: String,
}

/// One search result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchHit {
    /// Index of the document in the `Vec` given to [`SearchIndex::build`].
    pub doc: usize,
    /// Its score; higher is better. Only positive scores are returned.
    pub score: f32,
}

/// The best `k` documents `admit` accepts for `query` by `method`: BM25 from `index`, the
/// cosines of `dense` for the dense methods, both fused ([`fuse`]) for the hybrid ones. Without
/// a dense index every method is BM25; a `+minilm` method over an index without the booster's
/// vectors is its plain form ([`DenseIndex::dense_term`]).
pub fn rank(
    method: Method,
    index: &SearchIndex,
    dense: Option<&DenseIndex>,
    query: &str,
    k: usize,
    admit: &dyn Fn(usize) -> bool,
) -> Vec<SearchHit> {
    match (method, dense) {
        (Method::Dense | Method::DenseMiniLm, Some(dense)) => {
            dense.search(query, k, method.boosted(), admit)
        }
        (Method::Hybrid | Method::HybridMiniLm, Some(dense)) => {
            let (cosines, weight) = dense.dense_term(query, method.boosted());
            fuse(&index.scores(query), &cosines, weight, k, admit)
        }
        _ => index.search(query, k, admit),
    }
}

/// The best `k` hits, best first; equal scores go to the lower doc index.
pub(crate) fn top_k(mut hits: Vec<SearchHit>, k: usize) -> Vec<SearchHit> {
    let order = |a: &SearchHit, b: &SearchHit| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc));
    if k == 0 {
        return Vec::new();
    }
    if hits.len() > k {
        hits.select_nth_unstable_by(k - 1, order);
        hits.truncate(k);
    }
    hits.sort_unstable_by(order);
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(name: &str, summary: &str, description: &str) -> SearchDoc {
        SearchDoc {
            name: name.to_owned(),
            summary: summary.to_owned(),
            description: description.to_owned(),
            ..SearchDoc::default()
        }
    }

    fn catalog() -> Vec<SearchDoc> {
        let mut weather = doc(
            "weather.forecast",
            "查询城市天气预报和气温",
            "查询指定城市今天和未来几天的天气预报，包括最高最低气温、降水概率和风力。",
        );
        weather.params = vec![
            ("city".into(), "城市名称".into()),
            ("date".into(), "日期".into()),
        ];
        vec![
            doc(
                "translate_text",
                "Translate text between languages",
                "Translates text into another language.",
            ),
            doc(
                "send_email",
                "Send an email",
                "Sends an email message to one or more recipients.",
            ),
            doc(
                "calculator.evaluate",
                "计算数学表达式",
                "计算加减乘除等数学表达式的结果。",
            ),
            doc(
                "set_reminder",
                "设置提醒",
                "在指定的时间提醒用户做某件事，比如开会或吃药。",
            ),
            weather,
            doc(
                "get_stock_price",
                "Get the current stock price",
                "Returns the latest stock price for a ticker symbol.",
            ),
            doc("music.play", "播放音乐", "播放歌曲、歌单或电台。"),
        ]
    }

    #[test]
    fn colloquial_chinese_finds_the_weather_tool() {
        let index = SearchIndex::build(catalog());
        for q in ["北京明天多少度", "明天要带伞吗 北京", "上海这周天气怎么样"]
        {
            let hits = index.search(q, 3, &|_| true);
            assert_eq!(hits.first().map(|h| h.doc), Some(4), "{q}: {hits:?}");
        }
    }

    #[test]
    fn english_and_mixed_queries() {
        let index = SearchIndex::build(catalog());
        let top = |q: &str| index.search(q, 1, &|_| true).first().map(|h| h.doc);
        assert_eq!(top("what's AAPL trading at? stock prices please"), Some(5));
        assert_eq!(top("translate this sentence to French"), Some(0));
        assert_eq!(top("帮我 send 一封 email 给老板"), Some(1));
        assert_eq!(top("weather forecast"), Some(4));
    }

    #[test]
    fn index_is_send_and_sync() {
        fn shared<T: Send + Sync>() {}
        shared::<SearchIndex>();
    }

    #[test]
    fn admit_k_and_ties() {
        let docs = vec![
            doc("a", "same words", ""),
            doc("b", "same words", ""),
            doc("c", "other", ""),
        ];
        let index = SearchIndex::build(docs);
        assert_eq!(index.len(), 3);
        assert!(!index.is_empty());
        let hits = index.search("same words", 10, &|_| true);
        assert_eq!(hits.iter().map(|h| h.doc).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(hits[0].score, hits[1].score);
        let hits = index.search("same words", 10, &|d| d != 0);
        assert_eq!(hits.iter().map(|h| h.doc).collect::<Vec<_>>(), [1]);
        assert_eq!(index.search("same words", 1, &|_| true).len(), 1);
        assert!(index.search("same words", 0, &|_| true).is_empty());
        assert!(index.search("nothing matches", 5, &|_| true).is_empty());
        assert!(
            SearchIndex::build(Vec::new())
                .search("x", 5, &|_| true)
                .is_empty()
        );
    }

    #[test]
    fn when_not_to_use_does_not_attract() {
        let mut short = doc(
            "shorten_url",
            "生成短链接",
            "把长网址压缩成短链接，方便分享。",
        );
        short.when_not_to_use = "要生成二维码图片，用 generate_qr_code。".into();
        let qr = doc(
            "generate_qr_code",
            "生成二维码",
            "把文字或网址生成可扫描的二维码图片。",
        );
        let index = SearchIndex::build(vec![short, qr]);
        let hits = index.search("做个二维码", 2, &|_| true);
        assert_eq!(hits.iter().map(|h| h.doc).collect::<Vec<_>>(), [1]);
        // The negated part of a query does not count either.
        let hits = index.search("不用二维码，就要短链接", 2, &|_| true);
        assert_eq!(hits.first().map(|h| h.doc), Some(0));
    }

    #[test]
    fn similar_pairs_finds_overlapping_descriptions() {
        let docs = vec![
            doc(
                "get_weather",
                "Get the current weather for a city",
                "Returns temperature, wind and rain for a city.",
            ),
            doc(
                "weather_now",
                "Get the current weather for a city",
                "Returns temperature, wind and rain for a city.",
            ),
            doc(
                "send_email",
                "Send an email",
                "Sends an email message to recipients.",
            ),
            doc("查天气", "查询城市天气", "查询城市今天的天气和气温"),
            doc("天气查询", "查询城市天气", "查询城市今天的天气和气温"),
        ];
        let index = SearchIndex::build(docs);
        let pairs = index.similar_pairs(&[4, 3, 2, 1, 0, 0, 99], 0.7);
        let ids: Vec<(usize, usize)> = pairs.iter().map(|&(i, j, _)| (i, j)).collect();
        assert_eq!(ids, [(0, 1), (3, 4)]);
        assert!(pairs.iter().all(|&(_, _, s)| s > 0.99 && s <= 1.0));
        assert!(index.similar_pairs(&[0, 2], 0.7).is_empty());
        assert!(index.similar_pairs(&[], 0.7).is_empty());
    }

    #[test]
    fn odd_inputs_never_panic() {
        let mut odd: Vec<String> = vec![
            String::new(),
            " ".into(),
            "\0\u{1}\u{2}\u{3}".into(),
            "😀🎉👍🏽👨‍👩‍👧".into(),
            "Ａ１＿＿ｂ．．／／".into(),
            "____----....////::::".into(),
            "_a_ .b. -c- /d/".into(),
            "ǅungla İstanbul ß ﬃ Σσς".into(),
            "\u{200B}\u{FEFF}\u{202E}abc".into(),
            "é́́́́́́".into(),
            "不不不不别别别，，，不".into(),
            "别".into(),
            "不".into(),
            "ぁ한국어カタカナ𠀀𪜀".into(),
            "x".repeat(300_000),
            "天气".repeat(10_000),
            "a_b".repeat(20_000),
            "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789".repeat(1000),
            "😀不用😀".repeat(2_000),
            "\n\r\t".repeat(1000),
        ];
        for i in 0..200u32 {
            // Pseudo-random code points across the planes.
            let s: String = (0..40u32)
                .filter_map(|j| {
                    char::from_u32((i.wrapping_mul(7919) ^ j.wrapping_mul(104_729)) % 0x2FFFF)
                })
                .collect();
            odd.push(s);
        }
        let docs: Vec<SearchDoc> = odd
            .iter()
            .map(|s| SearchDoc {
                name: s.clone(),
                summary: s.clone(),
                description: s.clone(),
                when_not_to_use: s.clone(),
                triggers: vec![s.clone()],
                examples: vec![s.clone()],
                negative_examples: vec![s.clone()],
                params: vec![(s.clone(), s.clone())],
                package_name: s.clone(),
                package_description: s.clone(),
            })
            .chain(catalog())
            .collect();
        let index = SearchIndex::build(docs);
        for q in &odd {
            let _ = tokenize(q);
            let hits = index.search(q, 5, &|_| true);
            assert!(hits.len() <= 5);
            assert!(hits.iter().all(|h| h.score.is_finite() && h.score > 0.0));
        }
        let all: Vec<usize> = (0..index.len()).collect();
        let _ = index.similar_pairs(&all, 0.0);
        let _ = index.similar_pairs(&all, f32::NAN);
    }
}
