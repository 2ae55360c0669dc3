//! What a `session/prompt` says: its text, as the log and the editor's replay keep it (text
//! blocks as they are, resources named), and the resources it attached or linked, read for the
//! model (`prompt/resources`).
//!
//! An embedded text resource is taken as the editor sent it; a `resource_link` to a `file:` URI
//! is read as `read_file` reads under the session's mode (confined by the helper), never by
//! agentd itself. Each resource is included whole or not at all, up to [`RESOURCE_CAP`] bytes,
//! and all of a prompt's together up to [`TOTAL_CAP`]; one that is not included is named with
//! why. Links to other schemes, binary resources, images and audio are named, not read.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use agent_client_protocol::v1::schema::{ContentBlock, EmbeddedResourceResource};
use confine_protocol::Mode;

use crate::session::PromptResource;
use crate::tools::{self, ToolEnv, Unread};

/// The most bytes of one resource included.
pub const RESOURCE_CAP: usize = 64 * 1024;
/// The most bytes of all of a prompt's resources together.
pub const TOTAL_CAP: usize = 256 * 1024;

/// The text of a prompt: text blocks as they are, resources named.
pub fn text(prompt: &[ContentBlock]) -> String {
    let parts: Vec<String> = prompt
        .iter()
        .map(|block| match block {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::ResourceLink(link) => format!("[resource: {}]", link.uri),
            ContentBlock::Resource(embedded) => {
                format!("[resource: {}]", uri_of(&embedded.resource))
            }
            other => format!("[unsupported content: {}]", content_kind(other)),
        })
        .collect();
    parts.join("\n")
}

fn uri_of(resource: &EmbeddedResourceResource) -> &str {
    match resource {
        EmbeddedResourceResource::TextResourceContents(t) => &t.uri,
        EmbeddedResourceResource::BlobResourceContents(b) => &b.uri,
        _ => "",
    }
}

fn content_kind(block: &ContentBlock) -> &'static str {
    match block {
        ContentBlock::Image(_) => "image",
        ContentBlock::Audio(_) => "audio",
        _ => "other",
    }
}

/// The prompt's resources, read under `mode`, in the prompt's order; empty when it has none.
pub async fn resources(env: &ToolEnv, prompt: &[ContentBlock], mode: Mode) -> Vec<PromptResource> {
    let mut left = TOTAL_CAP;
    let mut out = Vec::new();
    for block in prompt {
        let (uri, text) = match block {
            ContentBlock::ResourceLink(link) => {
                (link.uri.clone(), read_link(env, &link.uri, mode).await)
            }
            ContentBlock::Resource(embedded) => match &embedded.resource {
                EmbeddedResourceResource::TextResourceContents(t) => {
                    (t.uri.clone(), Ok(t.text.clone()))
                }
                EmbeddedResourceResource::BlobResourceContents(b) => {
                    (b.uri.clone(), Err(Unread::Binary))
                }
                _ => continue,
            },
            _ => continue,
        };
        let cap = RESOURCE_CAP.min(left);
        let text = text.and_then(|t| Unread::within(t, cap));
        if let Ok(t) = &text {
            left -= t.len();
        }
        let (text, not_included) = match text {
            Ok(t) => (Some(t), None),
            Err(why) => (None, Some(why.to_string())),
        };
        out.push(PromptResource {
            uri,
            text,
            not_included,
        });
    }
    out
}

/// The text a `file:` link names, read as `read_file` reads; other schemes are not read.
async fn read_link(env: &ToolEnv, uri: &str, mode: Mode) -> Result<String, Unread> {
    let Some(path) = file_path(uri) else {
        return Err(Unread::NotAFileLink);
    };
    tools::read_context(env, &path, mode, RESOURCE_CAP).await
}

/// The absolute path of a `file:` URI (`file:///a%20b`, `file://localhost/a`), percent-decoded.
fn file_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let mut bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    while let Some((&byte, after)) = bytes.split_first() {
        if byte == b'%' {
            let (hex, after) = after.split_at_checked(2)?;
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            bytes = after;
        } else {
            out.push(byte);
            bytes = after;
        }
    }
    if out.contains(&0) {
        return None;
    }
    Some(PathBuf::from(OsString::from_vec(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_become_absolute_paths_and_others_do_not() {
        assert_eq!(file_path("file:///w/a.rs"), Some(PathBuf::from("/w/a.rs")));
        assert_eq!(
            file_path("file:///w/a%20b.rs"),
            Some(PathBuf::from("/w/a b.rs"))
        );
        assert_eq!(
            file_path("file://localhost/w/a.rs#L3"),
            Some(PathBuf::from("/w/a.rs"))
        );
        for bad in [
            "https://example.org/a",
            "file://host/a",
            "file:relative",
            "file:///a%2",
            "file:///a%zz",
            "file:///a%00b",
        ] {
            assert_eq!(file_path(bad), None, "{bad}");
        }
    }
}
