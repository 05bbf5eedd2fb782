//! The definitions a turn offers (name, description, input schema), built once per catalog
//! snapshot and shared: an offer hands out `Arc`s instead of rebuilding every tool's JSON.

use std::sync::{Arc, LazyLock, OnceLock};

use quiver_catalog::{Catalog, ItemKind};
use serde_json::json;

use super::ToolDefinition;
use super::meta::MetaTool;

/// The definitions of one catalog snapshot, each built the first time it is offered.
pub(in crate::runtime) struct Definitions {
    /// The snapshot's version.
    version: u64,
    /// One slot per catalog item: its definition, `None` for an item nothing can offer (no
    /// wire name, or an index its package does not have).
    items: Vec<OnceLock<Option<Arc<ToolDefinition>>>>,
}

impl Definitions {
    /// Empty slots for every item of `catalog`.
    pub(in crate::runtime) fn new(catalog: &Catalog) -> Definitions {
        Definitions {
            version: catalog.version(),
            items: (0..catalog.items().len())
                .map(|_| OnceLock::new())
                .collect(),
        }
    }

    /// The catalog version these definitions belong to.
    pub(in crate::runtime) fn version(&self) -> u64 {
        self.version
    }

    /// The definition of item `index` of `catalog` (the snapshot these slots were made for).
    pub(in crate::runtime) fn item(
        &self,
        catalog: &Catalog,
        index: usize,
    ) -> Option<Arc<ToolDefinition>> {
        self.items
            .get(index)?
            .get_or_init(|| build(catalog, index).map(Arc::new))
            .clone()
    }
}

/// The definition of the meta-tool `tool`, built once per process.
pub(in crate::runtime) fn meta(tool: MetaTool) -> Arc<ToolDefinition> {
    static BUILT: LazyLock<Vec<Arc<ToolDefinition>>> = LazyLock::new(|| {
        MetaTool::ALL
            .iter()
            .map(|tool| Arc::new(tool.definition()))
            .collect()
    });
    // `ALL` lists the variants in their declared order.
    BUILT[tool as usize].clone()
}

/// Builds the definition of item `index`: a tool's description parts and input schema, an
/// agent taking `{task}`, a workflow's input.
pub(in crate::runtime) fn build(catalog: &Catalog, index: usize) -> Option<ToolDefinition> {
    let item = catalog.items().get(index)?;
    let wire = item.wire.clone()?;
    let package = &catalog.packages()[item.package].package;
    let (description, input_schema) = match item.kind {
        ItemKind::Tool => {
            let tool = catalog.tool(item)?;
            (tool.description.full(), tool.input.clone())
        }
        ItemKind::Agent => {
            let agent = package.agents.get(item.index)?;
            (
                agent.description.clone(),
                json!({"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}),
            )
        }
        ItemKind::Workflow => {
            let workflow = package.workflows.get(item.index)?;
            (workflow.description.clone(), workflow.input.clone())
        }
    };
    Some(ToolDefinition {
        name: wire,
        description,
        input_schema,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn catalog() -> (tempfile::TempDir, Catalog) {
        let tmp = tempfile::tempdir().unwrap();
        let files = [
            ("p/quiver.yaml", "id: p\n"),
            (
                "p/tools/open/tool.yaml",
                "description: Opens.\ncategory: perception\nexpose: true\ninput: {type: object, properties: {x: {type: string}}}\nrun: {command: [a]}\n",
            ),
            (
                "p/tools/private/tool.yaml",
                "description: Private.\ncategory: perception\nrun: {command: [a]}\n",
            ),
            (
                "p/agents/helper/agent.yaml",
                "description: Helps.\nexpose: true\n",
            ),
            ("p/agents/helper/system.md", "You help.\n"),
        ];
        for (rel, text) in files {
            let path = tmp.path().join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        let catalog = Catalog::load_dirs(&[tmp.path()]);
        (tmp, catalog)
    }

    #[test]
    fn shared_definitions_are_the_ones_built_afresh() {
        let (_tmp, catalog) = catalog();
        let definitions = Definitions::new(&catalog);
        // (qualified name, wire name, description, schema's first property)
        let cases = [
            ("p.open", "p__open", "Opens.", "x"),
            ("p.helper", "p__helper", "Helps.", "task"),
        ];
        for (qualified, wire, description, property) in cases {
            let index = catalog.item_index(qualified).expect(qualified);
            let shared = definitions.item(&catalog, index).expect(qualified);
            assert_eq!(
                (shared.name.as_str(), shared.description.as_str()),
                (wire, description)
            );
            assert!(
                shared.input_schema["properties"].get(property).is_some(),
                "{qualified}"
            );
            // Built once: the second offer hands out the same definition.
            let again = definitions.item(&catalog, index).unwrap();
            assert!(Arc::ptr_eq(&shared, &again), "{qualified}");
        }
        for index in 0..catalog.items().len() {
            assert_eq!(
                definitions.item(&catalog, index).as_deref(),
                build(&catalog, index).as_ref(),
                "{}",
                catalog.items()[index].qualified
            );
        }
        assert!(definitions.item(&catalog, catalog.items().len()).is_none());
        for tool in MetaTool::ALL {
            assert_eq!(*meta(tool), tool.definition());
            assert!(Arc::ptr_eq(&meta(tool), &meta(tool)));
        }
    }
}
