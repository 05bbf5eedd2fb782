//! `get_run`, the front's fourth meta-tool: an MCP client reads a workflow run that calling an
//! exposed workflow started (`call_tool` answered `{run_id, status}` because the run waits),
//! and later its output. The runtime's own `get_run` answers it (`Runtime::read_run`, the
//! meta-tool a chat's model calls too): only the user who started the run, or the owner (role
//! `master`), reads it; to anyone else (an anonymous caller included) it does not exist.

use serde_json::Value;

use crate::front::{Caller, Front, ToolSpec};

/// The meta-tool's name.
pub const GET_RUN: &str = quiver_runtime::runtime::GET_RUN;

/// `get_run` in the tool list.
pub fn spec() -> ToolSpec {
    let definition = quiver_runtime::runtime::get_run_tool();
    ToolSpec {
        name: GET_RUN.into(),
        description: definition.description,
        input_schema: definition.input_schema,
        output_schema: None,
        read_only: true,
        destructive: false,
    }
}

impl Front {
    /// `get_run`: the run's status, what it waits for, and its output or error; `Err` with the
    /// text the model reads when there is no run this caller may read.
    pub fn get_run(&self, caller: &Caller, arguments: &Value) -> Result<Value, String> {
        let Some(id) = arguments.get("run_id").and_then(Value::as_str) else {
            return Err("`get_run` needs `run_id`: the `run_id` a call returned".into());
        };
        self.runtime().read_run(&caller.principal, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_spec_is_the_runtimes_meta_tool() {
        let spec = spec();
        assert_eq!(spec.name, "get_run");
        assert_eq!(spec.input_schema["required"], json!(["run_id"]));
    }
}
