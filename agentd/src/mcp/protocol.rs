//! The part of the Model Context Protocol agentd speaks as a client: `initialize` and
//! `notifications/initialized`, `tools/list` (every page), `tools/call`, over either transport
//! ([`Rpc`]: stdio or streamable HTTP). agentd declares no capability of its own: it offers a
//! server nothing to call back.
//!
//! A call's result is reduced to what a model reads: the text parts joined, every other part
//! named (`[image: image/png]`), and whether the server said the call failed (`isError`). The
//! parts that are not text (images, audio, resources and links to them) are also kept as they
//! are for the editor to show ([`CallOutput::shown`]), checked and within [`SHOWN_CAP`].

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::rpc::{Rpc, RpcError};
use crate::cancel::Cancel;

/// The protocol revision agentd asks for.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// How long a server has to answer each request of its start: `initialize` and each page of
/// `tools/list`.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The most pages of `tools/list` read from one server.
const MAX_PAGES: usize = 100;

/// A tool a server offers.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// Its name on the server.
    pub name: String,
    pub description: String,
    /// The JSON schema of its arguments: always an object schema.
    pub input_schema: Value,
}

/// What a server said at `initialize`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Initialized {
    /// Whether it has tools (the `tools` capability).
    pub has_tools: bool,
    /// The protocol revision it answered with.
    pub protocol_version: String,
}

/// A call's result as the model reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOutput {
    pub text: String,
    /// The parts that are not text, as the editor is shown them (MCP's content parts are ACP's
    /// content blocks): each well formed, [`SHOWN_CAP`] bytes in all at most.
    pub shown: Vec<Value>,
    /// The server reported that the tool failed.
    pub is_error: bool,
    /// What the allow-list proxy decided for the server since its previous call, when it has
    /// one.
    pub proxy: Option<crate::proxy::Decisions>,
}

/// `initialize`, then `notifications/initialized`.
pub async fn initialize(rpc: &impl Rpc, timeout: Duration) -> Result<Initialized, RpcError> {
    let method = "initialize";
    let params = json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": { "name": "agentd", "version": env!("CARGO_PKG_VERSION") },
    });
    let result = rpc
        .request(method, params, timeout, &Cancel::never())
        .await?;
    let malformed = |why: &str| RpcError::Malformed {
        method: method.to_owned(),
        why: why.to_owned(),
    };
    let Some(protocol_version) = result.get("protocolVersion").and_then(Value::as_str) else {
        return Err(malformed("the answer has no protocolVersion"));
    };
    let has_tools = result
        .get("capabilities")
        .and_then(|c| c.get("tools"))
        .is_some_and(|tools| !tools.is_null());
    rpc.notify("notifications/initialized", json!({})).await?;
    Ok(Initialized {
        has_tools,
        protocol_version: protocol_version.to_owned(),
    })
}

/// Every tool of the server, following `nextCursor` page by page.
pub async fn list_tools(rpc: &impl Rpc, timeout: Duration) -> Result<Vec<McpTool>, RpcError> {
    let method = "tools/list";
    let malformed = |why: String| RpcError::Malformed {
        method: method.to_owned(),
        why,
    };
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen = Vec::new();
    for _ in 0..MAX_PAGES {
        let params = match &cursor {
            Some(cursor) => json!({ "cursor": cursor }),
            None => json!({}),
        };
        let page = rpc
            .request(method, params, timeout, &Cancel::never())
            .await?;
        let Some(listed) = page.get("tools").and_then(Value::as_array) else {
            return Err(malformed("the answer has no tools list".to_owned()));
        };
        for tool in listed {
            tools.push(tool_of(tool).map_err(|e| malformed(e.to_string()))?);
        }
        cursor = match page.get("nextCursor") {
            None | Some(Value::Null) => return Ok(tools),
            Some(Value::String(next)) if !seen.contains(next) => Some(next.clone()),
            Some(Value::String(next)) => {
                return Err(malformed(format!("the cursor {next:?} came twice")));
            }
            Some(other) => return Err(malformed(format!("nextCursor {other} is not a string"))),
        };
        seen.extend(cursor.clone());
    }
    Err(malformed(format!(
        "the list did not end within {MAX_PAGES} pages"
    )))
}

fn tool_of(tool: &Value) -> Result<McpTool, Malformed> {
    let Some(name) = tool.get("name").and_then(Value::as_str) else {
        return Err(Malformed::Nameless(tool.clone()));
    };
    let description = tool
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let input_schema = match tool.get("inputSchema") {
        Some(schema @ Value::Object(_)) => schema.clone(),
        None => json!({ "type": "object", "properties": {} }),
        Some(other) => {
            return Err(Malformed::Schema {
                name: name.to_owned(),
                schema: other.clone(),
            });
        }
    };
    Ok(McpTool {
        name: name.to_owned(),
        description,
        input_schema,
    })
}

/// What of a server's answer is not what MCP says, in the words of [`RpcError::Malformed`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Malformed {
    #[error("a tool has no name: {0}")]
    Nameless(Value),
    #[error("the tool {name:?} has an inputSchema that is not an object: {schema}")]
    Schema { name: String, schema: Value },
    #[error("the result is not an object: {0}")]
    NotAnObject(Value),
    #[error("isError {0} is not a boolean")]
    IsError(Value),
    #[error("content {0} is not a list")]
    Content(Value),
}

/// `tools/call` of `name` with `arguments`, waiting at most `timeout` and until `cancel`.
pub async fn call_tool(
    rpc: &impl Rpc,
    name: &str,
    arguments: Value,
    timeout: Duration,
    cancel: &Cancel,
) -> Result<CallOutput, RpcError> {
    let method = "tools/call";
    let params = json!({ "name": name, "arguments": arguments });
    let result = rpc.request(method, params, timeout, cancel).await?;
    call_output(&result).map_err(|why| RpcError::Malformed {
        method: method.to_owned(),
        why: why.to_string(),
    })
}

/// A `tools/call` result as the model reads it.
pub fn call_output(result: &Value) -> Result<CallOutput, Malformed> {
    let Value::Object(object) = result else {
        return Err(Malformed::NotAnObject(result.clone()));
    };
    let result = object;
    let is_error = match result.get("isError") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(Malformed::IsError(other.clone())),
    };
    let parts: &[Value] = match result.get("content") {
        None | Some(Value::Null) => &[],
        Some(Value::Array(parts)) => parts,
        Some(other) => return Err(Malformed::Content(other.clone())),
    };
    let mut texts: Vec<String> = parts.iter().map(part_text).collect();
    if texts.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        texts.push(structured.to_string());
    }
    Ok(CallOutput {
        text: texts.join("\n"),
        shown: shown_parts(parts),
        is_error,
        proxy: None,
    })
}

/// The most bytes of a call's parts the editor is shown (their JSON), so one call cannot make a
/// session log or the connection carry megabytes: a small image fits, a large one is named.
pub const SHOWN_CAP: usize = 256 * 1024;

/// The longest URI and MIME type of a part shown to the editor.
const SHOWN_FIELD_CAP: usize = 2048;

/// The non-text `parts` the editor can show, in order: those whose fields are what ACP expects
/// (a string `data` of base64 and a `mimeType` for an image or audio; a `uri` and a `name` for a
/// link; a `uri` and a string `text` or `blob` for a resource), each rebuilt from those fields
/// only, while they fit in [`SHOWN_CAP`]. A part that does not fit, or is malformed, is left out:
/// the model's text names it still.
fn shown_parts(parts: &[Value]) -> Vec<Value> {
    let mut shown = Vec::new();
    let mut left = SHOWN_CAP;
    for part in parts.iter().filter_map(shown_part) {
        let size = part.to_string().len();
        if size > left {
            continue;
        }
        left -= size;
        shown.push(part);
    }
    shown
}

/// One part as the editor is shown it, if it is one it can show.
fn shown_part(part: &Value) -> Option<Value> {
    let field = |value: &Value, key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| s.len() <= SHOWN_FIELD_CAP && !s.chars().any(char::is_control))
            .map(str::to_owned)
    };
    let base64 = |value: &Value, key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .filter(|data| {
                data.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
            })
            .map(str::to_owned)
    };
    match part.get("type").and_then(Value::as_str)? {
        kind @ ("image" | "audio") => Some(json!({
            "type": kind,
            "data": base64(part, "data")?,
            "mimeType": field(part, "mimeType")?,
        })),
        "resource_link" => Some(json!({
            "type": "resource_link",
            "uri": field(part, "uri")?,
            "name": field(part, "name").or_else(|| field(part, "uri"))?,
        })),
        "resource" => {
            let resource = part.get("resource")?;
            let mut out = Map::new();
            out.insert("uri".to_owned(), json!(field(resource, "uri")?));
            if let Some(mime) = field(resource, "mimeType") {
                out.insert("mimeType".to_owned(), json!(mime));
            }
            let (key, content) = match (
                resource.get("text").and_then(Value::as_str),
                base64(resource, "blob"),
            ) {
                (Some(text), _) => ("text", json!(text)),
                (None, Some(blob)) => ("blob", json!(blob)),
                (None, None) => return None,
            };
            out.insert(key.to_owned(), content);
            Some(json!({ "type": "resource", "resource": out }))
        }
        _ => None,
    }
}

/// One content part as text: a text part's text, anything else named.
fn part_text(part: &Value) -> String {
    let field = |key: &str| part.get(key).and_then(Value::as_str);
    let kind = field("type").unwrap_or("unknown");
    match kind {
        "text" => field("text").unwrap_or_default().to_owned(),
        "image" | "audio" => match field("mimeType") {
            Some(mime) => format!("[{kind}: {mime}]"),
            None => format!("[{kind}]"),
        },
        "resource" => {
            let resource = part.get("resource");
            let text = resource.and_then(|r| r.get("text")).and_then(Value::as_str);
            let uri = resource.and_then(|r| r.get("uri")).and_then(Value::as_str);
            match (text, uri) {
                (Some(text), _) => text.to_owned(),
                (None, Some(uri)) => format!("[resource: {uri}]"),
                (None, None) => "[resource]".to_owned(),
            }
        }
        "resource_link" => match field("uri") {
            Some(uri) => format!("[resource link: {uri}]"),
            None => "[resource link]".to_owned(),
        },
        other => format!("[{} content]", crate::terminal::one_line(other, Some(40))),
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::*;
    use crate::mcp::rpc::RpcClient;
    use crate::test_support::within;

    /// A server over an in-memory duplex that answers each request with `answer(request)`;
    /// returns the client and the requests and notifications the server read.
    fn serve(
        answer: impl Fn(&Value) -> Value + Send + 'static,
    ) -> (RpcClient, tokio::task::JoinHandle<Vec<Value>>) {
        let (client_out, server_in) = tokio::io::duplex(64 * 1024);
        let (mut server_out, client_in) = tokio::io::duplex(64 * 1024);
        let client = RpcClient::new(client_in, client_out);
        let server = tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut lines = BufReader::new(server_in).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let message: Value = serde_json::from_str(&line).expect("json");
                if message.get("id").is_some() {
                    let reply = json!({
                        "jsonrpc": "2.0", "id": message["id"], "result": answer(&message)
                    });
                    let mut text = reply.to_string();
                    text.push('\n');
                    server_out.write_all(text.as_bytes()).await.expect("write");
                }
                seen.push(message);
            }
            seen
        });
        (client, server)
    }

    #[tokio::test]
    async fn initialize_sends_agentds_revision_and_then_initialized() {
        let (client, server) = serve(|_| {
            json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                   "serverInfo": {"name": "s", "version": "1"}})
        });
        let init = within(initialize(&client, START_TIMEOUT))
            .await
            .expect("initialized");
        assert_eq!(
            init,
            Initialized {
                has_tools: true,
                protocol_version: "2025-06-18".into()
            }
        );
        drop(client);
        let seen = within(server).await.expect("server");
        assert_eq!(seen[0]["method"], "initialize");
        assert_eq!(
            seen[0]["params"],
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "agentd", "version": env!("CARGO_PKG_VERSION")}})
        );
        assert_eq!(seen[1]["method"], "notifications/initialized");
    }

    #[tokio::test]
    async fn an_initialize_answer_without_a_revision_is_refused() {
        let (client, _server) = serve(|_| json!({"capabilities": {}}));
        let err = within(initialize(&client, START_TIMEOUT))
            .await
            .expect_err("malformed");
        assert!(err.to_string().contains("no protocolVersion"), "{err}");
    }

    #[tokio::test]
    async fn the_tool_list_follows_every_cursor() {
        let (client, server) = serve(|request| match request["params"]["cursor"].as_str() {
            None => json!({"tools": [{"name": "echo", "description": "Echo",
                                      "inputSchema": {"type": "object"}}],
                           "nextCursor": "p2"}),
            Some("p2") => json!({"tools": [{"name": "bare"}], "nextCursor": null}),
            Some(other) => panic!("unexpected cursor {other}"),
        });
        let tools = within(list_tools(&client, START_TIMEOUT))
            .await
            .expect("tools");
        assert_eq!(tools.len(), 2);
        assert_eq!(tools[0].name, "echo");
        assert_eq!(tools[0].description, "Echo");
        assert_eq!(
            tools[1].input_schema,
            json!({"type": "object", "properties": {}})
        );
        drop(client);
        let seen = within(server).await.expect("server");
        assert_eq!(seen.len(), 2);
    }

    #[tokio::test]
    async fn a_tool_list_that_never_ends_is_refused() {
        let (client, _server) = serve(|_| json!({"tools": [], "nextCursor": "again"}));
        let err = within(list_tools(&client, START_TIMEOUT))
            .await
            .expect_err("loops");
        assert!(err.to_string().contains("came twice"), "{err}");
    }

    #[tokio::test]
    async fn a_call_sends_name_and_arguments_and_reads_the_content() {
        let (client, server) = serve(|_| {
            json!({"content": [{"type": "text", "text": "wrote a.txt"},
                               {"type": "image", "data": "AAAA", "mimeType": "image/png"}],
                   "isError": false})
        });
        let output = within(call_tool(
            &client,
            "write_note",
            json!({"path": "a.txt"}),
            START_TIMEOUT,
            &Cancel::never(),
        ))
        .await
        .expect("called");
        assert_eq!(
            output,
            CallOutput {
                text: "wrote a.txt\n[image: image/png]".into(),
                shown: vec![json!({"type": "image", "data": "AAAA", "mimeType": "image/png"})],
                is_error: false,
                proxy: None,
            }
        );
        drop(client);
        let seen = within(server).await.expect("server");
        assert_eq!(
            seen[0]["params"],
            json!({"name": "write_note", "arguments": {"path": "a.txt"}})
        );
    }

    #[test]
    fn the_editor_is_shown_only_well_formed_parts_within_the_cap() {
        let big = "A".repeat(SHOWN_CAP);
        let output = call_output(&json!({"content": [
            {"type": "image", "data": "not base64!", "mimeType": "image/png"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png\u{1b}[2J"},
            {"type": "image", "data": "AAAA"},
            {"type": "image", "data": big, "mimeType": "image/png"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png", "uri": "x", "_meta": {}},
            {"type": "resource", "resource": {"uri": "file:///n"}},
        ]}))
        .expect("an output");
        // Only the well formed image that fits, without the fields ACP does not define.
        assert_eq!(
            output.shown,
            [json!({"type": "image", "data": "AAAA", "mimeType": "image/png"})]
        );
        // The model's text still names every part.
        assert_eq!(output.text.lines().count(), 6, "{}", output.text);
    }

    #[test]
    fn every_kind_of_content_part_reads_as_text() {
        let output = call_output(&json!({
            "content": [
                {"type": "audio", "data": "", "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "file:///a", "text": "inline"}},
                {"type": "resource", "resource": {"uri": "file:///b", "blob": "AA=="}},
                {"type": "resource_link", "uri": "file:///c", "name": "c"},
                {"type": "hologram"},
                {"no": "type"}
            ],
            "isError": true
        }))
        .expect("an output");
        assert!(output.is_error);
        assert_eq!(
            output.text,
            "[audio: audio/wav]\ninline\n[resource: file:///b]\n[resource link: file:///c]\n\
             [hologram content]\n[unknown content]"
        );
        // What the editor is shown of them: the parts it can show, rebuilt from their fields.
        assert_eq!(
            output.shown,
            [
                json!({"type": "audio", "data": "", "mimeType": "audio/wav"}),
                json!({"type": "resource", "resource": {"uri": "file:///a", "text": "inline"}}),
                json!({"type": "resource", "resource": {"uri": "file:///b", "blob": "AA=="}}),
                json!({"type": "resource_link", "uri": "file:///c", "name": "c"}),
            ]
        );
        let structured =
            call_output(&json!({"content": [], "structuredContent": {"n": 1}})).expect("an output");
        assert_eq!(structured.text, "{\"n\":1}");
        assert!(!structured.is_error);
    }

    #[test]
    fn a_result_of_the_wrong_shape_is_an_error() {
        assert!(call_output(&json!([1])).is_err());
        assert!(call_output(&json!({"content": "text"})).is_err());
        assert!(call_output(&json!({"content": [], "isError": "yes"})).is_err());
    }
}
