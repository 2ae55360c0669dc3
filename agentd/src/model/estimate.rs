//! A cheap, deterministic estimate of how many tokens a request sends, for deciding when a
//! session's history is compacted.
//!
//! It is an estimate, not a count: agentd does not know the model's tokenizer, and asking the
//! server would cost a request. A token is taken as [`BYTES_PER_TOKEN`] bytes of the request's
//! messages and tool schemas as JSON (the form the session log stores, close to what goes on the
//! wire), rounded up. English prose and code run at about three to four bytes a token in the
//! common tokenizers, so the estimate errs a little low for code-heavy histories; the threshold
//! (`compaction.threshold`, 0.8 of the window by default) leaves room for that and for the answer.

use super::ChatRequest;

/// The bytes taken as one token.
pub const BYTES_PER_TOKEN: u64 = 4;

/// The estimated tokens of `request`: its messages (the system message included) and the
/// schemas of the tools it offers, as JSON bytes divided by [`BYTES_PER_TOKEN`], rounded up.
pub fn estimate_tokens(request: &ChatRequest) -> u64 {
    let bytes: usize = request
        .messages
        .iter()
        .map(json_len)
        .chain(request.tools.iter().map(json_len))
        .sum();
    (bytes as u64).div_ceil(BYTES_PER_TOKEN)
}

fn json_len(value: &impl serde::Serialize) -> usize {
    // A value that cannot be written as JSON (none of these types can fail) counts as nothing.
    serde_json::to_vec(value).map_or(0, |bytes| bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Message, ToolSpec};

    #[test]
    fn an_empty_request_is_no_tokens() {
        assert_eq!(estimate_tokens(&ChatRequest::default()), 0);
    }

    #[test]
    fn the_estimate_is_the_json_bytes_of_messages_and_tools_over_four_rounded_up() {
        // {"role":"user","content":"hi"} is 30 bytes: 8 tokens (7.5 rounded up).
        let request = ChatRequest {
            messages: vec![Message::user("hi")],
            ..ChatRequest::default()
        };
        assert_eq!(estimate_tokens(&request), 8);

        let tool = ToolSpec {
            name: "bash".into(),
            description: "Runs a command".into(),
            parameters: serde_json::json!({"type": "object"}),
        };
        let tool_bytes = serde_json::to_vec(&tool).expect("json").len() as u64;
        let with_tool = ChatRequest {
            messages: vec![Message::user("hi")],
            tools: vec![tool],
            agent: None,
        };
        assert_eq!(estimate_tokens(&with_tool), (30 + tool_bytes).div_ceil(4));
    }

    #[test]
    fn the_estimate_grows_with_the_history_and_is_the_same_every_time() {
        let short = ChatRequest {
            messages: vec![Message::system("be brief"), Message::user("a")],
            ..ChatRequest::default()
        };
        let mut long = short.clone();
        long.messages.push(Message::user("x".repeat(4000)));
        assert!(estimate_tokens(&long) >= estimate_tokens(&short) + 1000);
        assert_eq!(estimate_tokens(&long), estimate_tokens(&long.clone()));
    }
}
