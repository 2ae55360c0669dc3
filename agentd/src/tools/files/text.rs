//! The text of a file as the file tools take it in and give it out: the window of lines a read
//! shows, the checks that what was read is text (and, before the editor reads a path, that it is
//! a regular file), and the replacement an edit makes.

use std::fs;
use std::io;
#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::tools::spec::READ_CAP;

/// The lines of a text a `read_file` call returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Window<'a> {
    pub text: &'a str,
    /// The first line shown, counting from 1.
    pub first: u64,
    /// The last line shown (whole or cut); `first - 1` when nothing was.
    pub last: u64,
    pub total: u64,
    /// The last line shown was cut at the byte cap.
    pub cut: bool,
}

impl Window<'_> {
    /// The text with a last line saying how to read on, when it stops before the end.
    pub fn render(&self) -> String {
        let mut out = self.text.to_owned();
        let note = if self.total == 0 {
            Some("[the file is empty]".to_owned())
        } else if self.cut {
            Some(format!(
                "[line {} is longer than {} KiB and was cut; read it with bash, e.g. cut or fold]",
                self.last,
                READ_CAP / 1024
            ))
        } else if self.last < self.total {
            Some(format!(
                "[showed lines {}-{} of {}; read on with offset={}]",
                self.first,
                self.last,
                self.total,
                self.last + 1
            ))
        } else {
            None
        };
        if let Some(note) = note {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&note);
        }
        out
    }
}

/// A read whose first line is past the end of the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "offset {offset} is past the end of the file, which has {total} line{}",
    if *total == 1 { "" } else { "s" }
)]
pub(crate) struct PastTheEnd {
    pub offset: u64,
    pub total: u64,
}

/// Lines `offset` (from 1) on of `text`, at most `limit` of them and `cap` bytes, whole lines
/// only unless the first one alone is longer than `cap`.
pub(crate) fn window(
    text: &str,
    offset: u64,
    limit: Option<u64>,
    cap: usize,
) -> Result<Window<'_>, PastTheEnd> {
    let total = text.split_inclusive('\n').count() as u64;
    if total == 0 && offset == 1 {
        return Ok(Window {
            text: "",
            first: 1,
            last: 0,
            total: 0,
            cut: false,
        });
    }
    if offset > total {
        return Err(PastTheEnd { offset, total });
    }
    let mut lines = text.split_inclusive('\n');
    let skipped: usize = lines
        .by_ref()
        .take(usize::try_from(offset - 1).unwrap_or(usize::MAX))
        .map(str::len)
        .sum();
    let rest = &text[skipped..];
    let mut len = 0;
    let mut shown = 0u64;
    for line in lines {
        if limit.is_some_and(|limit| shown >= limit) || len + line.len() > cap {
            break;
        }
        len += line.len();
        shown += 1;
    }
    if shown == 0 {
        // The first line alone is over the cap: show its beginning.
        let mut cut = cap.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        return Ok(Window {
            text: &rest[..cut],
            first: offset,
            last: offset,
            total,
            cut: true,
        });
    }
    Ok(Window {
        text: &rest[..len],
        first: offset,
        last: offset + shown - 1,
        total,
        cut: false,
    })
}

/// Why what was read is not text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotText {
    #[error("it is a binary file (it contains NUL bytes)")]
    Binary,
    /// Not UTF-8: the offset of the first invalid byte.
    #[error("it is not UTF-8 text (invalid byte at offset {0})")]
    NotUtf8(usize),
}

/// `bytes` as text, or why it is not.
pub(super) fn as_text(bytes: Vec<u8>) -> Result<String, NotText> {
    if bytes.contains(&0) {
        return Err(NotText::Binary);
    }
    String::from_utf8(bytes).map_err(|e| NotText::NotUtf8(e.utf8_error().valid_up_to()))
}

/// Checks text that came from the editor the way local files are checked.
pub(super) fn checked_text(text: String) -> Result<String, NotText> {
    if text.contains('\0') {
        return Err(NotText::Binary);
    }
    Ok(text)
}

/// What kind of file `meta` describes, for a refusal.
fn kind_of(meta: &fs::Metadata) -> &'static str {
    let kind = meta.file_type();
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// Why a path is not opened for the editor to read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpenError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("it is a directory; list it with bash (ls)")]
    Directory,
    /// Another kind of file that is not a regular one (`kind_of` words it).
    #[error("it is {0}, not a regular file, and is not opened")]
    NotRegular(&'static str),
}

/// Opens `path` for reading only if it is a regular file: first as a path (`O_PATH`, which
/// opens nothing), then, once checked, for reading through `/proc/self/fd`, which reaches
/// exactly the file checked. `Ok(None)` when it does not exist.
pub(super) fn open_regular(path: &Path) -> Result<Option<(fs::File, fs::Metadata)>, OpenError> {
    // macOS has no `O_PATH`: the path is opened for reading without waiting (a FIFO opens at
    // once, with no writer) and without becoming a controlling terminal, and only a regular
    // file is then read, from that same descriptor.
    #[cfg(target_os = "linux")]
    let flags = nix::libc::O_PATH;
    #[cfg(target_os = "macos")]
    let flags = nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY;
    let located = fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path);
    let located = match located {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let meta = located.metadata()?;
    if meta.is_dir() {
        return Err(OpenError::Directory);
    }
    if !meta.is_file() {
        return Err(OpenError::NotRegular(kind_of(&meta)));
    }
    #[cfg(target_os = "macos")]
    let file = located;
    #[cfg(target_os = "linux")]
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(format!("/proc/self/fd/{}", located.as_raw_fd()))?;
    Ok(Some((file, meta)))
}

/// Why an edit cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EditError {
    #[error(
        "old_string was not found in the file (0 occurrences); it must match exactly, \
         whitespace and indentation included: read the file again and copy the text"
    )]
    NotFound,
    /// `old_string` occurs this many times, and `replace_all` is not set.
    #[error(
        "old_string occurs {0} times in the file; include more surrounding text to make it \
         unique, or set replace_all to replace all {0}"
    )]
    Ambiguous(usize),
}

/// The replacement `edit_file` makes: the new text and how many occurrences were replaced.
pub(crate) fn apply_edit(
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<(String, usize), EditError> {
    let count = text.matches(old).count();
    match count {
        0 => Err(EditError::NotFound),
        1 => Ok((text.replacen(old, new, 1), 1)),
        n if replace_all => Ok((text.replace(old, new), n)),
        n => Err(EditError::Ambiguous(n)),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::test_support::workspace;

    #[test]
    fn an_edit_replaces_exactly_one_occurrence_unless_told_all() {
        assert_eq!(
            apply_edit("a b c", "b", "B", false),
            Ok(("a B c".to_owned(), 1))
        );
        let e = apply_edit("x x x", "x", "y", false)
            .expect_err("ambiguous")
            .to_string();
        assert!(e.contains("occurs 3 times"), "{e}");
        assert_eq!(
            apply_edit("x x x", "x", "y", true),
            Ok(("y y y".to_owned(), 3))
        );
        let e = apply_edit("abc", "d", "e", true)
            .expect_err("missing")
            .to_string();
        assert!(e.contains("not found"), "{e}");
        assert!(e.contains("0 occurrences"), "{e}");
        // Occurrences do not overlap.
        assert_eq!(
            apply_edit("aaaa", "aa", "b", true),
            Ok(("bb".to_owned(), 2))
        );
    }

    #[test]
    fn a_window_shows_whole_lines_and_says_how_to_read_on() {
        let text = "one\ntwo\nthree\nfour";
        let all = window(text, 1, None, READ_CAP).expect("window");
        assert_eq!(all.render(), text);
        let middle = window(text, 2, Some(2), READ_CAP).expect("window");
        assert_eq!(
            middle.render(),
            "two\nthree\n[showed lines 2-3 of 4; read on with offset=4]"
        );
        let last = window(text, 4, Some(10), READ_CAP).expect("window");
        assert_eq!(last.render(), "four");
        let capped = window(text, 1, None, 9).expect("window");
        assert_eq!(
            capped.render(),
            "one\ntwo\n[showed lines 1-2 of 4; read on with offset=3]"
        );
    }

    #[test]
    fn a_window_past_the_end_or_of_an_empty_file_says_so() {
        let e = window("a\nb\n", 3, None, READ_CAP).expect_err("past the end");
        assert_eq!(
            e.to_string(),
            "offset 3 is past the end of the file, which has 2 lines"
        );
        assert_eq!(
            window("", 1, None, READ_CAP).expect("empty").render(),
            "[the file is empty]"
        );
        assert!(window("", 2, None, READ_CAP).is_err());
    }

    #[test]
    fn a_line_longer_than_the_cap_is_cut_at_a_character_boundary() {
        let text = "ééééé\nnext\n";
        let shown = window(text, 1, None, 5).expect("window");
        assert_eq!(shown.text, "éé");
        assert!(shown.cut);
        assert!(shown.render().contains("[line 1 is longer than"));
    }

    #[test]
    fn binary_and_non_utf8_files_are_refused() {
        assert!(
            as_text(b"ab\0cd".to_vec())
                .expect_err("binary")
                .to_string()
                .contains("binary")
        );
        assert!(
            as_text(b"caf\xe9\n".to_vec())
                .expect_err("latin-1")
                .to_string()
                .contains("not UTF-8 text (invalid byte at offset 3)")
        );
        assert_eq!(
            as_text("café\n".as_bytes().to_vec()),
            Ok("café\n".to_owned())
        );
    }

    #[test]
    fn before_the_editor_reads_fifos_and_devices_are_refused_without_being_opened() {
        let (_s, ws, _) = workspace("files-fifo");
        nix::unistd::mkfifo(&ws.join("fifo"), nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        symlink("/dev/zero", ws.join("zero")).expect("symlink");
        // Opening a FIFO for reading with nobody writing would block forever: the test
        // finishing at all is half the proof.
        let why = open_regular(&ws.join("fifo"))
            .expect_err("fifo")
            .to_string();
        assert!(why.contains("a FIFO, not a regular file"), "{why}");
        let why = open_regular(&ws.join("zero"))
            .expect_err("device")
            .to_string();
        assert!(why.contains("a device, not a regular file"), "{why}");
        assert!(
            open_regular(&ws)
                .expect_err("dir")
                .to_string()
                .contains("directory")
        );
        assert!(matches!(open_regular(&ws.join("none")), Ok(None)));
    }
}
