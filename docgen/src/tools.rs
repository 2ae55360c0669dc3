//! `docs/contracts/tools/max-mode-*.json`: the schemas of the built-in tools as the model is
//! offered them, for each ceiling (`max_mode`) and each mode a session may be in under it, and
//! without escalation, as child agents are offered them.
//!
//! The schemas come from agentd's own `tools::offered` and `tools::offered_confined` over a
//! tool environment set up as a session's is: every command confined (`SpecOptions::confining`),
//! escalation to the modes the helper grants (its composition), the `task` tool registered.

use std::path::PathBuf;

use agentd::api::composition::Composition;
use agentd::api::helper_client::{HelperClient, HelperEndpoint};
use agentd::api::tools::{self, SpecOptions, TASK, ToolEnv, ToolScope, UPDATE_PLAN};
use confine_protocol::{BackendChoice, Mode, Network};
use serde_json::{Map, Value, json};

use crate::generated::{Generated, NOTICE};

/// A session's tool environment under a helper whose ceiling is `max_mode`, with a usable
/// backend. Nothing here reaches a helper: building schemas runs nothing.
fn session_tools(max_mode: Mode) -> ToolEnv {
    let helper = HelperClient::new(HelperEndpoint::Service(PathBuf::from("/nonexistent")));
    let env = ToolEnv::new(
        helper,
        PathBuf::from("/nonexistent"),
        Vec::new(),
        Network::Deny,
        BackendChoice::Auto,
        None,
    )
    .with_spec_options(SpecOptions::confining())
    .with_composition(Composition {
        max_mode,
        network: Network::Deny,
        ceiling_sources: Vec::new(),
        unconfinable: None,
        workspace: None,
    });
    let mut registry = env.registry();
    for name in [TASK, UPDATE_PLAN] {
        if !registry.contains(name) {
            let _ = registry.register(name);
        }
    }
    env.with_registry(registry)
}

fn specs(specs: Vec<agentd::api::model::ToolSpec>) -> Value {
    Value::Array(
        specs
            .iter()
            .map(|spec| serde_json::to_value(spec).unwrap_or(Value::Null))
            .collect(),
    )
}

const COMMENT: &str = "The tools as the model is offered them (name, description, JSON schema \
of the arguments), in the order it sees them. offered: for a session whose effective sandbox \
mode is the key, under a confine-helper whose ceiling is max_mode and whose backend confines; \
escalation: the modes bash's sandbox_permissions offers (the fields exist only when it is not \
empty). On a machine with no usable backend, escalation offers danger-full-access alone, where the \
ceiling allows it. child_agents: what a child \
agent is offered, never escalating. The task tool is offered only when agentd.toml defines a \
persona; its description then ends with the personas, \"The personas: NAME (DESCRIPTION); ...\". \
update_plan is the top-level agent's alone: child agents are not offered it.";

pub fn schemas() -> Vec<Generated> {
    Mode::ALL
        .iter()
        .map(|&max_mode| {
            let env = session_tools(max_mode);
            let mut offered = Map::new();
            for effective in Mode::ALL.iter().copied().filter(|m| *m <= max_mode) {
                let escalation: Vec<&str> = env
                    .options_for(effective)
                    .escalation
                    .iter()
                    .map(|m| m.as_str())
                    .collect();
                let tools = specs(tools::offered(&env, &ToolScope::top(), effective));
                offered.insert(
                    effective.as_str().to_owned(),
                    json!({"escalation": escalation, "tools": tools}),
                );
            }
            let document = json!({
                "$comment": format!("{NOTICE} {COMMENT}"),
                "max_mode": max_mode.as_str(),
                "offered": offered,
                "child_agents": specs(tools::offered_confined(&env, &ToolScope::top())),
            });
            let text = serde_json::to_string_pretty(&document).unwrap_or_default();
            Generated {
                path: format!("docs/contracts/tools/max-mode-{}.json", max_mode.as_str()),
                text: format!("{text}\n"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bash(tools: &Value) -> &Value {
        tools
            .as_array()
            .and_then(|tools| tools.iter().find(|t| t["name"] == "bash"))
            .expect("bash is offered")
    }

    fn mode(word: &str) -> Mode {
        word.parse().expect("a mode word")
    }

    #[test]
    fn bash_escalates_to_exactly_the_wider_modes_the_ceiling_grants() {
        let files = schemas();
        assert_eq!(files.len(), Mode::ALL.len());
        for file in &files {
            let document: Value = serde_json::from_str(&file.text).expect("JSON");
            let max_mode = mode(document["max_mode"].as_str().expect("max_mode"));
            let offered = document["offered"].as_object().expect("offered");
            assert_eq!(
                offered.len(),
                Mode::ALL.iter().filter(|m| **m <= max_mode).count()
            );
            for (effective, offered) in offered {
                let effective = mode(effective);
                let expected: Vec<&str> = Mode::ALL
                    .iter()
                    .filter(|m| **m > effective && **m <= max_mode)
                    .map(|m| m.as_str())
                    .collect();
                assert_eq!(offered["escalation"], json!(expected), "{file:?}");
                let properties = &bash(&offered["tools"])["parameters"]["properties"];
                match expected.is_empty() {
                    true => assert!(properties.get("sandbox_permissions").is_none()),
                    false => assert_eq!(properties["sandbox_permissions"]["enum"], json!(expected)),
                }
            }
            let child = &bash(&document["child_agents"])["parameters"]["properties"];
            assert!(child.get("sandbox_permissions").is_none());
            assert!(child.get("command").is_some());
        }
    }
}
