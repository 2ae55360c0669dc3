//! `docs/contracts/helper-protocol.md`: the protocol version, the schema hash and the message
//! definitions of `confine-protocol`, from the text its `wire!` block compiles and hashes.

use confine_protocol::frame::HEADER_LEN;
use confine_protocol::{MAX_FRAME, PROTOCOL_VERSION, REFUSAL_VERSION, SCHEMA_HASH, SCHEMA_TEXT};

use crate::generated::Generated;

/// The schema text laid out as Rust, one item per block, a blank line between. The text is the token text
/// `stringify!` made of the definitions, so it parses; if it ever did not, the text itself is
/// given, so the contract still states it exactly.
fn readable_schema() -> String {
    let text = SCHEMA_TEXT.concat();
    let Ok(file) = syn::parse_file(&text) else {
        return format!("{text}\n");
    };
    let items: Vec<String> = file
        .items
        .into_iter()
        .map(|item| {
            prettyplease::unparse(&syn::File {
                shebang: None,
                attrs: Vec::new(),
                items: vec![item],
            })
        })
        .collect();
    items.join("\n")
}

pub fn helper_protocol() -> Generated {
    let body = format!(
        "# The helper protocol

The wire protocol between agentd and confine-helper (the crate `confine-protocol`).

| | |
|---|---|
| Protocol version (`PROTOCOL_VERSION`) | {PROTOCOL_VERSION} |
| Schema hash (`SCHEMA_HASH`) | `{SCHEMA_HASH:016x}` |
| Largest payload (`MAX_FRAME`) | {MAX_FRAME} bytes |

## Frames

A connection is a stream of frames: a {HEADER_LEN}-byte little-endian payload length, then one
postcard-encoded message of that many bytes (at least one, at most `MAX_FRAME`). Each side first
sends a bare `Hello`; both compare its protocol version and schema hash with their own and close
the connection on any difference. A service that will not serve a connection (a cap on its
connections is reached) sends a refusal instead of its greeting and closes: a `Hello` of protocol
version {REFUSAL_VERSION}, which no protocol has, whose `software` is the reason, for a person
(`Hello::refusal`). After the greetings agentd sends `Request`s and the helper answers with
`Reply`s. A `Spawn` carries its descriptors as `SCM_RIGHTS`
ancillary data of the same `sendmsg`. Any error in a frame or a message closes the connection.

postcard encodes an enum variant by its index and a struct's fields by position, so variants and
fields are only ever appended, never reordered or removed; the first variant of every policy enum
is its most restrictive meaning.

## Messages

Every type that crosses the wire is declared in one `wire!` block of
`protocol/src/messages.rs`, which also makes the token text of those declarations
(`SCHEMA_TEXT`). The schema hash is FNV-1a (64-bit) of that text exactly as compiled; the
listing below is the same text, laid out one item per block. A change to any of these
definitions changes the hash, and the handshake then refuses a pair built from different ones.

```rust
{}```
",
        readable_schema()
    );
    Generated::markdown("docs/contracts/helper-protocol.md", &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The syntax tree of `text`, printed: equal for two texts of the same items, whatever
    /// their layout.
    fn tree(text: &str) -> String {
        prettyplease::unparse(&syn::parse_file(text).expect("Rust items"))
    }

    #[test]
    fn the_listing_is_the_hashed_schema_item_for_item() {
        let listing = readable_schema();
        assert_ne!(
            listing,
            format!("{}\n", SCHEMA_TEXT.concat()),
            "the schema did not parse"
        );
        assert_eq!(tree(&listing), tree(&SCHEMA_TEXT.concat()));
        assert!(listing.contains("pub enum Request {"), "{listing}");
    }

    #[test]
    fn a_changed_listing_is_not_the_schema() {
        let changed = readable_schema().replacen("ReadOnly", "ReadWrite", 1);
        assert_ne!(tree(&changed), tree(&SCHEMA_TEXT.concat()));
    }
}
