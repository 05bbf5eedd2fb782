//! Token counts of what a turn sends before the conversation: the system prompt and the tool
//! definitions, with a real BPE tokenizer (`o200k_base`, the GPT-4o family's, bundled with
//! tiktoken-rs; other models' tokenizers differ by a few percent).

use std::sync::OnceLock;

use serde_json::json;
use tiktoken_rs::CoreBPE;

use crate::provider::ToolSpec;

fn bpe() -> Option<&'static CoreBPE> {
    static BPE: OnceLock<Option<CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().ok()).as_ref()
}

/// Tokens of `text` (characters / 4 if the tokenizer could not load).
pub fn count(text: &str) -> usize {
    match bpe() {
        Some(bpe) => bpe.encode_ordinary(text).len(),
        None => text.chars().count().div_ceil(4),
    }
}

/// Tokens of `tools` as an OpenAI `tools` array.
pub fn tools(tools: &[ToolSpec]) -> usize {
    if tools.is_empty() {
        return 0;
    }
    let array: Vec<_> = tools
        .iter()
        .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}))
        .collect();
    count(&serde_json::Value::Array(array).to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_are_bpe_not_characters() {
        assert_eq!(super::count("hello world"), 2);
        let zh = super::count("北京明天多少度");
        assert!(zh > 1 && zh < 7, "{zh}");
    }
}
