//! The `tool_search` index: bilingual (English and Chinese) BM25F over the fields of packages,
//! tools, agents, workflows, skills and built-in tools.
//!
//! Pure: no I/O. Build one [`SearchIndex`] per catalog snapshot; it is immutable and shared.

mod bm25;
mod stem;
mod tokenize;

pub use bm25::SearchIndex;
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
