//! The scanner: ruamel's `Reader` and `RoundTripScanner`, with strictyaml's refusals, turning
//! text into tokens.

use std::collections::{BTreeMap, VecDeque};

use super::tokens::{Directive, K, Token};
use super::{
    LINE_BREAKS, Mark, Marked, NUL_SPACE_BREAKS, THE_END, THE_END_SPACE_TAB, YResult, YamlError,
    char_repr, crash, err, is_in,
};

struct SimpleKey {
    token_number: usize,
    required: bool,
    index: usize,
    line: usize,
    column: usize,
    mark: Mark,
}

/// ruamel's `Reader` + `RoundTripScanner` + strictyaml's `StrictYAMLScanner`.
pub(super) struct Scanner {
    pub(super) buf: Vec<char>,
    index: usize,
    line: usize,
    column: usize,
    done: bool,
    flow_context: Vec<char>,
    tokens: VecDeque<Token>,
    tokens_taken: usize,
    indent: isize,
    indents: Vec<isize>,
    allow_simple_key: bool,
    possible_simple_keys: BTreeMap<usize, SimpleKey>,
    /// A `\u` escape produced a lone surrogate.
    pub(super) lone_surrogate: bool,
}

impl Scanner {
    pub(super) fn new(text: &str) -> Self {
        let mut buf: Vec<char> = text.chars().collect();
        buf.push('\0');
        let mut scanner = Scanner {
            buf,
            index: 0,
            line: 0,
            column: 0,
            done: false,
            flow_context: Vec::new(),
            tokens: VecDeque::new(),
            tokens_taken: 0,
            indent: -1,
            indents: Vec::new(),
            allow_simple_key: true,
            possible_simple_keys: BTreeMap::new(),
            lone_surrogate: false,
        };
        let mark = scanner.mark();
        scanner
            .tokens
            .push_back(Token::new(K::StreamStart, mark, mark));
        scanner
    }

    // reader

    fn peek(&self, offset: usize) -> char {
        self.buf.get(self.index + offset).copied().unwrap_or('\0')
    }

    fn prefix(&self, length: usize) -> String {
        let start = self.index.min(self.buf.len());
        let end = (self.index + length).min(self.buf.len());
        self.buf[start..end].iter().collect()
    }

    fn forward(&mut self, length: usize) {
        for _ in 0..length {
            if self.index >= self.buf.len() {
                return;
            }
            let ch = self.buf[self.index];
            self.index += 1;
            if ch == '\n' || (ch == '\r' && self.peek(0) != '\n') {
                self.line += 1;
                self.column = 0;
            } else if ch != '\u{feff}' {
                self.column += 1;
            }
        }
    }

    fn mark(&self) -> Mark {
        Mark {
            index: self.index,
            line: self.line,
            column: self.column,
        }
    }

    fn flow_level(&self) -> usize {
        self.flow_context.len()
    }

    // public interface

    pub(super) fn check_token(&mut self, choices: &[K]) -> YResult<bool> {
        while self.need_more_tokens()? {
            self.fetch_more_tokens()?;
        }
        self.gather_comments()?;
        let Some(head) = self.tokens.front() else {
            return Ok(false);
        };
        if !choices.contains(&head.kind) {
            return Ok(false);
        }
        match head.kind {
            K::Tag => Err(YamlError::Marked(Box::new(Marked {
                context: Some("While scanning".into()),
                context_mark: Some(head.end),
                problem: "Found disallowed tag tokens (do not specify types in markup)".into(),
                problem_mark: Some(head.start),
                note: None,
            }))),
            K::FlowMappingStart | K::FlowSequenceStart => Err(YamlError::Marked(Box::new(Marked {
                context: Some("While scanning".into()),
                context_mark: Some(head.start),
                problem: "Found ugly disallowed JSONesque flow mapping (surround with ' and ' to make text appear literally)".into(),
                problem_mark: Some(head.end),
                note: None,
            }))),
            K::Anchor => Err(YamlError::Marked(Box::new(Marked {
                context: Some("While scanning".into()),
                context_mark: Some(head.start),
                problem: "Found confusing disallowed anchor token (surround with ' and ' to make text appear literally)".into(),
                problem_mark: Some(head.end),
                note: None,
            }))),
            _ => Ok(true),
        }
    }

    pub(super) fn peek_token(&mut self) -> YResult<&mut Token> {
        while self.need_more_tokens()? {
            self.fetch_more_tokens()?;
        }
        self.gather_comments()?;
        self.tokens
            .front_mut()
            .ok_or_else(|| crash("AttributeError: no token"))
    }

    fn gather_comments(&mut self) -> YResult<()> {
        let mut gathered = 0usize;
        if self.tokens.is_empty() {
            return Ok(());
        }
        if self.tokens.front().is_some_and(|t| t.kind == K::Comment) {
            self.tokens.pop_front();
            self.tokens_taken += 1;
            gathered += 1;
        }
        while self.need_more_tokens()? {
            self.fetch_more_tokens()?;
            if self.tokens.is_empty() {
                return Ok(());
            }
            if self.tokens.front().is_some_and(|t| t.kind == K::Comment) {
                self.tokens_taken += 1;
                self.tokens.pop_front();
                gathered += 1;
            }
        }
        if gathered >= 1
            && let Some(head) = self.tokens.front_mut()
        {
            head.add_pre_comments()?;
        }
        if !self.done && self.tokens.len() < 2 {
            self.fetch_more_tokens()?;
        }
        Ok(())
    }

    pub(super) fn get_token(&mut self) -> YResult<Token> {
        while self.need_more_tokens()? {
            self.fetch_more_tokens()?;
        }
        self.gather_comments()?;
        if self.tokens.is_empty() {
            return Err(crash("AttributeError: no token"));
        }
        let second_is_comment = |s: &Self| s.tokens.len() > 1 && s.tokens[1].kind == K::Comment;
        if second_is_comment(self)
            && matches!(
                self.tokens[0].kind,
                K::Scalar | K::Value | K::FlowSequenceEnd | K::FlowMappingEnd
            )
            && self.tokens[0].end.line == self.tokens[1].start.line
        {
            self.tokens_taken += 1;
            self.tokens.remove(1);
            self.fetch_more_tokens()?;
            while second_is_comment(self) {
                self.tokens_taken += 1;
                self.tokens.remove(1);
                self.fetch_more_tokens()?;
            }
            self.tokens[0].add_post_comment();
        } else if second_is_comment(self)
            && self.tokens[0].kind == K::Scalar
            && self.tokens[0].end.line != self.tokens[1].start.line
        {
            self.tokens_taken += 1;
            self.tokens.remove(1);
            self.tokens[0].add_post_comment();
            self.fetch_more_tokens()?;
            while second_is_comment(self) {
                self.tokens_taken += 1;
                self.tokens.remove(1);
                self.fetch_more_tokens()?;
            }
        }
        self.tokens_taken += 1;
        self.tokens
            .pop_front()
            .ok_or_else(|| crash("AttributeError: no token"))
    }

    fn need_more_tokens(&mut self) -> YResult<bool> {
        if self.done {
            return Ok(false);
        }
        if self.tokens.is_empty() {
            return Ok(true);
        }
        self.stale_possible_simple_keys()?;
        Ok(self.next_possible_simple_key() == Some(self.tokens_taken))
    }

    fn fetch_more_tokens(&mut self) -> YResult<()> {
        if let Some((start, end)) = self.scan_to_next_token() {
            self.tokens.push_back(Token::new(K::Comment, start, end));
            return Ok(());
        }
        self.stale_possible_simple_keys()?;
        self.unwind_indent(self.column as isize);
        let ch = self.peek(0);
        if ch == '\0' {
            return self.fetch_stream_end();
        }
        if ch == '%' && self.column == 0 {
            return self.fetch_directive();
        }
        if ch == '-' && self.check_document_indicator("---") {
            return self.fetch_document_indicator(K::DocumentStart);
        }
        if ch == '.' && self.check_document_indicator("...") {
            return self.fetch_document_indicator(K::DocumentEnd);
        }
        match ch {
            '[' => return self.fetch_flow_collection_start(K::FlowSequenceStart, '['),
            '{' => return self.fetch_flow_collection_start(K::FlowMappingStart, '{'),
            ']' => return self.fetch_flow_collection_end(K::FlowSequenceEnd),
            '}' => return self.fetch_flow_collection_end(K::FlowMappingEnd),
            ',' => return self.fetch_flow_entry(),
            _ => {}
        }
        if ch == '-' && is_in(self.peek(1), THE_END_SPACE_TAB) {
            return self.fetch_block_entry();
        }
        if ch == '?' && (self.flow_level() > 0 || is_in(self.peek(1), THE_END_SPACE_TAB)) {
            return self.fetch_key();
        }
        if ch == ':' && self.check_value() {
            return self.fetch_value();
        }
        match ch {
            '*' => return self.fetch_anchor_or_alias(K::Alias),
            '&' => return self.fetch_anchor_or_alias(K::Anchor),
            '!' => return self.fetch_tag(),
            '|' if self.flow_level() == 0 => return self.fetch_block_scalar('|'),
            '>' if self.flow_level() == 0 => return self.fetch_block_scalar('>'),
            '\'' => return self.fetch_flow_scalar('\''),
            '"' => return self.fetch_flow_scalar('"'),
            _ => {}
        }
        if self.check_plain() {
            return self.fetch_plain();
        }
        Err(err(
            Some("while scanning for the next token"),
            None,
            format!(
                "found character {} that cannot start any token",
                char_repr(ch)
            ),
            self.mark(),
        ))
    }

    // simple keys

    fn next_possible_simple_key(&self) -> Option<usize> {
        self.possible_simple_keys
            .values()
            .map(|k| k.token_number)
            .min()
    }

    fn simple_key_error(&self, key_mark: Mark) -> YamlError {
        err(
            Some("while scanning a simple key"),
            Some(key_mark),
            "could not find expected ':'".into(),
            self.mark(),
        )
    }

    fn stale_possible_simple_keys(&mut self) -> YResult<()> {
        let levels: Vec<usize> = self.possible_simple_keys.keys().copied().collect();
        for level in levels {
            let Some(key) = self.possible_simple_keys.get(&level) else {
                continue;
            };
            if key.line != self.line || self.index - key.index > 1024 {
                if key.required {
                    return Err(self.simple_key_error(key.mark));
                }
                self.possible_simple_keys.remove(&level);
            }
        }
        Ok(())
    }

    fn save_possible_simple_key(&mut self) -> YResult<()> {
        let required = self.flow_level() == 0 && self.indent == self.column as isize;
        if self.allow_simple_key {
            self.remove_possible_simple_key()?;
            let key = SimpleKey {
                token_number: self.tokens_taken + self.tokens.len(),
                required,
                index: self.index,
                line: self.line,
                column: self.column,
                mark: self.mark(),
            };
            self.possible_simple_keys.insert(self.flow_level(), key);
        }
        Ok(())
    }

    fn remove_possible_simple_key(&mut self) -> YResult<()> {
        if let Some(key) = self.possible_simple_keys.get(&self.flow_level()) {
            if key.required {
                return Err(self.simple_key_error(key.mark));
            }
            let level = self.flow_level();
            self.possible_simple_keys.remove(&level);
        }
        Ok(())
    }

    // indentation

    fn unwind_indent(&mut self, column: isize) {
        if self.flow_level() > 0 {
            return;
        }
        while self.indent > column {
            let mark = self.mark();
            self.indent = self.indents.pop().unwrap_or(-1);
            self.tokens.push_back(Token::new(K::BlockEnd, mark, mark));
        }
    }

    fn add_indent(&mut self, column: usize) -> bool {
        let column = column as isize;
        if self.indent < column {
            self.indents.push(self.indent);
            self.indent = column;
            return true;
        }
        false
    }

    // fetchers

    fn fetch_stream_end(&mut self) -> YResult<()> {
        self.unwind_indent(-1);
        self.remove_possible_simple_key()?;
        self.allow_simple_key = false;
        self.possible_simple_keys.clear();
        let mark = self.mark();
        self.tokens.push_back(Token::new(K::StreamEnd, mark, mark));
        self.done = true;
        Ok(())
    }

    fn fetch_directive(&mut self) -> YResult<()> {
        self.unwind_indent(-1);
        self.remove_possible_simple_key()?;
        self.allow_simple_key = false;
        let token = self.scan_directive()?;
        self.tokens.push_back(token);
        Ok(())
    }

    fn fetch_document_indicator(&mut self, kind: K) -> YResult<()> {
        self.unwind_indent(-1);
        self.remove_possible_simple_key()?;
        self.allow_simple_key = false;
        let start = self.mark();
        self.forward(3);
        let end = self.mark();
        self.tokens.push_back(Token::new(kind, start, end));
        Ok(())
    }

    fn push_single(&mut self, kind: K) {
        let start = self.mark();
        self.forward(1);
        let end = self.mark();
        self.tokens.push_back(Token::new(kind, start, end));
    }

    fn fetch_flow_collection_start(&mut self, kind: K, open: char) -> YResult<()> {
        self.save_possible_simple_key()?;
        self.flow_context.push(open);
        self.allow_simple_key = true;
        self.push_single(kind);
        Ok(())
    }

    fn fetch_flow_collection_end(&mut self, kind: K) -> YResult<()> {
        self.remove_possible_simple_key()?;
        self.flow_context.pop();
        self.allow_simple_key = false;
        self.push_single(kind);
        Ok(())
    }

    fn fetch_flow_entry(&mut self) -> YResult<()> {
        self.allow_simple_key = true;
        self.remove_possible_simple_key()?;
        self.push_single(K::FlowEntry);
        Ok(())
    }

    fn fetch_block_entry(&mut self) -> YResult<()> {
        if self.flow_level() == 0 {
            if !self.allow_simple_key {
                return Err(err(
                    None,
                    None,
                    "sequence entries are not allowed here".into(),
                    self.mark(),
                ));
            }
            if self.add_indent(self.column) {
                let mark = self.mark();
                self.tokens
                    .push_back(Token::new(K::BlockSequenceStart, mark, mark));
            }
        }
        self.allow_simple_key = true;
        self.remove_possible_simple_key()?;
        self.push_single(K::BlockEntry);
        Ok(())
    }

    fn fetch_key(&mut self) -> YResult<()> {
        if self.flow_level() == 0 {
            if !self.allow_simple_key {
                return Err(err(
                    None,
                    None,
                    "mapping keys are not allowed here".into(),
                    self.mark(),
                ));
            }
            if self.add_indent(self.column) {
                let mark = self.mark();
                self.tokens
                    .push_back(Token::new(K::BlockMappingStart, mark, mark));
            }
        }
        self.allow_simple_key = self.flow_level() == 0;
        self.remove_possible_simple_key()?;
        self.push_single(K::Key);
        Ok(())
    }

    fn fetch_value(&mut self) -> YResult<()> {
        let level = self.flow_level();
        if let Some(key) = self.possible_simple_keys.remove(&level) {
            let at = key.token_number - self.tokens_taken;
            self.tokens
                .insert(at, Token::new(K::Key, key.mark, key.mark));
            if level == 0 && self.add_indent(key.column) {
                self.tokens
                    .insert(at, Token::new(K::BlockMappingStart, key.mark, key.mark));
            }
            self.allow_simple_key = false;
        } else {
            if level == 0 && !self.allow_simple_key {
                return Err(err(
                    None,
                    None,
                    "mapping values are not allowed here".into(),
                    self.mark(),
                ));
            }
            if level == 0 && self.add_indent(self.column) {
                let mark = self.mark();
                self.tokens
                    .push_back(Token::new(K::BlockMappingStart, mark, mark));
            }
            self.allow_simple_key = level == 0;
            self.remove_possible_simple_key()?;
        }
        self.push_single(K::Value);
        Ok(())
    }

    fn fetch_anchor_or_alias(&mut self, kind: K) -> YResult<()> {
        self.save_possible_simple_key()?;
        self.allow_simple_key = false;
        let token = self.scan_anchor(kind)?;
        self.tokens.push_back(token);
        Ok(())
    }

    fn fetch_tag(&mut self) -> YResult<()> {
        self.save_possible_simple_key()?;
        self.allow_simple_key = false;
        let token = self.scan_tag()?;
        self.tokens.push_back(token);
        Ok(())
    }

    fn fetch_block_scalar(&mut self, style: char) -> YResult<()> {
        self.allow_simple_key = true;
        self.remove_possible_simple_key()?;
        let token = self.scan_block_scalar(style)?;
        self.tokens.push_back(token);
        Ok(())
    }

    fn fetch_flow_scalar(&mut self, style: char) -> YResult<()> {
        self.save_possible_simple_key()?;
        self.allow_simple_key = false;
        let token = self.scan_flow_scalar(style)?;
        self.tokens.push_back(token);
        Ok(())
    }

    fn fetch_plain(&mut self) -> YResult<()> {
        self.save_possible_simple_key()?;
        self.allow_simple_key = false;
        let token = self.scan_plain()?;
        self.tokens.push_back(token);
        Ok(())
    }

    // checkers

    fn check_document_indicator(&self, indicator: &str) -> bool {
        self.column == 0 && self.prefix(3) == indicator && is_in(self.peek(3), THE_END_SPACE_TAB)
    }

    fn check_value(&self) -> bool {
        if self.flow_level() > 0 {
            if self.flow_context.last() == Some(&'[') {
                if !is_in(self.peek(1), THE_END_SPACE_TAB) {
                    return false;
                }
            } else if self.tokens.back().is_some_and(|t| t.kind == K::Value)
                && !is_in(self.peek(1), THE_END_SPACE_TAB)
            {
                return false;
            }
            return true;
        }
        is_in(self.peek(1), THE_END_SPACE_TAB)
    }

    fn check_plain(&self) -> bool {
        let ch = self.peek(0);
        if !is_in(ch, "\0 \t\r\n\u{85}\u{2028}\u{2029}-?:,[]{}#&*!|>'\"%@`") {
            return true;
        }
        let ch1 = self.peek(1);
        if ch == '-' && !is_in(ch1, THE_END_SPACE_TAB) {
            return true;
        }
        if ch == ':' && self.flow_level() > 0 && !is_in(ch1, " \t") {
            return true;
        }
        !is_in(ch1, THE_END_SPACE_TAB) && (ch == '-' || (self.flow_level() == 0 && is_in(ch, "?:")))
    }

    // scanners

    /// `RoundTripScanner.scan_to_next_token`: a comment, or a run of empty lines, comes
    /// back as a comment token.
    fn scan_to_next_token(&mut self) -> Option<(Mark, Mark)> {
        if self.index == 0 && self.peek(0) == '\u{feff}' {
            self.forward(1);
        }
        loop {
            while self.peek(0) == ' ' {
                self.forward(1);
            }
            let mut ch = self.peek(0);
            if ch == '#' {
                let start = self.mark();
                self.forward(1);
                while !is_in(ch, THE_END) {
                    ch = self.peek(0);
                    if ch == '\0' {
                        break;
                    }
                    self.forward(1);
                }
                while !self.scan_line_break(false).is_empty() {}
                let end = self.mark();
                if self.flow_level() == 0 {
                    self.allow_simple_key = true;
                }
                return Some((start, end));
            }
            if self.scan_line_break(false).is_empty() {
                return None;
            }
            if self.flow_level() == 0 {
                self.allow_simple_key = true;
            }
            if self.peek(0) == '\n' {
                let start = self.mark();
                while !self.scan_line_break(true).is_empty() {}
                let end = self.mark();
                return Some((start, end));
            }
        }
    }

    fn scan_line_break(&mut self, empty_line: bool) -> String {
        let ch = self.peek(0);
        if is_in(ch, "\r\n\u{85}") {
            if self.prefix(2) == "\r\n" {
                self.forward(2);
            } else {
                self.forward(1);
            }
            return "\n".into();
        }
        if is_in(ch, "\u{2028}\u{2029}") || (empty_line && is_in(ch, "\t ")) {
            self.forward(1);
            return ch.to_string();
        }
        String::new()
    }

    fn scan_directive(&mut self) -> YResult<Token> {
        let start = self.mark();
        self.forward(1);
        let name = self.scan_directive_name(start)?;
        let directive = if name == "YAML" {
            Directive::Yaml(self.scan_yaml_directive_value(start)?)
        } else if name == "TAG" {
            Directive::Tag(self.scan_tag_directive_value(start)?)
        } else {
            Directive::Other
        };
        let end = self.mark();
        if matches!(directive, Directive::Other) {
            while !is_in(self.peek(0), THE_END) {
                self.forward(1);
            }
        }
        self.scan_directive_ignored_line(start)?;
        let mut token = Token::new(K::Directive, start, end);
        token.value = name;
        token.directive = directive;
        Ok(token)
    }

    fn directive_error(&self, start: Mark, problem: String) -> YamlError {
        err(
            Some("while scanning a directive"),
            Some(start),
            problem,
            self.mark(),
        )
    }

    fn scan_directive_name(&mut self, start: Mark) -> YResult<String> {
        let mut length = 0;
        let mut ch = self.peek(length);
        while ch.is_ascii_alphanumeric() || is_in(ch, "-_:.") {
            length += 1;
            ch = self.peek(length);
        }
        let expected = |s: &Self, ch: char| {
            s.directive_error(
                start,
                format!(
                    "expected alphabetic or numeric character, but found {}",
                    char_repr(ch)
                ),
            )
        };
        if length == 0 {
            return Err(expected(self, ch));
        }
        let value = self.prefix(length);
        self.forward(length);
        let ch = self.peek(0);
        if !is_in(ch, NUL_SPACE_BREAKS) {
            return Err(expected(self, ch));
        }
        Ok(value)
    }

    fn scan_yaml_directive_value(&mut self, start: Mark) -> YResult<Option<u64>> {
        while self.peek(0) == ' ' {
            self.forward(1);
        }
        let major = self.scan_yaml_directive_number(start)?;
        if self.peek(0) != '.' {
            return Err(self.directive_error(
                start,
                format!(
                    "expected a digit or '.', but found {}",
                    char_repr(self.peek(0))
                ),
            ));
        }
        self.forward(1);
        self.scan_yaml_directive_number(start)?;
        if !is_in(self.peek(0), NUL_SPACE_BREAKS) {
            return Err(self.directive_error(
                start,
                format!(
                    "expected a digit or ' ', but found {}",
                    char_repr(self.peek(0))
                ),
            ));
        }
        Ok(major)
    }

    fn scan_yaml_directive_number(&mut self, start: Mark) -> YResult<Option<u64>> {
        let ch = self.peek(0);
        if !ch.is_ascii_digit() {
            return Err(self.directive_error(
                start,
                format!("expected a digit, but found {}", char_repr(ch)),
            ));
        }
        let mut length = 0;
        while self.peek(length).is_ascii_digit() {
            length += 1;
        }
        let value = self.prefix(length).parse::<u64>().ok();
        self.forward(length);
        Ok(value)
    }

    fn scan_tag_directive_value(&mut self, start: Mark) -> YResult<String> {
        while self.peek(0) == ' ' {
            self.forward(1);
        }
        let handle = self.scan_tag_handle("directive", start)?;
        if self.peek(0) != ' ' {
            return Err(self.directive_error(
                start,
                format!("expected ' ', but found {}", char_repr(self.peek(0))),
            ));
        }
        while self.peek(0) == ' ' {
            self.forward(1);
        }
        self.scan_tag_uri("directive", start)?;
        if !is_in(self.peek(0), NUL_SPACE_BREAKS) {
            return Err(self.directive_error(
                start,
                format!("expected ' ', but found {}", char_repr(self.peek(0))),
            ));
        }
        Ok(handle)
    }

    fn scan_directive_ignored_line(&mut self, start: Mark) -> YResult<()> {
        while self.peek(0) == ' ' {
            self.forward(1);
        }
        if self.peek(0) == '#' {
            while !is_in(self.peek(0), THE_END) {
                self.forward(1);
            }
        }
        let ch = self.peek(0);
        if !is_in(ch, THE_END) {
            return Err(self.directive_error(
                start,
                format!(
                    "expected a comment or a line break, but found {}",
                    char_repr(ch)
                ),
            ));
        }
        self.scan_line_break(false);
        Ok(())
    }

    fn scan_anchor(&mut self, kind: K) -> YResult<Token> {
        let start = self.mark();
        let name = if self.peek(0) == '*' {
            "alias"
        } else {
            "anchor"
        };
        self.forward(1);
        let mut length = 0;
        let mut ch = self.peek(length);
        while check_anchorname_char(ch) {
            length += 1;
            ch = self.peek(length);
        }
        let error = |s: &Self, ch: char| {
            err(
                Some(&format!("while scanning an {name}")),
                Some(start),
                format!(
                    "expected alphabetic or numeric character, but found {}",
                    char_repr(ch)
                ),
                s.mark(),
            )
        };
        if length == 0 {
            return Err(error(self, ch));
        }
        let value = self.prefix(length);
        self.forward(length);
        if !is_in(ch, "\0 \t\r\n\u{85}\u{2028}\u{2029}?:,[]{}%@`") {
            return Err(error(self, ch));
        }
        let end = self.mark();
        let mut token = Token::new(kind, start, end);
        token.value = value;
        Ok(token)
    }

    fn scan_tag(&mut self) -> YResult<Token> {
        let start = self.mark();
        let ch = self.peek(1);
        if ch == '<' {
            self.forward(2);
            self.scan_tag_uri("tag", start)?;
            if self.peek(0) != '>' {
                return Err(err(
                    Some("while parsing a tag"),
                    Some(start),
                    format!("expected '>', but found {}", char_repr(self.peek(0))),
                    self.mark(),
                ));
            }
            self.forward(1);
        } else if is_in(ch, THE_END_SPACE_TAB) {
            self.forward(1);
        } else {
            let mut length = 1;
            let mut use_handle = false;
            let mut ch = ch;
            while !is_in(ch, NUL_SPACE_BREAKS) {
                if ch == '!' {
                    use_handle = true;
                    break;
                }
                length += 1;
                ch = self.peek(length);
            }
            if use_handle {
                self.scan_tag_handle("tag", start)?;
            } else {
                self.forward(1);
            }
            self.scan_tag_uri("tag", start)?;
        }
        let ch = self.peek(0);
        if !is_in(ch, NUL_SPACE_BREAKS) {
            return Err(err(
                Some("while scanning a tag"),
                Some(start),
                format!("expected ' ', but found {}", char_repr(ch)),
                self.mark(),
            ));
        }
        let end = self.mark();
        Ok(Token::new(K::Tag, start, end))
    }

    fn scan_tag_handle(&mut self, name: &str, start: Mark) -> YResult<String> {
        let context = format!("while scanning a {name}");
        let ch = self.peek(0);
        if ch != '!' {
            return Err(err(
                Some(&context),
                Some(start),
                format!("expected '!', but found {}", char_repr(ch)),
                self.mark(),
            ));
        }
        let mut length = 1;
        let mut ch = self.peek(length);
        if ch != ' ' {
            while ch.is_ascii_alphanumeric() || is_in(ch, "-_") {
                length += 1;
                ch = self.peek(length);
            }
            if ch != '!' {
                self.forward(length);
                return Err(err(
                    Some(&context),
                    Some(start),
                    format!("expected '!', but found {}", char_repr(ch)),
                    self.mark(),
                ));
            }
            length += 1;
        }
        let value = self.prefix(length);
        self.forward(length);
        Ok(value)
    }

    fn scan_tag_uri(&mut self, name: &str, start: Mark) -> YResult<String> {
        let mut chunks: Vec<String> = Vec::new();
        let mut length = 0;
        let mut ch = self.peek(length);
        while ch.is_ascii_alphanumeric() || is_in(ch, "-;/?:@&=+$,_.!~*'()[]%#") {
            if ch == '%' {
                chunks.push(self.prefix(length));
                self.forward(length);
                length = 0;
                chunks.push(self.scan_uri_escapes(name, start)?);
            } else {
                length += 1;
            }
            ch = self.peek(length);
        }
        if length != 0 {
            chunks.push(self.prefix(length));
            self.forward(length);
        }
        if chunks.is_empty() {
            return Err(err(
                Some(&format!("while parsing a {name}")),
                Some(start),
                format!("expected URI, but found {}", char_repr(ch)),
                self.mark(),
            ));
        }
        Ok(chunks.concat())
    }

    fn scan_uri_escapes(&mut self, name: &str, start: Mark) -> YResult<String> {
        let context = format!("while scanning a {name}");
        let mut bytes = Vec::new();
        let mark = self.mark();
        while self.peek(0) == '%' {
            self.forward(1);
            for k in 0..2 {
                if !self.peek(k).is_ascii_hexdigit() {
                    return Err(err(
                        Some(&context),
                        Some(start),
                        format!(
                            "expected URI escape sequence of 2 hexdecimal numbers, but found {}",
                            char_repr(self.peek(k))
                        ),
                        self.mark(),
                    ));
                }
            }
            bytes.push(u8::from_str_radix(&self.prefix(2), 16).unwrap_or(0));
            self.forward(2);
        }
        match String::from_utf8(bytes) {
            Ok(value) => Ok(value),
            Err(e) => {
                let position = e.utf8_error().valid_up_to();
                let byte = e.as_bytes().get(position).copied().unwrap_or(0);
                Err(err(
                    Some(&context),
                    Some(start),
                    format!(
                        "'utf-8' codec can't decode byte {byte:#04x} in position {position}: invalid start byte"
                    ),
                    mark,
                ))
            }
        }
    }

    fn block_scalar_error(&self, start: Mark, problem: String) -> YamlError {
        err(
            Some("while scanning a block scalar"),
            Some(start),
            problem,
            self.mark(),
        )
    }

    fn scan_block_scalar(&mut self, style: char) -> YResult<Token> {
        let folded = style == '>';
        let mut chunks: Vec<String> = Vec::new();
        let start = self.mark();
        self.forward(1);
        let (chomping, increment) = self.scan_block_scalar_indicators(start)?;
        let has_header_comment = self.scan_block_scalar_ignored_line(start)?;
        let mut min_indent = self.indent + 1;
        let indent;
        let mut breaks;
        let mut end;
        match increment {
            None => {
                let (b, max_indent, e) = self.scan_block_scalar_indentation();
                breaks = b;
                end = e;
                indent = min_indent.max(max_indent as isize);
            }
            Some(increment) => {
                if min_indent < 1 {
                    min_indent = 1;
                }
                indent = min_indent + increment as isize - 1;
                let (b, e) = self.scan_block_scalar_breaks(indent);
                breaks = b;
                end = e;
            }
        }
        let mut line_break = String::new();
        while self.column as isize == indent && self.peek(0) != '\0' {
            chunks.append(&mut breaks);
            let leading_non_space = !is_in(self.peek(0), " \t");
            let mut length = 0;
            while !is_in(self.peek(length), THE_END) {
                length += 1;
            }
            chunks.push(self.prefix(length));
            self.forward(length);
            line_break = self.scan_line_break(false);
            let (b, e) = self.scan_block_scalar_breaks(indent);
            breaks = b;
            end = e;
            if min_indent == 0
                && (self.check_document_indicator("---") || self.check_document_indicator("..."))
            {
                break;
            }
            if self.column as isize == indent && self.peek(0) != '\0' {
                // (ruamel inserts a "\a" fold marker here and removes it when constructing)
                if folded && line_break == "\n" && leading_non_space && !is_in(self.peek(0), " \t")
                {
                    if breaks.is_empty() {
                        chunks.push(" ".into());
                    }
                } else {
                    chunks.push(line_break.clone());
                }
            } else {
                break;
            }
        }
        let mut trailing = false;
        if chomping != Some(false) {
            chunks.push(line_break);
        }
        if chomping == Some(true) {
            chunks.append(&mut breaks);
        } else if !breaks.is_empty() {
            trailing = true;
        }
        let mut token = Token::new(K::Scalar, start, end);
        token.value = chunks.concat();
        token.style = Some(style);
        if has_header_comment {
            token.add_pre_comments()?;
        }
        if trailing {
            while self.scan_to_next_token().is_some() {}
            token.add_post_comment();
        }
        Ok(token)
    }

    fn scan_block_scalar_indicators(
        &mut self,
        start: Mark,
    ) -> YResult<(Option<bool>, Option<u32>)> {
        let mut chomping = None;
        let mut increment = None;
        let zero = "expected indentation indicator in the range 1-9, but found 0";
        let ch = self.peek(0);
        if is_in(ch, "+-") {
            chomping = Some(ch == '+');
            self.forward(1);
            let ch = self.peek(0);
            if let Some(digit) = ch.to_digit(10) {
                if digit == 0 {
                    return Err(self.block_scalar_error(start, zero.into()));
                }
                increment = Some(digit);
                self.forward(1);
            }
        } else if let Some(digit) = ch.to_digit(10) {
            if digit == 0 {
                return Err(self.block_scalar_error(start, zero.into()));
            }
            increment = Some(digit);
            self.forward(1);
            let ch = self.peek(0);
            if is_in(ch, "+-") {
                chomping = Some(ch == '+');
                self.forward(1);
            }
        }
        let ch = self.peek(0);
        if !is_in(ch, NUL_SPACE_BREAKS) {
            return Err(self.block_scalar_error(
                start,
                format!(
                    "expected chomping or indentation indicators, but found {}",
                    char_repr(ch)
                ),
            ));
        }
        Ok((chomping, increment))
    }

    fn scan_block_scalar_ignored_line(&mut self, start: Mark) -> YResult<bool> {
        let mut comment = false;
        while self.peek(0) == ' ' {
            self.forward(1);
        }
        if self.peek(0) == '#' {
            comment = true;
            while !is_in(self.peek(0), THE_END) {
                self.forward(1);
            }
        }
        let ch = self.peek(0);
        if !is_in(ch, THE_END) {
            return Err(self.block_scalar_error(
                start,
                format!(
                    "expected a comment or a line break, but found {}",
                    char_repr(ch)
                ),
            ));
        }
        self.scan_line_break(false);
        Ok(comment)
    }

    fn scan_block_scalar_indentation(&mut self) -> (Vec<String>, usize, Mark) {
        let mut chunks = Vec::new();
        let mut max_indent = 0;
        let mut end = self.mark();
        while is_in(self.peek(0), " \r\n\u{85}\u{2028}\u{2029}") {
            if self.peek(0) != ' ' {
                chunks.push(self.scan_line_break(false));
                end = self.mark();
            } else {
                self.forward(1);
                if self.column > max_indent {
                    max_indent = self.column;
                }
            }
        }
        (chunks, max_indent, end)
    }

    fn scan_block_scalar_breaks(&mut self, indent: isize) -> (Vec<String>, Mark) {
        let mut chunks = Vec::new();
        let mut end = self.mark();
        while (self.column as isize) < indent && self.peek(0) == ' ' {
            self.forward(1);
        }
        while is_in(self.peek(0), LINE_BREAKS) {
            chunks.push(self.scan_line_break(false));
            end = self.mark();
            while (self.column as isize) < indent && self.peek(0) == ' ' {
                self.forward(1);
            }
        }
        (chunks, end)
    }

    fn scan_flow_scalar(&mut self, style: char) -> YResult<Token> {
        let double = style == '"';
        let mut chunks: Vec<String> = Vec::new();
        let start = self.mark();
        let quote = self.peek(0);
        self.forward(1);
        self.scan_flow_scalar_non_spaces(double, start, &mut chunks)?;
        while self.peek(0) != quote {
            self.scan_flow_scalar_spaces(double, start, &mut chunks)?;
            self.scan_flow_scalar_non_spaces(double, start, &mut chunks)?;
        }
        self.forward(1);
        let end = self.mark();
        let mut token = Token::new(K::Scalar, start, end);
        token.value = chunks.concat();
        token.style = Some(style);
        Ok(token)
    }

    fn scan_flow_scalar_non_spaces(
        &mut self,
        double: bool,
        start: Mark,
        chunks: &mut Vec<String>,
    ) -> YResult<()> {
        let context = "while scanning a double-quoted scalar";
        loop {
            let mut length = 0;
            while !is_in(self.peek(length), " \n'\"\\\0\t\r\u{85}\u{2028}\u{2029}") {
                length += 1;
            }
            if length != 0 {
                chunks.push(self.prefix(length));
                self.forward(length);
            }
            let ch = self.peek(0);
            if !double && ch == '\'' && self.peek(1) == '\'' {
                chunks.push("'".into());
                self.forward(2);
            } else if (double && ch == '\'') || (!double && is_in(ch, "\"\\")) {
                chunks.push(ch.to_string());
                self.forward(1);
            } else if double && ch == '\\' {
                self.forward(1);
                let ch = self.peek(0);
                if let Some(replacement) = escape_replacement(ch) {
                    chunks.push(replacement.to_string());
                    self.forward(1);
                } else if let Some(length) = escape_code_length(ch) {
                    self.forward(1);
                    for k in 0..length {
                        if !self.peek(k).is_ascii_hexdigit() {
                            return Err(err(
                                Some(context),
                                Some(start),
                                format!(
                                    "expected escape sequence of {length} hexdecimal numbers, but found {}",
                                    char_repr(self.peek(k))
                                ),
                                self.mark(),
                            ));
                        }
                    }
                    let code = u32::from_str_radix(&self.prefix(length), 16).unwrap_or(u32::MAX);
                    match char::from_u32(code) {
                        Some(c) => chunks.push(c.to_string()),
                        None if (0xD800..=0xDFFF).contains(&code) => {
                            // Python keeps the lone surrogate and goes on; Rust strings
                            // cannot hold one, so it stands as U+FFFD and the load fails
                            // at the end unless a YAML error comes first.
                            self.lone_surrogate = true;
                            chunks.push('\u{fffd}'.to_string());
                        }
                        None => {
                            return Err(crash("ValueError: chr() arg not in range(0x110000)"));
                        }
                    }
                    self.forward(length);
                } else if is_in(ch, LINE_BREAKS) {
                    self.scan_line_break(false);
                    self.scan_flow_scalar_breaks(start, chunks)?;
                } else {
                    return Err(err(
                        Some(context),
                        Some(start),
                        format!("found unknown escape character {}", char_repr(ch)),
                        self.mark(),
                    ));
                }
            } else {
                return Ok(());
            }
        }
    }

    fn scan_flow_scalar_spaces(
        &mut self,
        _double: bool,
        start: Mark,
        chunks: &mut Vec<String>,
    ) -> YResult<()> {
        let mut length = 0;
        while is_in(self.peek(length), " \t") {
            length += 1;
        }
        let whitespaces = self.prefix(length);
        self.forward(length);
        let ch = self.peek(0);
        if ch == '\0' {
            return Err(err(
                Some("while scanning a quoted scalar"),
                Some(start),
                "found unexpected end of stream".into(),
                self.mark(),
            ));
        }
        if is_in(ch, LINE_BREAKS) {
            let line_break = self.scan_line_break(false);
            let mut breaks = Vec::new();
            self.scan_flow_scalar_breaks(start, &mut breaks)?;
            if line_break != "\n" {
                chunks.push(line_break);
            } else if breaks.is_empty() {
                chunks.push(" ".into());
            }
            chunks.append(&mut breaks);
        } else {
            chunks.push(whitespaces);
        }
        Ok(())
    }

    fn scan_flow_scalar_breaks(&mut self, start: Mark, chunks: &mut Vec<String>) -> YResult<()> {
        loop {
            let prefix = self.prefix(3);
            if (prefix == "---" || prefix == "...") && is_in(self.peek(3), THE_END_SPACE_TAB) {
                return Err(err(
                    Some("while scanning a quoted scalar"),
                    Some(start),
                    "found unexpected document separator".into(),
                    self.mark(),
                ));
            }
            while is_in(self.peek(0), " \t") {
                self.forward(1);
            }
            if is_in(self.peek(0), LINE_BREAKS) {
                chunks.push(self.scan_line_break(false));
            } else {
                return Ok(());
            }
        }
    }

    fn scan_plain(&mut self) -> YResult<Token> {
        let mut chunks: Vec<String> = Vec::new();
        let start = self.mark();
        let mut end = start;
        let indent = self.indent + 1;
        let mut spaces: Option<Vec<String>> = Some(Vec::new());
        let flow = self.flow_level() > 0;
        loop {
            let mut length = 0;
            if self.peek(0) == '#' {
                break;
            }
            let mut ch;
            loop {
                ch = self.peek(length);
                let next = self.peek(length + 1);
                if (ch == ':' && !is_in(next, THE_END_SPACE_TAB)) || ch == '?' {
                    // part of the scalar
                } else if is_in(ch, THE_END_SPACE_TAB)
                    || (!flow && ch == ':' && is_in(next, THE_END_SPACE_TAB))
                    || (flow && is_in(ch, ",:?[]{}"))
                {
                    break;
                }
                length += 1;
            }
            if flow
                && ch == ':'
                && !is_in(
                    self.peek(length + 1),
                    "\0 \t\r\n\u{85}\u{2028}\u{2029},[]{}",
                )
            {
                self.forward(length);
                return Err(YamlError::Marked(Box::new(Marked {
                    context: Some("while scanning a plain scalar".into()),
                    context_mark: Some(start),
                    problem: "found unexpected ':'".into(),
                    problem_mark: Some(self.mark()),
                    note: Some(
                        "Please check http://pyyaml.org/wiki/YAMLColonInFlowContext for details."
                            .into(),
                    ),
                })));
            }
            if length == 0 {
                break;
            }
            self.allow_simple_key = false;
            if let Some(s) = spaces.as_mut() {
                chunks.append(s);
            }
            chunks.push(self.prefix(length));
            self.forward(length);
            end = self.mark();
            spaces = self.scan_plain_spaces();
            let stop = match &spaces {
                None => true,
                Some(s) => s.is_empty(),
            };
            if stop || self.peek(0) == '#' || (!flow && (self.column as isize) < indent) {
                break;
            }
        }
        let mut token = Token::new(K::Scalar, start, end);
        token.value = chunks.concat();
        token.plain = true;
        if spaces
            .as_ref()
            .is_some_and(|s| s.first().is_some_and(|first| first == "\n"))
        {
            token.add_post_comment();
        }
        Ok(token)
    }

    fn scan_plain_spaces(&mut self) -> Option<Vec<String>> {
        let mut chunks = Vec::new();
        let mut length = 0;
        while self.peek(length) == ' ' {
            length += 1;
        }
        let whitespaces = self.prefix(length);
        self.forward(length);
        let ch = self.peek(0);
        let separator = |s: &Self| {
            let prefix = s.prefix(3);
            (prefix == "---" || prefix == "...") && is_in(s.peek(3), THE_END_SPACE_TAB)
        };
        if is_in(ch, LINE_BREAKS) {
            let line_break = self.scan_line_break(false);
            self.allow_simple_key = true;
            if separator(self) {
                return None;
            }
            let mut breaks = Vec::new();
            while is_in(self.peek(0), " \r\n\u{85}\u{2028}\u{2029}") {
                if self.peek(0) == ' ' {
                    self.forward(1);
                } else {
                    breaks.push(self.scan_line_break(false));
                    if separator(self) {
                        return None;
                    }
                }
            }
            if line_break != "\n" {
                chunks.push(line_break);
            } else if breaks.is_empty() {
                chunks.push(" ".into());
            }
            chunks.append(&mut breaks);
        } else if !whitespaces.is_empty() {
            chunks.push(whitespaces);
        }
        Some(chunks)
    }
}

fn check_anchorname_char(ch: char) -> bool {
    if is_in(ch, ",[]{}") {
        return false;
    }
    ('\u{21}'..='\u{7e}').contains(&ch)
        || ('\u{a0}'..='\u{d7ff}').contains(&ch)
        || (('\u{e000}'..='\u{fffd}').contains(&ch) && ch != '\u{feff}')
        || ch >= '\u{10000}'
}

fn escape_replacement(ch: char) -> Option<char> {
    Some(match ch {
        '0' => '\0',
        'a' => '\u{7}',
        'b' => '\u{8}',
        't' | '\t' => '\t',
        'n' => '\n',
        'v' => '\u{b}',
        'f' => '\u{c}',
        'r' => '\r',
        'e' => '\u{1b}',
        ' ' => ' ',
        '"' => '"',
        '/' => '/',
        '\\' => '\\',
        'N' => '\u{85}',
        '_' => '\u{a0}',
        'L' => '\u{2028}',
        'P' => '\u{2029}',
        _ => return None,
    })
}

fn escape_code_length(ch: char) -> Option<usize> {
    match ch {
        'x' => Some(2),
        'u' => Some(4),
        'U' => Some(8),
        _ => None,
    }
}
