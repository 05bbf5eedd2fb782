//! A port of the YAML loader `skills-ref` uses: `strictyaml.load` (strictyaml 1.7.3 and the
//! ruamel.yaml 0.16.13 it vendors), restricted to what strictyaml lets through.
//!
//! strictyaml reads every scalar as a string (no booleans, numbers, nulls or dates), and
//! rejects flow collections (`[a]`, `{a: b}`), tags (`!x`), anchors (`&x`) and duplicate keys.
//! The scanner, parser, composer and constructor (one submodule each, with the tokens in
//! `tokens`) follow ruamel's code step by step, including its lookahead, its comment
//! bookkeeping and its error texts and positions, so that both the verdict and the message of
//! an invalid document are the reference's. Where the reference crashes with a Python exception
//! instead of reporting a YAML error, the loader returns [`LoadError::crash`] set.
//!
//! This file holds what they share (loaded data, marks, errors and their rendering as ruamel
//! prints them) and [`load`], which runs them in turn.

mod composer;
mod constructor;
mod parser;
mod scanner;
mod tokens;

use std::collections::VecDeque;

use super::python::py_repr;
use constructor::Constructor;
use parser::{Parser, St};
use scanner::Scanner;

const LABEL: &str = "<unicode string>";
const THE_END: &str = "\n\0\r\u{85}\u{2028}\u{2029}";
const THE_END_SPACE_TAB: &str = " \n\0\t\r\u{85}\u{2028}\u{2029}";
const LINE_BREAKS: &str = "\r\n\u{85}\u{2028}\u{2029}";
const NUL_SPACE_BREAKS: &str = "\0 \r\n\u{85}\u{2028}\u{2029}";

fn is_in(ch: char, set: &str) -> bool {
    set.contains(ch)
}

/// A loaded value, as strictyaml's `.data` gives it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Data {
    /// Every scalar.
    Str(String),
    /// A block sequence.
    Seq(Vec<Data>),
    /// A block mapping, in document order.
    Map(Vec<(Key, Data)>),
    /// A plain `=` or `<<` used as a value: ruamel builds an opaque `TaggedScalar` (its
    /// `str()` is the text).
    Tagged(String),
}

/// A mapping key.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Key {
    /// The usual key.
    Str(String),
    /// A complex key (`? - a`): a tuple in Python. strictyaml crashes on it later.
    Tuple(Vec<String>),
}

/// Why a document did not load.
#[derive(Debug)]
pub(super) struct LoadError {
    /// The reference's text of the error.
    pub(super) message: String,
    /// The reference does not report this one: it crashes with a Python exception.
    pub(super) crash: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mark {
    index: usize,
    line: usize,
    column: usize,
}

#[derive(Debug)]
struct Marked {
    context: Option<String>,
    context_mark: Option<Mark>,
    problem: String,
    problem_mark: Option<Mark>,
    note: Option<String>,
}

/// ruamel's `MarkedYAMLError`, or a Python exception that is not a YAML error.
#[derive(Debug)]
enum YamlError {
    Marked(Box<Marked>),
    Crash(String),
}

type YResult<T> = Result<T, YamlError>;

fn err(
    context: Option<&str>,
    context_mark: Option<Mark>,
    problem: String,
    problem_mark: Mark,
) -> YamlError {
    YamlError::Marked(Box::new(Marked {
        context: context.map(str::to_owned),
        context_mark,
        problem,
        problem_mark: Some(problem_mark),
        note: None,
    }))
}

fn crash(what: &str) -> YamlError {
    YamlError::Crash(what.to_owned())
}

fn char_repr(ch: char) -> String {
    py_repr(&ch.to_string())
}

/// `StringMark.__str__`: the position and a snippet of its line with a caret.
fn render_mark(mark: Mark, buf: &[char]) -> String {
    const STOP: &str = "\0\r\n\u{85}\u{2028}\u{2029}";
    let pointer = mark.index;
    let mut head = "";
    let mut start = pointer;
    while start > 0 && !is_in(buf[start - 1], STOP) {
        start -= 1;
        // `pointer - start > max_length / 2 - 1` with max_length 75
        if pointer - start >= 37 {
            head = " ... ";
            start += 5;
            break;
        }
    }
    let mut tail = "";
    let mut end = pointer;
    while end < buf.len() && !is_in(buf[end], STOP) {
        end += 1;
        if end - pointer >= 37 {
            tail = " ... ";
            end -= 5;
            break;
        }
    }
    let snippet: String = buf[start.min(end)..end].iter().collect();
    let caret_pad = 4 + pointer - start + head.chars().count();
    format!(
        "  in \"{LABEL}\", line {}, column {}:\n    {head}{snippet}{tail}\n{}^ (line: {})",
        mark.line + 1,
        mark.column + 1,
        " ".repeat(caret_pad),
        mark.line + 1
    )
}

/// `MarkedYAMLError.__str__`.
fn render_error(error: &YamlError, buf: &[char]) -> String {
    match error {
        YamlError::Crash(what) => what.clone(),
        YamlError::Marked(marked) => {
            let Marked {
                context,
                context_mark,
                problem,
                problem_mark,
                note,
            } = marked.as_ref();
            let mut lines = Vec::new();
            if let Some(context) = context {
                lines.push(context.clone());
            }
            if let Some(cm) = context_mark {
                let same =
                    problem_mark.is_some_and(|pm| pm.line == cm.line && pm.column == cm.column);
                if !same {
                    lines.push(render_mark(*cm, buf));
                }
            }
            lines.push(problem.clone());
            if let Some(pm) = problem_mark {
                lines.push(render_mark(*pm, buf));
            }
            if let Some(note) = note {
                lines.push(note.clone());
            }
            lines.join("\n")
        }
    }
}

/// The first character ruamel's reader refuses, with its position.
fn non_printable(text: &str) -> Option<(usize, char)> {
    text.chars().enumerate().find(|&(_, c)| {
        !(matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{7e}' | '\u{85}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}')
            || c >= '\u{10000}')
    })
}

/// `strictyaml.load(text).data`: `Ok(None)` when the document is not a mapping or a
/// sequence (strictyaml then hands back the source text itself).
pub(super) fn load(text: &str) -> Result<Option<Data>, LoadError> {
    if let Some((position, ch)) = non_printable(text) {
        return Err(LoadError {
            message: format!(
                "unacceptable character #x{:04x}: special characters are not allowed\n  in \"{LABEL}\", position {position}",
                ch as u32
            ),
            crash: true,
        });
    }
    let mut parser = Parser {
        sc: Scanner::new(text),
        current: None,
        state: Some(St::StreamStart),
        states: Vec::new(),
        marks: Vec::new(),
        tag_handles: Vec::new(),
    };
    let node = match parser.get_single_node() {
        Ok(node) => node,
        Err(e) => {
            let crash = matches!(e, YamlError::Crash(_));
            return Err(LoadError {
                message: render_error(&e, &parser.sc.buf),
                crash,
            });
        }
    };
    let mut constructor = Constructor {
        complex_key: false,
        deferred: VecDeque::new(),
    };
    let result = match &node {
        Some(node) => constructor.construct_document(node).map(Some),
        None => Ok(None),
    };
    match result {
        Ok(data) => {
            if parser.sc.lone_surrogate {
                return Err(LoadError {
                    message: "a \\u escape of a lone surrogate (Python keeps it in the string; Rust strings cannot)"
                        .into(),
                    crash: true,
                });
            }
            if constructor.complex_key {
                return Err(LoadError {
                    message: "AssertionError: a complex (non-scalar) mapping key".into(),
                    crash: true,
                });
            }
            Ok(data.filter(|d| matches!(d, Data::Map(_) | Data::Seq(_))))
        }
        Err(e) => {
            let crash = matches!(e, YamlError::Crash(_));
            Err(LoadError {
                message: render_error(&e, &parser.sc.buf),
                crash,
            })
        }
    }
}
