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
    let (prefix, ma, mb) = without_common_prefix(a, b);
    let (suffix, ma, mb) = without_common_suffix(ma, mb);
    let mut ops = vec![Op::Keep; prefix];
    if ma.len().saturating_mul(mb.len()) > MAX_CELLS {
        ops.extend(std::iter::repeat_n(Op::Remove, ma.len()));
        ops.extend(std::iter::repeat_n(Op::Add, mb.len()));
    } else {
        ops.extend(walk(ma, mb, &common_table(ma, mb)));
    }
    ops.extend(std::iter::repeat_n(Op::Keep, suffix));
    ops
}

/// How many lines `a` and `b` begin with in common, and what follows them on each side.
fn without_common_prefix<'a>(
    mut a: &'a [String],
    mut b: &'a [String],
) -> (usize, &'a [String], &'a [String]) {
    let mut count = 0;
    while let (Some((x, rest_a)), Some((y, rest_b))) = (a.split_first(), b.split_first())
        && x == y
    {
        (a, b) = (rest_a, rest_b);
        count += 1;
    }
    (count, a, b)
}

/// How many lines `a` and `b` end with in common, and what comes before them on each side.
fn without_common_suffix<'a>(
    mut a: &'a [String],
    mut b: &'a [String],
) -> (usize, &'a [String], &'a [String]) {
    let mut count = 0;
    while let (Some((x, rest_a)), Some((y, rest_b))) = (a.split_last(), b.split_last())
        && x == y
    {
        (a, b) = (rest_a, rest_b);
        count += 1;
    }
    (count, a, b)
}

/// The longest-common-subsequence table of `a` and `b`: row `i`, column `j` holds how many
/// lines `a[i..]` and `b[j..]` have in common. It has one row more than `a` has lines and one
/// column more than `b` has, the last of each all zeros.
fn common_table(a: &[String], b: &[String]) -> Vec<Vec<u32>> {
    let mut below = vec![0u32; b.len() + 1];
    let mut table = vec![below.clone()];
    for line in a.iter().rev() {
        below = common_row(line, b, &below);
        table.push(below.clone());
    }
    table.reverse();
    table
}

/// One row of the common-subsequence table: the row of `line` against `b`, given `below`, the
/// row of the line after it.
fn common_row(line: &str, b: &[String], below: &[u32]) -> Vec<u32> {
    let mut row = Vec::with_capacity(b.len() + 1);
    let mut right = 0;
    row.push(right);
    let down_and_diagonal = below.iter().zip(below.iter().skip(1));
    for (other, (down, diagonal)) in b.iter().zip(down_and_diagonal).rev() {
        right = if line == other {
            diagonal + 1
        } else {
            (*down).max(right)
        };
        row.push(right);
    }
    row.reverse();
    row
}

/// The edit script from `a` to `b` read off their common-subsequence `table`: keep a line both
/// share, else remove or add whichever leaves more in common.
fn walk(a: &[String], b: &[String], table: &[Vec<u32>]) -> Vec<Op> {
    let cell = |i: usize, j: usize| table.get(i).and_then(|row| row.get(j)).copied();
    let mut ops = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    loop {
        let op = match (a.get(i), b.get(j)) {
            (None, None) => break,
            (Some(x), Some(y)) if x == y => Op::Keep,
            (Some(_), None) => Op::Remove,
            (Some(_), Some(_)) if cell(i + 1, j) >= cell(i, j + 1) => Op::Remove,
            _ => Op::Add,
        };
        if op != Op::Add {
            i += 1;
        }
        if op != Op::Remove {
            j += 1;
        }
        ops.push(op);
    }
    ops
}

/// The hunks of the change from `a` to `b`.
fn hunks(a: &[String], b: &[String]) -> String {
    let ops = script(a, b);
    let lines = script_lines(&ops, a, b);
    let mut out = String::new();
    for (start, end) in hunk_ranges(&ops) {
        let (Some(before), Some(hunk)) = (lines.get(..start), lines.get(start..end)) else {
            continue;
        };
        push_hunk(&mut out, before, hunk);
    }
    out
}

/// Each step of the edit script `ops` with the line it keeps, removes or adds.
fn script_lines<'a>(ops: &[Op], a: &'a [String], b: &'a [String]) -> Vec<(Op, &'a str)> {
    let (mut a_lines, mut b_lines) = (a.iter(), b.iter());
    ops.iter()
        .filter_map(|&op| {
            let line = match op {
                Op::Keep => b_lines.next().and(a_lines.next()),
                Op::Remove => a_lines.next(),
                Op::Add => b_lines.next(),
            };
            line.map(|line| (op, line.as_str()))
        })
        .collect()
}

/// Where each hunk of the edit script `ops` starts and ends: its changes with their context,
/// changes closer than twice the context sharing one hunk.
fn hunk_ranges(ops: &[Op]) -> Vec<(usize, usize)> {
    let mut changed = ops
        .iter()
        .enumerate()
        .filter(|(_, op)| **op != Op::Keep)
        .map(|(k, _)| k)
        .peekable();
    let mut ranges = Vec::new();
    while let Some(first) = changed.next() {
        let mut end = first;
        while let Some(next) = changed.next_if(|&k| k <= end + 2 * CONTEXT + 1) {
            end = next;
        }
        ranges.push((
            first.saturating_sub(CONTEXT),
            (end + CONTEXT + 1).min(ops.len()),
        ));
    }
    ranges
}

/// Adds one hunk to `out`: its header, counted after the lines `before` it, then its lines.
fn push_hunk(out: &mut String, before: &[(Op, &str)], hunk: &[(Op, &str)]) {
    let count = |lines: &[(Op, &str)], skip: Op| lines.iter().filter(|(op, _)| *op != skip).count();
    let (ai, bi) = (count(before, Op::Add), count(before, Op::Remove));
    let (a_len, b_len) = (count(hunk, Op::Add), count(hunk, Op::Remove));
    let at = |first: usize, len: usize| if len == 0 { first } else { first + 1 };
    out.push_str(&format!(
        "@@ -{},{a_len} +{},{b_len} @@\n",
        at(ai, a_len),
        at(bi, b_len)
    ));
    for (op, line) in hunk {
        out.push(match op {
            Op::Keep => ' ',
            Op::Remove => '-',
            Op::Add => '+',
        });
        out.push_str(line);
        if !line.ends_with('\n') {
            out.push_str("\n\\ No newline at end of file\n");
        }
    }
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
