//! Tokens: what the scanner hands the parser, with their comment bookkeeping.

use super::{Mark, YResult, crash};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum K {
    Directive,
    DocumentStart,
    DocumentEnd,
    StreamStart,
    StreamEnd,
    BlockSequenceStart,
    BlockMappingStart,
    BlockEnd,
    FlowSequenceStart,
    FlowMappingStart,
    FlowSequenceEnd,
    FlowMappingEnd,
    Key,
    Value,
    BlockEntry,
    FlowEntry,
    Alias,
    Anchor,
    Tag,
    Scalar,
    Comment,
}

impl K {
    /// ruamel's `Token.id`.
    pub(super) fn id(self) -> &'static str {
        match self {
            K::Directive => "<directive>",
            K::DocumentStart => "<document start>",
            K::DocumentEnd => "<document end>",
            K::StreamStart => "<stream start>",
            K::StreamEnd => "<stream end>",
            K::BlockSequenceStart => "<block sequence start>",
            K::BlockMappingStart => "<block mapping start>",
            K::BlockEnd => "<block end>",
            K::FlowSequenceStart => "[",
            K::FlowMappingStart => "{",
            K::FlowSequenceEnd => "]",
            K::FlowMappingEnd => "}",
            K::Key => "?",
            K::Value => ":",
            K::BlockEntry => "-",
            K::FlowEntry => ",",
            K::Alias => "<alias>",
            K::Anchor => "<anchor>",
            K::Tag => "<tag>",
            K::Scalar => "<scalar>",
            K::Comment => "<comment>",
        }
    }
}

#[derive(Debug, Clone)]
pub(super) enum Directive {
    Yaml(Option<u64>),
    Tag(String),
    Other,
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) kind: K,
    pub(super) start: Mark,
    pub(super) end: Mark,
    /// ruamel's `_comment` list, reduced to which slots hold something.
    pub(super) comment: Option<Vec<bool>>,
    /// Scalar value, alias or anchor name, directive name.
    pub(super) value: String,
    pub(super) plain: bool,
    pub(super) style: Option<char>,
    pub(super) directive: Directive,
}

impl Token {
    pub(super) fn new(kind: K, start: Mark, end: Mark) -> Self {
        Token {
            kind,
            start,
            end,
            comment: None,
            value: String::new(),
            plain: false,
            style: None,
            directive: Directive::Other,
        }
    }

    pub(super) fn add_post_comment(&mut self) {
        let slots = self.comment.get_or_insert_with(|| vec![false, false]);
        slots[0] = true;
    }

    pub(super) fn add_pre_comments(&mut self) -> YResult<()> {
        let slots = self.comment.get_or_insert_with(|| vec![false, false]);
        if slots[1] {
            return Err(crash("AssertionError (ruamel.yaml comment bookkeeping)"));
        }
        slots[1] = true;
        Ok(())
    }

    pub(super) fn split_comment(&mut self) {
        if let Some(slots) = &self.comment
            && slots[0]
            && !slots[1]
        {
            self.comment = None;
        }
    }
}

/// `Token.move_comment`.
pub(super) fn move_comment(source: &mut Token, target: &mut Token, empty: bool) -> YResult<()> {
    let Some(c) = source.comment.clone() else {
        return Ok(());
    };
    if matches!(target.kind, K::StreamEnd | K::DocumentStart) {
        return Ok(());
    }
    source.comment = None;
    match &mut target.comment {
        None => {
            target.comment = Some(if empty {
                vec![c[0], c[1], false, false, c[0]]
            } else {
                c
            });
        }
        Some(tc) => {
            if (c[0] && tc[0]) || (c[1] && tc[1]) {
                return Err(crash(
                    "NotImplementedError: overlap in comment (ruamel.yaml)",
                ));
            }
            if c[0] {
                tc[0] = true;
            }
            if c[1] {
                tc[1] = true;
            }
        }
    }
    Ok(())
}
