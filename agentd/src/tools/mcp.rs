//! The tools of a session's MCP servers as tools of the session: registered once the servers
//! started ([`start_mcp`]), offered with the schema their server gave, run by handing the call
//! to the server, which runs under the call's mode and the session's sandbox profile
//! ([`ToolEnv::policy`]) exactly as a `bash` command of that call would. What the server
//! answers is the model's text, cut like a command's output; a result the server marked as an
//! error, and a server that could not answer, are failed calls saying so.

use confine_protocol::Mode;
use serde_json::{Value, json};

use super::call::{CallContext, ToolResult};
use super::env::ToolEnv;
use super::output::{HeadTail, MODEL_OUTPUT_CAP};
use crate::deny_read::ExpandError;
use crate::mcp::Placement;
use crate::model::{ToolCall, ToolSpec};
use crate::narrowing;

/// Starts the session's MCP servers under `mode` and registers their tools after those it
/// has. Returns a sentence per server that failed and per tool not offered, for the client; the
/// caller marks the servers ready ([`McpServers::mark_ready`]) once the client was told, and a
/// prompt waits until then ([`McpServers::ready`]).
///
/// [`McpServers::ready`]: crate::mcp::McpServers::ready
/// [`McpServers::mark_ready`]: crate::mcp::McpServers::mark_ready
pub async fn start_mcp(env: &ToolEnv, mode: Mode) -> Vec<String> {
    if env.mcp().is_empty() {
        return Vec::new();
    }
    let placement = match placement(env, mode) {
        Ok(placement) => placement,
        Err(why) => return vec![format!("The MCP servers were not started: {why}.")],
    };
    let registry = env.registry();
    let taken = |name: &str| registry.contains(name);
    let Some(mut notices) = env.mcp().start_all(&placement, &taken).await else {
        return Vec::new();
    };
    for name in env.mcp().tool_names() {
        if let Err(e) = env.register(&name) {
            notices.push(format!("The MCP tool {name} is not offered: {e}."));
        }
    }
    notices
}

/// Where the call's server runs: the workspace, under the call's policy (its denied reads as
/// they are found now).
fn placement(env: &ToolEnv, mode: Mode) -> Result<Placement<'_>, ExpandError> {
    Ok(Placement {
        helper: env.helper(),
        workspace: env.workspace(),
        backend: env.backend(),
        policy: env.policy(mode)?,
        proxy: env.proxy(mode),
    })
}

/// The schema the model is offered for the MCP tool `name`: its server's description and input
/// schema.
pub(super) fn spec(env: &ToolEnv, name: &str) -> Option<ToolSpec> {
    let exposed = env.mcp().tool(name)?;
    let description = match exposed.tool.description.trim() {
        "" => format!(
            "The tool {} of the MCP server {}.",
            exposed.tool.name, exposed.server
        ),
        text => text.to_owned(),
    };
    Some(ToolSpec {
        name: exposed.name,
        description,
        parameters: exposed.tool.input_schema,
    })
}

/// Whether `name` is one of the session's MCP tools.
pub(super) fn is_mcp_tool(env: &ToolEnv, name: &str) -> bool {
    env.mcp().tool(name).is_some()
}

/// The fact holding the parts of an MCP result the editor is shown as they are (ACP content
/// blocks): images, audio, resources (`crate::mcp::CallOutput::shown`).
pub const SHOWN_CONTENT: &str = "content";

/// Runs one call of an MCP tool.
pub(super) async fn run(env: &ToolEnv, call: &ToolCall, ctx: CallContext) -> ToolResult {
    let mode = ctx.mode;
    let Some(exposed) = env.mcp().tool(&call.name) else {
        return ToolResult::failed(
            format!("unknown tool {:?}", call.name),
            json!({ "mode": mode.as_str(), "invalid_call": true }),
        );
    };
    let facts = |extra: Value| {
        let mut facts = json!({
            "mode": mode.as_str(),
            "mcp_server": exposed.server,
            "mcp_tool": exposed.tool.name,
        });
        if let (Some(facts), Value::Object(extra)) = (facts.as_object_mut(), extra) {
            facts.extend(extra);
        }
        facts
    };
    let arguments = match arguments(&call.arguments) {
        Ok(arguments) => arguments,
        Err(why) => {
            return ToolResult::failed(
                format!("{}: {why}", call.name),
                facts(json!({ "invalid_call": true })),
            );
        }
    };
    let placement = match placement(env, mode) {
        Ok(placement) => placement,
        Err(why) => {
            return ToolResult::failed(why.to_string(), facts(json!({ "mcp_failure": true })));
        }
    };
    let called = env
        .mcp()
        .call(&call.name, arguments, &placement, &ctx.cancel)
        .await;
    // A narrowing since the call's mode was read: its server must not go on running wider.
    if let Some(to) = env.background().narrowed_since(ctx.narrowings)
        && narrowing::stops(mode, to)
    {
        env.mcp().narrow(to);
    }
    let proxy = |output: &crate::mcp::CallOutput| match &output.proxy {
        Some(d) => json!({ "decisions": d.kept, "total": d.total }),
        None => Value::Null,
    };
    // The parts the editor can show (an image, a resource): beside the facts, never read by the
    // model, which reads them named in the text.
    let shown = |output: &crate::mcp::CallOutput| match output.shown.as_slice() {
        [] => Value::Null,
        parts => json!(parts),
    };
    match called {
        Ok(output) if !output.is_error => {
            let extra = json!({
                "is_error": false,
                "proxy": proxy(&output),
                SHOWN_CONTENT: shown(&output),
            });
            ToolResult::completed(capped(&output.text), facts(without_null(extra)))
        }
        Ok(output) => {
            let marker = format!("[the MCP server {} reported an error]", exposed.server);
            let text = match capped(&output.text) {
                text if text.is_empty() => marker,
                text => format!("{text}\n{marker}"),
            };
            let extra = json!({
                "is_error": true,
                "proxy": proxy(&output),
                SHOWN_CONTENT: shown(&output),
            });
            ToolResult::failed(text, facts(without_null(extra)))
        }
        Err(e) => ToolResult::failed(e.to_string(), facts(json!({ "mcp_failure": true }))),
    }
}

/// `value` without its null members: a server without the allow-list has no `proxy` fact.
fn without_null(mut value: Value) -> Value {
    if let Value::Object(map) = &mut value {
        map.retain(|_, v| !v.is_null());
    }
    value
}

/// The call's arguments: a JSON object (no text at all counts as `{}`).
fn arguments(text: &str) -> Result<Value, BadArguments> {
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(object @ Value::Object(_)) => Ok(object),
        Ok(_) => Err(BadArguments::NotAnObject),
        Err(e) => Err(BadArguments::NotJson(e)),
    }
}

/// Why an MCP call's arguments cannot be sent to its server.
#[derive(Debug, thiserror::Error)]
enum BadArguments {
    #[error("the arguments must be a JSON object")]
    NotAnObject,
    #[error("the arguments are not valid JSON: {0}")]
    NotJson(serde_json::Error),
}

/// `text` cut like a command's output for the model: its beginning and end, with a marker of
/// what was left out between.
fn capped(text: &str) -> String {
    let mut kept = HeadTail::new(MODEL_OUTPUT_CAP);
    kept.push(text.as_bytes());
    kept.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_an_object() {
        let arguments = |text: &str| arguments(text).map_err(|e| e.to_string());
        assert_eq!(arguments(""), Ok(json!({})));
        assert_eq!(arguments(r#"{"a":1}"#), Ok(json!({"a": 1})));
        assert_eq!(
            arguments("[1]"),
            Err("the arguments must be a JSON object".to_owned())
        );
        assert!(arguments("{").unwrap_err().contains("not valid JSON"));
    }

    #[test]
    fn long_text_is_cut_like_a_commands_output() {
        let text = "x".repeat(MODEL_OUTPUT_CAP * 2);
        let cut = capped(&text);
        assert!(cut.len() < text.len());
        assert!(cut.contains("[output truncated:"), "{}", &cut[..100]);
        assert_eq!(capped("short"), "short");
    }
}
