//! A provider that replays model turns from a file, for tests and `agentd demo`.
//!
//! The script is TOML, a list of `[[turn]]` tables:
//!
//! ```toml
//! [[turn]]
//! text = "Let me look at the file."
//! [[turn.tool_calls]]
//! name = "bash"
//! arguments = { command = "cat hello.txt" }
//!
//! [[turn]]
//! delay_ms = 300                  # answer slowly, like a real model
//! reasoning = "The file says hi." # shown as the model's thoughts, before the text
//! text = "Done."
//!
//! [[turn]]
//! error = "simulated outage"      # fail instead of answering
//! ```
//!
//! Keys of a turn, all optional: `text`; `stream`, a file (relative to the script) whose
//! content follows `text` as more of the answer, read as it arrives until its end — a FIFO a
//! test writes to, which fills up once agentd stops taking the answer; `reasoning`, delivered
//! before the text; `tool_calls`,
//! each with a `name` and `arguments` (a
//! table, sent as its JSON text, or a string, sent verbatim even if it is not valid JSON);
//! `finish` (`stop`, `tool_calls`, `length`, `content_filter` or anything else; by default
//! `tool_calls` when the turn has calls and `stop` otherwise); `delay_ms`, a wait before the
//! answer; `error`, which makes the call fail with that message after the wait.
//!
//! Which turn answers is a pure function of the history: turn N (counting from 1) answers a
//! request whose history holds N - 1 assistant messages, so a session restarted from its log
//! continues where it was. A failed call adds no assistant message, so an `error` turn answers
//! every call that reaches it. Past the last turn the provider answers
//! [`ScriptedProvider::END_TEXT`] and stops.
//!
//! A child agent (started by the `task` tool) of a persona with `[[agents.PERSONA.turn]]` tables
//! replays those instead, by the same rule over its own history, with tool call ids
//! `call_PERSONA_<turn>_<i>`; a persona without them replays the top-level turns.
//!
//! A top-level `record = "FILE"` (relative to the script) makes the provider append, for every
//! request, one JSON line with the tools it was offered (`[{name, description, parameters}]`):
//! what a real model would have seen, for tests of the schemas.
//!
//! Tool call ids are `call_<turn>_<i>`, both counting from 1: the first call of the first turn
//! is `call_1_1`. Text is delivered in several deltas, split after whitespace, and arguments in
//! two fragments, so the streaming paths of the caller are exercised.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::{
    AssistantTurn, ChatRequest, CompleteFuture, Delta, Deltas, FinishReason, Message, ModelError,
    Provider, Reasoning, ToolCall,
};

/// The scripted provider.
#[derive(Debug, Clone)]
pub struct ScriptedProvider {
    origin: PathBuf,
    turns: Vec<ScriptedTurn>,
    /// The turns of child agents, by persona.
    agent_turns: BTreeMap<String, Vec<ScriptedTurn>>,
    record: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    #[serde(default)]
    turn: Vec<ScriptedTurn>,
    /// `[[agents.PERSONA.turn]]`: the turns a child agent of that persona replays.
    #[serde(default)]
    agents: BTreeMap<String, AgentScript>,
    record: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentScript {
    #[serde(default)]
    turn: Vec<ScriptedTurn>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedTurn {
    text: Option<String>,
    stream: Option<PathBuf>,
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ScriptedCall>,
    finish: Option<String>,
    delay_ms: Option<u64>,
    error: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedCall {
    name: String,
    arguments: Option<serde_json::Value>,
}

impl ScriptedProvider {
    /// The answer once the script has no more turns.
    pub const END_TEXT: &'static str = "(The scripted model has no more turns.)";

    /// Reads the script at `path`.
    pub fn from_file(path: &Path) -> Result<ScriptedProvider, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::Script {
            path: path.to_owned(),
            detail: e.to_string(),
        })?;
        ScriptedProvider::from_toml(&text, path)
    }

    /// Parses a script; `origin` is the file it came from, for messages.
    pub fn from_toml(text: &str, origin: &Path) -> Result<ScriptedProvider, ModelError> {
        let file: ScriptFile = toml::from_str(text).map_err(|e| ModelError::Script {
            path: origin.to_owned(),
            detail: e.to_string().trim_end().to_owned(),
        })?;
        let base = origin.parent().unwrap_or(Path::new("."));
        Ok(ScriptedProvider {
            origin: origin.to_owned(),
            turns: file.turn,
            agent_turns: file
                .agents
                .into_iter()
                .map(|(persona, script)| (persona, script.turn))
                .collect(),
            record: file.record.map(|r| base.join(r)),
        })
    }

    /// Appends the tools `req` offers to `path`, one JSON line.
    fn record_tools(&self, path: &Path, req: &ChatRequest) -> Result<(), ModelError> {
        use std::io::Write;
        let failed = |e: std::io::Error| ModelError::Script {
            path: path.to_owned(),
            detail: format!("cannot record the request: {e}"),
        };
        let mut line = serde_json::to_string(&req.tools).map_err(|e| failed(e.into()))?;
        line.push('\n');
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .map_err(failed)
    }

    async fn answer(
        &self,
        req: &ChatRequest,
        deltas: &mut Deltas,
    ) -> Result<AssistantTurn, ModelError> {
        let position = req
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let number = position + 1;
        if let Some(path) = &self.record {
            self.record_tools(path, req)?;
        }
        // A child of a persona the script has turns for replays those, with ids of its own.
        let (turns, prefix) = match req
            .agent
            .as_ref()
            .and_then(|p| Some((p, self.agent_turns.get(p)?)))
        {
            Some((persona, turns)) => (turns, format!("call_{persona}_")),
            None => (&self.turns, "call_".to_owned()),
        };
        let Some(turn) = turns.get(position) else {
            let answer = Answer {
                reasoning: "",
                text: Self::END_TEXT,
                stream: None,
                tool_calls: Vec::new(),
                finish: None,
            };
            return answer.deliver(deltas).await;
        };
        if let Some(ms) = turn.delay_ms {
            // The simulated latency of the model itself.
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if let Some(message) = &turn.error {
            return Err(ModelError::Scripted {
                turn: number,
                message: message.clone(),
            });
        }
        let calls = turn
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, call)| ToolCall {
                id: format!("{prefix}{number}_{}", i + 1),
                name: call.name.clone(),
                arguments: match &call.arguments {
                    None => "{}".to_owned(),
                    Some(serde_json::Value::String(raw)) => raw.clone(),
                    Some(value) => value.to_string(),
                },
            })
            .collect();
        let stream = turn
            .stream
            .as_ref()
            .map(|path| self.origin.parent().unwrap_or(Path::new(".")).join(path));
        let answer = Answer {
            reasoning: turn.reasoning.as_deref().unwrap_or(""),
            text: turn.text.as_deref().unwrap_or(""),
            stream: stream.as_deref(),
            tool_calls: calls,
            finish: turn.finish.as_deref(),
        };
        answer.deliver(deltas).await
    }
}

/// One scripted answer, before it is delivered.
struct Answer<'a> {
    reasoning: &'a str,
    text: &'a str,
    /// The file whose content follows `text`.
    stream: Option<&'a Path>,
    tool_calls: Vec<ToolCall>,
    finish: Option<&'a str>,
}

impl Answer<'_> {
    /// Delivers the answer as deltas and returns it.
    async fn deliver(self, deltas: &mut Deltas) -> Result<AssistantTurn, ModelError> {
        for piece in split_after_whitespace(self.reasoning) {
            deltas.send(Delta::Reasoning(piece.to_owned())).await;
        }
        for piece in split_after_whitespace(self.text) {
            deltas.send(Delta::Text(piece.to_owned())).await;
        }
        let mut text = self.text.to_owned();
        if let Some(path) = self.stream {
            stream_file(path, deltas, &mut text).await?;
        }
        for (index, call) in self.tool_calls.iter().enumerate() {
            deltas
                .send(Delta::ToolCallStarted {
                    index,
                    id: call.id.clone(),
                    name: call.name.clone(),
                })
                .await;
            let mut middle = call.arguments.len() / 2;
            while !call.arguments.is_char_boundary(middle) {
                middle -= 1;
            }
            let (first, second) = call.arguments.split_at(middle);
            for fragment in [first, second] {
                if !fragment.is_empty() {
                    let fragment = fragment.to_owned();
                    deltas
                        .send(Delta::ToolCallArguments { index, fragment })
                        .await;
                }
            }
        }
        let finish = match self.finish {
            Some(reason) => FinishReason::from(reason),
            None if self.tool_calls.is_empty() => FinishReason::Stop,
            None => FinishReason::ToolCalls,
        };
        Ok(AssistantTurn {
            text,
            reasoning: (!self.reasoning.is_empty()).then(|| Reasoning {
                text: self.reasoning.to_owned(),
                field: None,
            }),
            tool_calls: self.tool_calls,
            finish,
            usage: None,
        })
    }
}

/// The most of a `stream` file read at once.
const STREAM_READ: usize = 64 * 1024;

/// Reads the file at `path` to its end as it arrives, delivering it as text deltas (cut after
/// whitespace, as `text` is) and adding it to `text`; the next read waits until the deltas
/// before it are taken. A character cut by a read waits for its last bytes; bytes that are not
/// UTF-8 are an error naming the file. The file is opened and read on tokio's blocking pool, so
/// a FIFO is read as its writer writes (a read still blocked when the call is dropped ends when
/// the writer writes or closes).
async fn stream_file(
    path: &Path,
    deltas: &mut Deltas,
    text: &mut String,
) -> Result<(), ModelError> {
    let failed = |detail: String| ModelError::Script {
        path: path.to_owned(),
        detail,
    };
    let owned = path.to_owned();
    let mut file = blocking(move || std::fs::File::open(owned))
        .await
        .map_err(|e| failed(format!("cannot open the stream: {e}")))?;
    let mut unfinished = Vec::new();
    loop {
        let (back, chunk) = blocking(move || {
            use std::io::Read;
            let mut chunk = vec![0; STREAM_READ];
            let read = file.read(&mut chunk)?;
            chunk.truncate(read);
            Ok((file, chunk))
        })
        .await
        .map_err(|e| failed(format!("cannot read the stream: {e}")))?;
        file = back;
        if chunk.is_empty() {
            break;
        }
        unfinished.extend_from_slice(&chunk);
        let whole = match std::str::from_utf8(&unfinished) {
            Ok(all) => all.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(e) => return Err(failed(format!("the stream is not UTF-8: {e}"))),
        };
        let rest = unfinished.split_off(whole);
        let piece = String::from_utf8(std::mem::replace(&mut unfinished, rest))
            .map_err(|e| failed(format!("the stream is not UTF-8: {e}")))?;
        for word in split_after_whitespace(&piece) {
            deltas.send(Delta::Text(word.to_owned())).await;
        }
        text.push_str(&piece);
    }
    if unfinished.is_empty() {
        Ok(())
    } else {
        Err(failed(
            "the stream ends inside a UTF-8 character".to_owned(),
        ))
    }
}

/// `work` on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(std::io::Error::other)?
}

/// `text` cut after each run of whitespace: "a b  c" gives "a ", "b  ", "c".
fn split_after_whitespace(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (at, c) in text.char_indices() {
        if c.is_whitespace() {
            in_space = true;
        } else if in_space {
            pieces.push(&text[start..at]);
            start = at;
            in_space = false;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

impl Provider for ScriptedProvider {
    fn complete<'a>(&'a self, req: &'a ChatRequest, deltas: &'a mut Deltas) -> CompleteFuture<'a> {
        Box::pin(self.answer(req, deltas))
    }

    fn describe(&self) -> String {
        format!("scripted model {}", self.origin.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = r#"
[[turn]]
text = "Let me look at the file."
[[turn.tool_calls]]
name = "bash"
arguments = { command = "cat hello.txt" }
[[turn.tool_calls]]
name = "read_file"
arguments = '{"path": '

[[turn]]
error = "simulated outage"

[[turn]]
reasoning = "Nearly there."
text = "Done."
finish = "length"
"#;

    fn provider() -> ScriptedProvider {
        ScriptedProvider::from_toml(SCRIPT, Path::new("turns.toml")).expect("parses")
    }

    fn history(assistant_messages: usize) -> ChatRequest {
        let mut messages = vec![Message::user("go")];
        for _ in 0..assistant_messages {
            messages.push(Message::Assistant {
                text: Some("earlier".into()),
                reasoning: None,
                tool_calls: vec![],
            });
            messages.push(Message::tool("x", "result"));
        }
        ChatRequest {
            messages,
            tools: vec![],
            agent: None,
        }
    }

    async fn run(
        provider: &ScriptedProvider,
        req: &ChatRequest,
    ) -> (Vec<Delta>, Result<AssistantTurn, ModelError>) {
        crate::test_support::answer_of(provider, req).await
    }

    #[tokio::test]
    async fn the_first_turn_streams_text_and_tool_calls() {
        let (deltas, turn) = run(&provider(), &history(0)).await;
        let turn = turn.expect("answers");
        assert_eq!(turn.text, "Let me look at the file.");
        assert_eq!(turn.finish, FinishReason::ToolCalls);
        assert_eq!(
            turn.tool_calls,
            [
                ToolCall {
                    id: "call_1_1".into(),
                    name: "bash".into(),
                    arguments: r#"{"command":"cat hello.txt"}"#.into(),
                },
                ToolCall {
                    id: "call_1_2".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path": "#.into(),
                },
            ]
        );
        let texts: Vec<&str> = deltas
            .iter()
            .filter_map(|d| match d {
                Delta::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(texts, ["Let ", "me ", "look ", "at ", "the ", "file."]);
        let mut arguments = String::new();
        let mut started = 0;
        for delta in &deltas {
            match delta {
                Delta::ToolCallStarted { index: 0, id, .. } => {
                    assert_eq!(id, "call_1_1");
                    started += 1;
                }
                Delta::ToolCallArguments { index: 0, fragment } => {
                    assert_eq!(started, 1, "arguments after the start");
                    arguments.push_str(fragment);
                }
                _ => {}
            }
        }
        assert_eq!(arguments, turn.tool_calls[0].arguments);
        let fragments = deltas
            .iter()
            .filter(|d| matches!(d, Delta::ToolCallArguments { index: 0, .. }))
            .count();
        assert_eq!(fragments, 2);
    }

    #[tokio::test]
    async fn the_turn_is_chosen_by_the_assistant_messages_in_the_history() {
        let provider = provider();
        let (deltas, result) = run(&provider, &history(1)).await;
        let err = result.expect_err("the error turn");
        assert!(
            matches!(&err, ModelError::Scripted { turn: 2, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("simulated outage"), "{err}");
        assert!(deltas.is_empty());
        let (_, again) = run(&provider, &history(1)).await;
        assert!(again.is_err(), "the same history reaches the same turn");

        let (deltas, turn) = run(&provider, &history(2)).await;
        let turn = turn.expect("third turn");
        assert_eq!(turn.text, "Done.");
        assert_eq!(turn.finish, FinishReason::Length);
        assert_eq!(
            turn.reasoning.map(|r| r.text).as_deref(),
            Some("Nearly there.")
        );
        assert_eq!(
            deltas[..2],
            [
                Delta::Reasoning("Nearly ".into()),
                Delta::Reasoning("there.".into())
            ],
            "the reasoning comes first"
        );

        let (deltas, turn) = run(&provider, &history(3)).await;
        let turn = turn.expect("past the end");
        assert_eq!(turn.text, ScriptedProvider::END_TEXT);
        assert_eq!(turn.finish, FinishReason::Stop);
        assert!(turn.tool_calls.is_empty());
        assert!(deltas.len() > 1);
    }

    #[tokio::test]
    async fn a_delayed_turn_answers_after_its_delay() {
        let provider = ScriptedProvider::from_toml(
            "[[turn]]\ndelay_ms = 20\ntext = \"late\"\n",
            Path::new("t.toml"),
        )
        .expect("parses");
        let started = std::time::Instant::now();
        let (_, turn) = run(&provider, &history(0)).await;
        assert_eq!(turn.expect("answers").text, "late");
        assert!(started.elapsed() >= Duration::from_millis(20));
    }

    #[test]
    fn a_bad_script_is_an_error_naming_the_file() {
        let err = ScriptedProvider::from_toml("[[turn]]\ntxet = \"x\"\n", Path::new("/s/t.toml"))
            .expect_err("typo");
        let text = err.to_string();
        assert!(
            text.contains("/s/t.toml") && text.contains("txet"),
            "{text}"
        );
        let err = ScriptedProvider::from_toml(
            "[[turn]]\n[[turn.tool_calls]]\narguments = {}\n",
            Path::new("t.toml"),
        )
        .expect_err("a call needs a name");
        assert!(err.to_string().contains("name"), "{err}");
        let err = ScriptedProvider::from_file(Path::new("/nonexistent/turns.toml"))
            .expect_err("missing file");
        assert!(err.to_string().contains("/nonexistent/turns.toml"), "{err}");
    }

    #[test]
    fn text_splits_after_whitespace_and_joins_back() {
        for text in ["", "one", " lead", "a b  c\n", "é ü\tx"] {
            let pieces = split_after_whitespace(text);
            assert_eq!(pieces.concat(), text);
        }
        assert_eq!(split_after_whitespace("a b  c"), ["a ", "b  ", "c"]);
    }
}
