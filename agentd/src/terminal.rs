//! Text from session logs and commands, made safe to print on a terminal.
//!
//! A session log holds what commands printed and what a model wrote, and either may carry
//! sequences a terminal obeys: OSC 52 (`ESC ] 52 ; c ; … BEL`) sets the clipboard, CSI
//! (`ESC [`) moves the cursor and rewrites what was shown above, the 8-bit C1 controls do the
//! same in a single character. Everything agentd prints of such text — `agentd sessions list`
//! and `show`, the notes `agentd run` adds about a command, `agentd demo`, error messages that
//! quote paths or values — goes through [`visible`], which shows each control as text:
//!
//! | what | shown as |
//! |---|---|
//! | a C0 control but `\n` and `\t` (ESC, CR, BEL, backspace, …), and DEL | `\xNN`: `\x1b`, `\x0d`, `\x07`, `\x08`, `\x7f` |
//! | a C1 control, U+0080 to U+009F | `\u{NN}`: the 8-bit CSI is `\u{9b}` |
//! | a byte that is not part of valid UTF-8 | `\xNN`, like the C0 bytes: `\xff` |
//! | a bidirectional formatting character (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069), which reorders what a reader sees around it | `\u{NNNN}`: `\u{202e}` |
//!
//! Everything else, `\n` and `\t` included, is printed as it is. A backslash in the text is not
//! doubled: the form is for reading, not for turning back into the bytes. The JSON agentd prints
//! for a terminal goes through [`json_line`], which escapes the same characters as JSON `\u`
//! escapes, so it stays valid JSON with the same value.
//!
//! What `agentd run` passes through is the one exception: a command's own stdout and stderr
//! reach the terminal untouched, because the user asked for that program's output.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io;

/// `text` with every control but `\n` and `\t` shown as an escape (see the module
/// documentation); borrowed when there is none.
pub fn visible(text: &str) -> Cow<'_, str> {
    visible_bytes(text.as_bytes())
}

/// [`visible`] for bytes that need not be UTF-8: an invalid byte is shown as `\xNN`.
pub fn visible_bytes(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(text) = std::str::from_utf8(bytes)
        && !text.chars().any(is_escaped)
    {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(bytes.len() + 16);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if !is_escaped(c) {
                shown.push(c);
            } else if c.is_ascii() {
                // Writing to a String cannot fail.
                let _ = write!(shown, "\\x{:02x}", u32::from(c));
            } else {
                let _ = write!(shown, "\\u{{{:x}}}", u32::from(c));
            }
        }
        for byte in chunk.invalid() {
            let _ = write!(shown, "\\x{byte:02x}");
        }
    }
    Cow::Owned(shown)
}

/// `text` on one line for a person to read: its whitespace runs (newlines included) as one
/// space, what a terminal would obey shown as [`visible`] does, and, when `max` is given, cut
/// to at most that many characters, the last being `…`.
pub fn one_line(text: &str, max: Option<usize>) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = visible(&line).into_owned();
    match max {
        Some(max) if line.chars().count() > max => {
            let mut short: String = line.chars().take(max.saturating_sub(1)).collect();
            short.push('…');
            short
        }
        _ => line,
    }
}

/// The characters [`visible`] escapes: C0 but `\n` and `\t`, DEL, C1 (Unicode's `Cc`), and
/// the bidirectional formatting characters.
fn is_escaped(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `value` as one line of JSON in which no character a terminal obeys appears raw: serde_json
/// already escapes C0, and DEL and C1 become `\u007f` … `\u009f`.
pub fn json_line<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, ControlEscaping);
    value.serialize(&mut serializer)?;
    // The serializer writes only UTF-8, and the escapes it adds are ASCII.
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// serde_json's compact format, with DEL and the C1 controls escaped in strings.
struct ControlEscaping;

/// `text` split at its first character to escape: what comes before it, the character, and
/// what follows; `None` when it has none.
fn split_at_escaped(text: &str) -> Option<(&str, char, &str)> {
    let (at, c) = text.char_indices().find(|(_, c)| is_escaped(*c))?;
    let (before, from) = text.split_at_checked(at)?;
    let after = from.strip_prefix(c)?;
    Some((before, c, after))
}

impl serde_json::ser::Formatter for ControlEscaping {
    fn write_string_fragment<W>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        let mut rest = fragment;
        while let Some((before, c, after)) = split_at_escaped(rest) {
            writer.write_all(before.as_bytes())?;
            write!(writer, "\\u{:04x}", u32::from(c))?;
            rest = after;
        }
        writer.write_all(rest.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_osc_52_clipboard_sequence_is_shown_not_obeyed() {
        assert_eq!(
            visible("\x1b]52;c;cm0gLXJmIH4=\x07"),
            "\\x1b]52;c;cm0gLXJmIH4=\\x07"
        );
        assert_eq!(
            visible("\x1b]52;c;cm0gLXJmIH4=\x1b\\"),
            "\\x1b]52;c;cm0gLXJmIH4=\\x1b\\"
        );
    }

    #[test]
    fn csi_cursor_movement_is_shown_not_obeyed() {
        assert_eq!(visible("ok\x1b[2A\x1b[2K"), "ok\\x1b[2A\\x1b[2K");
        assert_eq!(visible("\x1b[H\x1b[J"), "\\x1b[H\\x1b[J");
    }

    #[test]
    fn c1_controls_are_shown_by_code_point() {
        assert_eq!(visible("a\u{9b}2Ab"), "a\\u{9b}2Ab");
        assert_eq!(visible("\u{80}\u{9d}\u{9f}"), "\\u{80}\\u{9d}\\u{9f}");
    }

    #[test]
    fn bidirectional_formatting_characters_are_shown_by_code_point() {
        // `rm -rf ~ #` reading right to left after U+202E: shown, not obeyed.
        assert_eq!(
            visible("echo hi \u{202e}~ fr- mr\u{202c}"),
            "echo hi \\u{202e}~ fr- mr\\u{202c}"
        );
        assert_eq!(visible("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
        assert_eq!(visible("\u{200f}\u{61c}"), "\\u{200f}\\u{61c}");
        assert_eq!(visible("שלום"), "שלום", "right-to-left letters are text");
    }

    #[test]
    fn one_line_joins_whitespace_escapes_controls_and_cuts() {
        assert_eq!(one_line("a\n  b\tc", None), "a b c");
        assert_eq!(one_line("x\u{1b}[2K", None), "x\\x1b[2K");
        assert_eq!(one_line("abcdef", Some(4)), "abc…");
        assert_eq!(one_line("abcd", Some(4)), "abcd");
    }

    #[test]
    fn carriage_return_bell_backspace_and_del_are_shown() {
        assert_eq!(visible("done\rfake"), "done\\x0dfake");
        assert_eq!(visible("ring\x07"), "ring\\x07");
        assert_eq!(visible("abc\x08\x08x"), "abc\\x08\\x08x");
        assert_eq!(visible("\x00\x7f"), "\\x00\\x7f");
    }

    #[test]
    fn invalid_utf8_bytes_are_shown_as_bytes() {
        assert_eq!(visible_bytes(b"ok\xff\xfe!"), "ok\\xff\\xfe!");
        // A raw 0x9b byte is not UTF-8 at all: shown as the byte it is.
        assert_eq!(visible_bytes(b"\x9b2A"), "\\x9b2A");
        assert_eq!(visible_bytes("é\u{9b}".as_bytes()), "é\\u{9b}");
    }

    #[test]
    fn plain_text_newlines_and_tabs_are_unchanged_and_borrowed() {
        for text in [
            "",
            "plain text",
            "a\nb\n",
            "col\tcol",
            "ünïcödé ✓ 日本",
            "back\\slash",
        ] {
            let shown = visible(text);
            assert_eq!(shown, text);
            assert!(matches!(shown, Cow::Borrowed(_)), "{text:?}");
        }
    }

    #[test]
    fn json_lines_escape_del_and_c1_and_stay_the_same_json() {
        let value = serde_json::json!({"reason": "a\u{1b}[2A\u{9b}b\u{7f}"});
        let line = json_line(&value).expect("serializes");
        assert_eq!(line, r#"{"reason":"a\u001b[2A\u009bb\u007f"}"#);
        assert!(!line.chars().any(char::is_control), "{line:?}");
        let back: serde_json::Value = serde_json::from_str(&line).expect("parses");
        assert_eq!(back, value);
    }

    #[test]
    fn json_lines_without_controls_are_serde_jsons_own() {
        let value = serde_json::json!({"exit": {"code": 0}, "text": "é ✓ \"q\" \\"});
        assert_eq!(
            json_line(&value).expect("serializes"),
            serde_json::to_string(&value).expect("serializes")
        );
    }
}
