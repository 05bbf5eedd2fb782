//! The parser: ruamel's `RoundTripParser` state machine, turning tokens into events.

use crate::skills_ref::python::py_repr;

use super::scanner::Scanner;
use super::tokens::{Directive, K, Token, move_comment};
use super::{Mark, YResult, crash, err};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum E {
    StreamStart,
    StreamEnd,
    DocumentStart,
    DocumentEnd,
    Alias,
    Scalar,
    SequenceStart,
    SequenceEnd,
    MappingStart,
    MappingEnd,
}

#[derive(Debug, Clone)]
pub(super) struct Event {
    pub(super) kind: E,
    pub(super) start: Mark,
    pub(super) end: Mark,
    /// Scalar value or alias name.
    pub(super) value: String,
    /// A plain scalar (resolved implicitly).
    pub(super) plain: bool,
}

impl Event {
    fn new(kind: E, start: Mark, end: Mark) -> Self {
        Event {
            kind,
            start,
            end,
            value: String::new(),
            plain: false,
        }
    }

    fn empty_scalar(mark: Mark) -> Self {
        Event {
            kind: E::Scalar,
            start: mark,
            end: mark,
            value: String::new(),
            plain: true,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) enum St {
    StreamStart,
    ImplicitDocumentStart,
    DocumentEnd,
    DocumentContent,
    BlockNode,
    BlockSequenceFirstEntry,
    BlockSequenceEntry,
    IndentlessSequenceEntry,
    BlockMappingFirstKey,
    BlockMappingKey,
    BlockMappingValue,
}

pub(super) struct Parser {
    pub(super) sc: Scanner,
    pub(super) current: Option<Event>,
    pub(super) state: Option<St>,
    pub(super) states: Vec<St>,
    pub(super) marks: Vec<Mark>,
    pub(super) tag_handles: Vec<String>,
}

impl Parser {
    pub(super) fn check_event(&mut self, kinds: &[E]) -> YResult<bool> {
        self.fill()?;
        Ok(self
            .current
            .as_ref()
            .is_some_and(|e| kinds.contains(&e.kind)))
    }

    fn fill(&mut self) -> YResult<()> {
        if self.current.is_none()
            && let Some(state) = self.state
        {
            self.current = Some(self.run(state)?);
        }
        Ok(())
    }

    pub(super) fn peek_event(&mut self) -> YResult<Event> {
        self.fill()?;
        self.current
            .clone()
            .ok_or_else(|| crash("AttributeError: no event"))
    }

    pub(super) fn get_event(&mut self) -> YResult<Event> {
        self.fill()?;
        self.current
            .take()
            .ok_or_else(|| crash("AttributeError: no event"))
    }

    fn pop_state(&mut self) -> YResult<()> {
        self.state = Some(
            self.states
                .pop()
                .ok_or_else(|| crash("IndexError: pop from empty list"))?,
        );
        Ok(())
    }

    fn last_mark(&self) -> Option<Mark> {
        self.marks.last().copied()
    }

    /// `token.move_comment(self.scanner.peek_token())`.
    fn move_to_next(&mut self, token: &mut Token, empty: bool) -> YResult<()> {
        let target = self.sc.peek_token()?;
        move_comment(token, target, empty)
    }

    fn run(&mut self, state: St) -> YResult<Event> {
        match state {
            St::StreamStart => {
                let mut token = self.sc.get_token()?;
                self.move_to_next(&mut token, false)?;
                self.state = Some(St::ImplicitDocumentStart);
                Ok(Event::new(E::StreamStart, token.start, token.end))
            }
            St::ImplicitDocumentStart => {
                if !self
                    .sc
                    .check_token(&[K::Directive, K::DocumentStart, K::StreamEnd])?
                {
                    self.tag_handles = vec!["!".into(), "!!".into()];
                    let mark = self.sc.peek_token()?.start;
                    self.states.push(St::DocumentEnd);
                    self.state = Some(St::BlockNode);
                    Ok(Event::new(E::DocumentStart, mark, mark))
                } else {
                    self.parse_document_start()
                }
            }
            St::DocumentEnd => {
                let start = self.sc.peek_token()?.start;
                let mut end = start;
                if self.sc.check_token(&[K::DocumentEnd])? {
                    end = self.sc.get_token()?.end;
                }
                self.state = Some(St::ImplicitDocumentStart);
                Ok(Event::new(E::DocumentEnd, start, end))
            }
            St::DocumentContent => {
                if self.sc.check_token(&[
                    K::Directive,
                    K::DocumentStart,
                    K::DocumentEnd,
                    K::StreamEnd,
                ])? {
                    let mark = self.sc.peek_token()?.start;
                    self.pop_state()?;
                    Ok(Event::empty_scalar(mark))
                } else {
                    self.parse_node(true, false)
                }
            }
            St::BlockNode => self.parse_node(true, false),
            St::BlockSequenceFirstEntry => {
                let token = self.sc.get_token()?;
                self.marks.push(token.start);
                self.parse_block_sequence_entry()
            }
            St::BlockSequenceEntry => self.parse_block_sequence_entry(),
            St::IndentlessSequenceEntry => self.parse_indentless_sequence_entry(),
            St::BlockMappingFirstKey => {
                let token = self.sc.get_token()?;
                self.marks.push(token.start);
                self.parse_block_mapping_key()
            }
            St::BlockMappingKey => self.parse_block_mapping_key(),
            St::BlockMappingValue => self.parse_block_mapping_value(),
        }
    }

    fn parse_document_start(&mut self) -> YResult<Event> {
        while self.sc.check_token(&[K::DocumentEnd])? {
            self.sc.get_token()?;
        }
        if !self.sc.check_token(&[K::StreamEnd])? {
            let start = self.sc.peek_token()?.start;
            self.process_directives()?;
            if !self.sc.check_token(&[K::DocumentStart])? {
                let token = self.sc.peek_token()?;
                return Err(err(
                    None,
                    None,
                    format!(
                        "expected '<document start>', but found {}",
                        py_repr(token.kind.id())
                    ),
                    token.start,
                ));
            }
            let token = self.sc.get_token()?;
            self.states.push(St::DocumentEnd);
            self.state = Some(St::DocumentContent);
            Ok(Event::new(E::DocumentStart, start, token.end))
        } else {
            let token = self.sc.get_token()?;
            self.state = None;
            Ok(Event::new(E::StreamEnd, token.start, token.end))
        }
    }

    fn process_directives(&mut self) -> YResult<()> {
        let mut yaml_version_seen = false;
        self.tag_handles.clear();
        while self.sc.check_token(&[K::Directive])? {
            let token = self.sc.get_token()?;
            match &token.directive {
                Directive::Yaml(major) => {
                    if yaml_version_seen {
                        return Err(err(
                            None,
                            None,
                            "found duplicate YAML directive".into(),
                            token.start,
                        ));
                    }
                    if *major != Some(1) {
                        return Err(err(
                            None,
                            None,
                            "found incompatible YAML document (version 1.* is required)".into(),
                            token.start,
                        ));
                    }
                    yaml_version_seen = true;
                }
                Directive::Tag(handle) => {
                    if self.tag_handles.contains(handle) {
                        return Err(err(
                            None,
                            None,
                            format!("duplicate tag handle {}", py_repr(handle)),
                            token.start,
                        ));
                    }
                    self.tag_handles.push(handle.clone());
                }
                Directive::Other => {}
            }
        }
        Ok(())
    }

    fn parse_node(&mut self, block: bool, indentless_sequence: bool) -> YResult<Event> {
        if self.sc.check_token(&[K::Alias])? {
            let token = self.sc.get_token()?;
            let mut event = Event::new(E::Alias, token.start, token.end);
            event.value = token.value;
            self.pop_state()?;
            return Ok(event);
        }
        // Anchors and tags: strictyaml raises as soon as the parser asks for one.
        if self.sc.check_token(&[K::Anchor])? || self.sc.check_token(&[K::Tag])? {
            return Err(crash("anchor or tag token accepted"));
        }
        let start = self.sc.peek_token()?.start;
        if indentless_sequence && self.sc.check_token(&[K::BlockEntry])? {
            let pt = self.sc.peek_token()?;
            if let Some(slots) = pt.comment.as_mut()
                && slots[0]
            {
                slots[0] = false;
            }
            let end = pt.end;
            self.state = Some(St::IndentlessSequenceEntry);
            return Ok(Event::new(E::SequenceStart, start, end));
        }
        if self.sc.check_token(&[K::Scalar])? {
            let token = self.sc.get_token()?;
            let mut event = Event::new(E::Scalar, start, token.end);
            event.value = token.value;
            event.plain = token.plain;
            self.pop_state()?;
            return Ok(event);
        }
        if self.sc.check_token(&[K::FlowSequenceStart])?
            || self.sc.check_token(&[K::FlowMappingStart])?
        {
            return Err(crash("flow collection accepted"));
        }
        if block && self.sc.check_token(&[K::BlockSequenceStart])? {
            let pt = self.sc.peek_token()?;
            let end = pt.start;
            if pt.comment.as_ref().is_none_or(|slots| !slots[1]) {
                pt.split_comment();
            }
            self.state = Some(St::BlockSequenceFirstEntry);
            return Ok(Event::new(E::SequenceStart, start, end));
        }
        if block && self.sc.check_token(&[K::BlockMappingStart])? {
            let end = self.sc.peek_token()?.start;
            self.state = Some(St::BlockMappingFirstKey);
            return Ok(Event::new(E::MappingStart, start, end));
        }
        let token = self.sc.peek_token()?;
        let node = if block { "block" } else { "flow" };
        Err(err(
            Some(&format!("while parsing a {node} node")),
            Some(start),
            format!(
                "expected the node content, but found {}",
                py_repr(token.kind.id())
            ),
            token.start,
        ))
    }

    fn parse_block_sequence_entry(&mut self) -> YResult<Event> {
        if self.sc.check_token(&[K::BlockEntry])? {
            let mut token = self.sc.get_token()?;
            self.move_to_next(&mut token, false)?;
            if !self.sc.check_token(&[K::BlockEntry, K::BlockEnd])? {
                self.states.push(St::BlockSequenceEntry);
                return self.parse_node(true, false);
            }
            self.state = Some(St::BlockSequenceEntry);
            return Ok(Event::empty_scalar(token.end));
        }
        if !self.sc.check_token(&[K::BlockEnd])? {
            let context_mark = self.last_mark();
            let token = self.sc.peek_token()?;
            return Err(err(
                Some("while parsing a block collection"),
                context_mark,
                format!(
                    "expected <block end>, but found {}",
                    py_repr(token.kind.id())
                ),
                token.start,
            ));
        }
        let token = self.sc.get_token()?;
        self.pop_state()?;
        self.marks.pop();
        Ok(Event::new(E::SequenceEnd, token.start, token.end))
    }

    fn parse_indentless_sequence_entry(&mut self) -> YResult<Event> {
        if self.sc.check_token(&[K::BlockEntry])? {
            let mut token = self.sc.get_token()?;
            self.move_to_next(&mut token, false)?;
            if !self
                .sc
                .check_token(&[K::BlockEntry, K::Key, K::Value, K::BlockEnd])?
            {
                self.states.push(St::IndentlessSequenceEntry);
                return self.parse_node(true, false);
            }
            self.state = Some(St::IndentlessSequenceEntry);
            return Ok(Event::empty_scalar(token.end));
        }
        let mark = self.sc.peek_token()?.start;
        self.pop_state()?;
        Ok(Event::new(E::SequenceEnd, mark, mark))
    }

    fn parse_block_mapping_key(&mut self) -> YResult<Event> {
        if self.sc.check_token(&[K::Key])? {
            let mut token = self.sc.get_token()?;
            self.move_to_next(&mut token, false)?;
            if !self.sc.check_token(&[K::Key, K::Value, K::BlockEnd])? {
                self.states.push(St::BlockMappingValue);
                return self.parse_node(true, true);
            }
            self.state = Some(St::BlockMappingValue);
            return Ok(Event::empty_scalar(token.end));
        }
        if self.sc.check_token(&[K::Value])? {
            self.state = Some(St::BlockMappingValue);
            let mark = self.sc.peek_token()?.start;
            return Ok(Event::empty_scalar(mark));
        }
        if !self.sc.check_token(&[K::BlockEnd])? {
            let context_mark = self.last_mark();
            let token = self.sc.peek_token()?;
            return Err(err(
                Some("while parsing a block mapping"),
                context_mark,
                format!(
                    "expected <block end>, but found {}",
                    py_repr(token.kind.id())
                ),
                token.start,
            ));
        }
        let mut token = self.sc.get_token()?;
        self.move_to_next(&mut token, false)?;
        self.pop_state()?;
        self.marks.pop();
        Ok(Event::new(E::MappingEnd, token.start, token.end))
    }

    fn parse_block_mapping_value(&mut self) -> YResult<Event> {
        if self.sc.check_token(&[K::Value])? {
            let mut token = self.sc.get_token()?;
            if self.sc.check_token(&[K::Value])? {
                self.move_to_next(&mut token, false)?;
            } else if !self.sc.check_token(&[K::Key])? {
                self.move_to_next(&mut token, true)?;
            }
            if !self.sc.check_token(&[K::Key, K::Value, K::BlockEnd])? {
                self.states.push(St::BlockMappingKey);
                return self.parse_node(true, true);
            }
            self.state = Some(St::BlockMappingKey);
            if token.comment.is_some() {
                return Ok(Event::empty_scalar(token.end));
            }
            let next = self.sc.peek_token()?;
            if let Some(slots) = next.comment.take() {
                next.comment = Some(vec![false, slots[1]]);
            }
            return Ok(Event::empty_scalar(next.end));
        }
        self.state = Some(St::BlockMappingKey);
        let mark = self.sc.peek_token()?.start;
        Ok(Event::empty_scalar(mark))
    }
}
