//! The constructor: ruamel's constructor with strictyaml's `construct_mapping`, turning nodes
//! into strings, lists and mappings.

use std::collections::VecDeque;

use crate::skills_ref::python::py_repr;

use super::composer::{Node, NodeKind, Tag};
use super::{Data, Key, Mark, YResult, crash, err};

/// ruamel's constructor with strictyaml's `construct_mapping`.
///
/// ruamel builds collections through generators: reached while not inside a "deep"
/// construction (the root, the `<<` values of such a mapping, the collections inside such
/// a sequence), a collection is only created empty and filled later, in FIFO order. That
/// order decides which error comes first, and it is why the root mapping receives no
/// merged keys (the merged mappings are still empty when merged).
pub(super) struct Constructor<'a> {
    pub(super) complex_key: bool,
    pub(super) deferred: VecDeque<&'a Node>,
}

impl<'a> Constructor<'a> {
    /// Constructs the document: the root, then everything deferred.
    pub(super) fn construct_document(&mut self, root: &'a Node) -> YResult<Data> {
        let data = self.construct(root, false)?;
        let mut result = None;
        while let Some(node) = self.deferred.pop_front() {
            let filled = self.fill(node)?;
            if std::ptr::eq(node, root) {
                result = Some(filled);
            }
        }
        Ok(result.unwrap_or(data))
    }

    /// `construct_object`; `deep` is ruamel's `deep_construct` at that moment.
    fn construct(&mut self, node: &'a Node, deep: bool) -> YResult<Data> {
        match &node.kind {
            NodeKind::Scalar(Tag::Str, value) => Ok(Data::Str(value.clone())),
            NodeKind::Scalar(_, value) => Ok(Data::Tagged(value.clone())),
            NodeKind::Seq(_) | NodeKind::Map(_) if !deep => {
                self.deferred.push_back(node);
                Ok(match node.kind {
                    NodeKind::Seq(_) => Data::Seq(Vec::new()),
                    _ => Data::Map(Vec::new()),
                })
            }
            NodeKind::Seq(items) => Ok(Data::Seq(
                items
                    .iter()
                    .map(|item| self.construct(item, true))
                    .collect::<YResult<_>>()?,
            )),
            NodeKind::Map(pairs) => self.construct_mapping(node, pairs, true),
        }
    }

    /// Runs a deferred generator (outside any deep construction).
    fn fill(&mut self, node: &'a Node) -> YResult<Data> {
        match &node.kind {
            NodeKind::Seq(items) => Ok(Data::Seq(
                items
                    .iter()
                    .map(|item| self.construct(item, false))
                    .collect::<YResult<_>>()?,
            )),
            NodeKind::Map(pairs) => self.construct_mapping(node, pairs, false),
            NodeKind::Scalar(..) => self.construct(node, false),
        }
    }

    /// strictyaml's `construct_mapping` (ruamel's `flatten_mapping` for `<<` first).
    fn construct_mapping(
        &mut self,
        node: &'a Node,
        pairs: &'a [(Node, Node)],
        deep: bool,
    ) -> YResult<Data> {
        let mapping_error = |problem: String, mark: Mark| {
            err(
                Some("while constructing a mapping"),
                Some(node.start),
                problem,
                mark,
            )
        };
        let mut merged: Vec<Data> = Vec::new();
        let mut merge_seen = false;
        let mut rest: Vec<&'a (Node, Node)> = Vec::new();
        for pair in pairs {
            let (key, value) = pair;
            if !matches!(key.kind, NodeKind::Scalar(Tag::Merge, _)) {
                rest.push(pair);
                continue;
            }
            if merge_seen {
                return Err(crash("DuplicateKeyError: found duplicate key \"<<\""));
            }
            merge_seen = true;
            match &value.kind {
                NodeKind::Map(_) => merged.push(self.construct(value, deep)?),
                NodeKind::Seq(items) => {
                    for item in items {
                        if !matches!(item.kind, NodeKind::Map(_)) {
                            return Err(mapping_error(
                                format!("expected a mapping for merging, but found {}", item.id()),
                                item.start,
                            ));
                        }
                        merged.push(self.construct(item, deep)?);
                    }
                }
                NodeKind::Scalar(..) => {
                    return Err(mapping_error(
                        format!(
                            "expected a mapping or list of mappings for merging, but found {}",
                            value.id()
                        ),
                        value.start,
                    ));
                }
            }
        }
        let mut entries: Vec<(Key, Data)> = Vec::new();
        for (key_node, value_node) in &rest {
            let key = match self.construct(key_node, true)? {
                Data::Str(s) | Data::Tagged(s) => Key::Str(s),
                Data::Seq(items) => {
                    self.complex_key = true;
                    let mut parts = Vec::new();
                    for item in items {
                        match item {
                            Data::Str(s) => parts.push(s),
                            _ => return Err(crash("TypeError: unhashable type: 'list'")),
                        }
                    }
                    Key::Tuple(parts)
                }
                Data::Map(_) => {
                    return Err(mapping_error("found unhashable key".into(), key_node.start));
                }
            };
            let value = self.construct(value_node, true)?;
            if entries.iter().any(|(k, _)| *k == key) {
                let shown = match &key {
                    Key::Str(s) => s.clone(),
                    Key::Tuple(parts) => py_tuple_repr(parts),
                };
                return Err(err(
                    Some("While parsing"),
                    Some(key_node.start),
                    format!("Duplicate key '{shown}' found"),
                    key_node.end,
                ));
            }
            entries.push((key, value));
        }
        // (a deferred merged mapping is still empty here)
        for map in merged {
            if let Data::Map(items) = map {
                for (k, v) in items {
                    if !entries.iter().any(|(existing, _)| *existing == k) {
                        entries.push((k, v));
                    }
                }
            }
        }
        let mut column = None;
        for (_, value_node) in &rest {
            if matches!(value_node.kind, NodeKind::Map(_)) {
                let first = *column.get_or_insert(value_node.start.column);
                if value_node.start.column != first {
                    return Err(err(
                        Some("While parsing"),
                        Some(value_node.start),
                        "Found mapping with indentation inconsistent with previous mapping".into(),
                        value_node.end,
                    ));
                }
            }
        }
        Ok(Data::Map(entries))
    }
}

fn py_tuple_repr(parts: &[String]) -> String {
    let items: Vec<String> = parts.iter().map(|p| py_repr(p)).collect();
    if items.len() == 1 {
        format!("({},)", items[0])
    } else {
        format!("({})", items.join(", "))
    }
}
