//! The unified diff a restore plan shows a person: per text file, what the restore would
//! change, with three lines of context; a binary or large file is named as such instead.

/// The most bytes of each side of a change `tool/result` keeps: 64 KiB of the text before and
/// 64 KiB of the text after, or neither. A restore plan shows no text diff of a file larger
/// than that either: the session log keeps diffs and the plan shows them within one cap.
pub const DIFF_TEXT_CAP: usize = 64 * 1024;

/// Lines of context around each change.
const CONTEXT: usize = 3;
/// The most cells of the comparison table; beyond it the whole file is shown replaced.
const MAX_CELLS: usize = 4_000_000;

/// What a side of a file diff is.
pub(super) enum Side {
    Absent,
    Bytes(Vec<u8>),
    /// Present, but not read (a link, a directory, a file left out).
    Other(String),
}

/// Text lines of `bytes`, or why it is not shown as text.
fn text(bytes: &[u8]) -> Result<Vec<&str>, &'static str> {
    if bytes.len() > DIFF_TEXT_CAP {
        return Err("large");
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "binary")?;
    if text.contains('\0') {
        return Err("binary");
    }
    Ok(text.split_inclusive('\n').collect())
}

/// The diff of `shown` (a path for people) from `old` (now) to `new` (the checkpoint's).
pub(super) fn file_diff(shown: &str, old: &Side, new: &Side) -> String {
    let (old_name, new_name) = (
        match old {
            Side::Absent => "/dev/null".to_owned(),
            _ => format!("a{shown}"),
        },
        match new {
            Side::Absent => "/dev/null".to_owned(),
            _ => format!("b{shown}"),
        },
    );
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    let lines = |side: &Side| -> Result<Vec<String>, NotText> {
        match side {
            Side::Absent => Ok(Vec::new()),
            Side::Bytes(bytes) => text(bytes)
                .map(|l| l.into_iter().map(str::to_owned).collect())
                .map_err(|why| NotText::Bytes {
                    why,
                    size: bytes.len(),
                }),
            Side::Other(what) => Err(NotText::Other(what.clone())),
        }
    };
    match (lines(old), lines(new)) {
        (Ok(a), Ok(b)) => out.push_str(&hunks(&a, &b)),
        (a, b) => {
            let say = |side: Result<Vec<String>, NotText>| match side {
                Ok(lines) => format!("text ({} lines)", lines.len()),
                Err(why) => why.to_string(),
            };
            out.push_str(&format!(
                "(not shown as text: now {}, after the restore {})\n",
                say(a),
                say(b)
            ));
        }
    }
    out
}

/// Why one side of a change is not shown as text.
#[derive(Debug, thiserror::Error)]
enum NotText {
    /// `why` is "large" or "binary".
    #[error("{why} file ({size} bytes)")]
    Bytes { why: &'static str, size: usize },
    /// Not a file's bytes: what it is instead.
    #[error("{0}")]
    Other(String),
}

/// One line of an edit script.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Keep,
    Remove,
    Add,
}

/// The edit script from `a` to `b`: a longest common subsequence within the trimmed middle.
fn script(a: &[String], b: &[String]) -> Vec<Op> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut ops = vec![Op::Keep; prefix];
    if ma.len().saturating_mul(mb.len()) > MAX_CELLS {
        ops.extend(std::iter::repeat_n(Op::Remove, ma.len()));
        ops.extend(std::iter::repeat_n(Op::Add, mb.len()));
    } else {
        let (n, m) = (ma.len(), mb.len());
        let mut table = vec![0u32; (n + 1) * (m + 1)];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                table[i * (m + 1) + j] = if ma[i] == mb[j] {
                    table[(i + 1) * (m + 1) + j + 1] + 1
                } else {
                    table[(i + 1) * (m + 1) + j].max(table[i * (m + 1) + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < n || j < m {
            if i < n && j < m && ma[i] == mb[j] {
                ops.push(Op::Keep);
                i += 1;
                j += 1;
            } else if i < n
                && (j == m || table[(i + 1) * (m + 1) + j] >= table[i * (m + 1) + j + 1])
            {
                ops.push(Op::Remove);
                i += 1;
            } else {
                ops.push(Op::Add);
                j += 1;
            }
        }
    }
    ops.extend(std::iter::repeat_n(Op::Keep, suffix));
    ops
}

/// The hunks of the change from `a` to `b`.
fn hunks(a: &[String], b: &[String]) -> String {
    let ops = script(a, b);
    let changed: Vec<usize> = (0..ops.len()).filter(|&k| ops[k] != Op::Keep).collect();
    let mut out = String::new();
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(CONTEXT);
        let mut end = changed[k];
        while k < changed.len() && changed[k] <= end + 2 * CONTEXT + 1 {
            end = changed[k];
            k += 1;
        }
        let end = (end + CONTEXT + 1).min(ops.len());
        let (mut ai, mut bi) = (0, 0);
        for op in &ops[..start] {
            match op {
                Op::Keep => {
                    ai += 1;
                    bi += 1;
                }
                Op::Remove => ai += 1,
                Op::Add => bi += 1,
            }
        }
        let a_len = ops[start..end].iter().filter(|o| **o != Op::Add).count();
        let b_len = ops[start..end].iter().filter(|o| **o != Op::Remove).count();
        let at = |first: usize, len: usize| if len == 0 { first } else { first + 1 };
        out.push_str(&format!(
            "@@ -{},{a_len} +{},{b_len} @@\n",
            at(ai, a_len),
            at(bi, b_len)
        ));
        for op in &ops[start..end] {
            let (sign, line) = match op {
                Op::Keep => {
                    ai += 1;
                    bi += 1;
                    (' ', &a[ai - 1])
                }
                Op::Remove => {
                    ai += 1;
                    ('-', &a[ai - 1])
                }
                Op::Add => {
                    bi += 1;
                    ('+', &b[bi - 1])
                }
            };
            out.push(sign);
            out.push_str(line);
            if !line.ends_with('\n') {
                out.push_str("\n\\ No newline at end of file\n");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_line_shows_as_a_unified_hunk_with_context() {
        let old = Side::Bytes(b"a\nb\nc\nd\ne\nf\ng\nh\n".to_vec());
        let new = Side::Bytes(b"a\nb\nc\nD\ne\nf\ng\nh\n".to_vec());
        assert_eq!(
            file_diff("/w/f", &old, &new),
            "--- a/w/f\n+++ b/w/f\n@@ -1,7 +1,7 @@\n a\n b\n c\n-d\n+D\n e\n f\n g\n"
        );
    }

    #[test]
    fn created_removed_and_binary_files_say_so() {
        let created = file_diff("/w/n", &Side::Absent, &Side::Bytes(b"x\n".to_vec()));
        assert_eq!(created, "--- /dev/null\n+++ b/w/n\n@@ -0,0 +1,1 @@\n+x\n");
        let removed = file_diff("/w/n", &Side::Bytes(b"x".to_vec()), &Side::Absent);
        assert_eq!(
            removed,
            "--- a/w/n\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-x\n\\ No newline at end of file\n"
        );
        let binary = file_diff("/w/b", &Side::Bytes(vec![0, 1]), &Side::Absent);
        assert!(binary.contains("binary file (2 bytes)"), "{binary}");
    }
}
