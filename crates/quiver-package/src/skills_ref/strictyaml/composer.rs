//! The composer: ruamel's `Composer`, turning events into a node tree.

use crate::skills_ref::python::py_repr;

use super::parser::{E, Parser};
use super::{Mark, YResult, crash, err};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tag {
    Str,
    /// A plain `<<`.
    Merge,
    /// A plain `=`.
    Value,
}

#[derive(Debug)]
pub(super) enum NodeKind {
    Scalar(Tag, String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

#[derive(Debug)]
pub(super) struct Node {
    pub(super) kind: NodeKind,
    pub(super) start: Mark,
    pub(super) end: Mark,
}

impl Node {
    pub(super) fn id(&self) -> &'static str {
        match self.kind {
            NodeKind::Scalar(..) => "scalar",
            NodeKind::Seq(_) => "sequence",
            NodeKind::Map(_) => "mapping",
        }
    }
}

impl Parser {
    pub(super) fn get_single_node(&mut self) -> YResult<Option<Node>> {
        self.get_event()?;
        let mut document = None;
        if !self.check_event(&[E::StreamEnd])? {
            document = Some(self.compose_document()?);
        }
        if !self.check_event(&[E::StreamEnd])? {
            let event = self.get_event()?;
            let start = document.as_ref().map(|d| d.start);
            return Err(err(
                Some("expected a single document in the stream"),
                start,
                "but found another document".into(),
                event.start,
            ));
        }
        self.get_event()?;
        Ok(document)
    }

    fn compose_document(&mut self) -> YResult<Node> {
        self.get_event()?;
        let node = self.compose_node()?;
        self.get_event()?;
        Ok(node)
    }

    fn compose_node(&mut self) -> YResult<Node> {
        if self.check_event(&[E::Alias])? {
            let event = self.get_event()?;
            return Err(err(
                None,
                None,
                format!("found undefined alias {}", py_repr(&event.value)),
                event.start,
            ));
        }
        let event = self.peek_event()?;
        match event.kind {
            E::Scalar => {
                let event = self.get_event()?;
                let tag = match (event.plain, event.value.as_str()) {
                    (true, "<<") => Tag::Merge,
                    (true, "=") => Tag::Value,
                    _ => Tag::Str,
                };
                Ok(Node {
                    kind: NodeKind::Scalar(tag, event.value),
                    start: event.start,
                    end: event.end,
                })
            }
            E::SequenceStart => {
                let start = self.get_event()?.start;
                let mut items = Vec::new();
                while !self.check_event(&[E::SequenceEnd])? {
                    items.push(self.compose_node()?);
                }
                let end = self.get_event()?.end;
                Ok(Node {
                    kind: NodeKind::Seq(items),
                    start,
                    end,
                })
            }
            E::MappingStart => {
                let start = self.get_event()?.start;
                let mut pairs = Vec::new();
                while !self.check_event(&[E::MappingEnd])? {
                    let key = self.compose_node()?;
                    let value = self.compose_node()?;
                    pairs.push((key, value));
                }
                let end = self.get_event()?.end;
                Ok(Node {
                    kind: NodeKind::Map(pairs),
                    start,
                    end,
                })
            }
            _ => Err(crash("UnboundLocalError in compose_node")),
        }
    }
}
