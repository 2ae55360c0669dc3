//! A `console` block read as a transcript, and the matcher that holds a command's output against
//! what the transcript expects. The format is described in `rfcs/README.md`, "Examples":
//!
//! - `$ COMMAND` starts a command; a line ending in `\`, or a following line starting `> ` (a
//!   here-document, a quote left open), continues it;
//! - the lines after it, up to the next `$ `, are what it prints: its stdout, then its stderr;
//! - a line `...` matches any number of lines, `[..]` inside a line any text on that line;
//! - a last line `? N` is the exit status it must end with; without one, 0.

use super::markdown::Block;

/// One command of a transcript and what it must print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The file's line of the command's `$ `.
    pub line: usize,
    /// The command as the shell gets it, continuation lines joined by newlines.
    pub command: String,
    /// The lines it must print, stdout then stderr.
    pub expected: Vec<String>,
    /// The exit status it must end with.
    pub status: i32,
}

const PROMPT: &str = "$ ";
const CONTINUATION: &str = "> ";
const ANY_LINES: &str = "...";
const ANY_TEXT: &str = "[..]";
const STATUS: &str = "? ";

/// The commands of a `console` block, or what is wrong with it, naming its file and line.
pub fn steps(block: &Block) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    let mut i = 0;
    while i < block.lines.len() {
        let line = &block.lines[i];
        let Some(first) = line.strip_prefix(PROMPT) else {
            let Some(step) = steps.last_mut() else {
                return Err(format!(
                    "{}:{}: a transcript starts with a command (`$ …`), not {line:?}",
                    block.file,
                    block.line_of(i)
                ));
            };
            step.expected.push(line.clone());
            i += 1;
            continue;
        };
        let start = i;
        let mut command = first.to_owned();
        i += 1;
        while i < block.lines.len() {
            let next = &block.lines[i];
            let continued = if command.ends_with('\\') {
                Some(next.as_str())
            } else {
                next.strip_prefix(CONTINUATION)
                    .or((next == ">").then_some(""))
            };
            let Some(more) = continued else { break };
            command.push('\n');
            command.push_str(more);
            i += 1;
        }
        steps.push(Step {
            line: block.line_of(start),
            command,
            expected: Vec::new(),
            status: 0,
        });
    }
    for step in &mut steps {
        let last = step.expected.last().and_then(|l| l.strip_prefix(STATUS));
        if let Some(code) = last {
            step.status = code.trim().parse().map_err(|_| {
                format!(
                    "{}:{}: the exit status line of `{}` is `? {code}`; write `? N` with N a number",
                    block.file,
                    step.line,
                    first_line(&step.command)
                )
            })?;
            step.expected.pop();
        }
    }
    Ok(steps)
}

/// The first line of a command, for a report or the index.
pub fn first_line(command: &str) -> &str {
    command.lines().next().unwrap_or("")
}

/// Whether `line` matches `pattern`, where each `[..]` of the pattern stands for any text.
pub fn line_matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split(ANY_TEXT).collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return pattern == line;
    };
    let Some(mut rest) = line.strip_prefix(first) else {
        return false;
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// One line of a diff: a line both sides have (`' '`), one only expected (`'-'`), or one only
/// printed (`'+'`).
type DiffLine = (char, String);

/// `None` when `actual` matches `expected`; otherwise a diff of the two, `-` for an expected line
/// the output lacks and `+` for an output line not expected, the rest with two spaces.
pub fn mismatch(expected: &[String], actual: &[String]) -> Option<String> {
    let (n, m) = (expected.len(), actual.len());
    // cost[i][j]: the fewest unmatched lines aligning expected[i..] with actual[j..], where a
    // `...` line takes any number of output lines for free.
    let mut cost = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..=n).rev() {
        for j in (0..=m).rev() {
            cost[i][j] = if i == n {
                m - j
            } else if expected[i] == ANY_LINES {
                let skip = cost[i + 1][j];
                if j < m {
                    skip.min(cost[i][j + 1])
                } else {
                    skip
                }
            } else if j == m {
                cost[i + 1][j] + 1
            } else {
                let paired = if line_matches(&expected[i], &actual[j]) {
                    cost[i + 1][j + 1]
                } else {
                    usize::MAX
                };
                paired.min(cost[i + 1][j] + 1).min(cost[i][j + 1] + 1)
            };
        }
    }
    if cost[0][0] == 0 {
        return None;
    }
    let mut diff: Vec<DiffLine> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && expected[i] == ANY_LINES {
            // The lines `...` took are shown as matched; `...` itself is not a line of output.
            if j < m && cost[i][j] == cost[i][j + 1] {
                diff.push((' ', actual[j].clone()));
                j += 1;
            } else {
                i += 1;
            }
        } else if i < n
            && j < m
            && line_matches(&expected[i], &actual[j])
            && cost[i][j] == cost[i + 1][j + 1]
        {
            diff.push((' ', actual[j].clone()));
            i += 1;
            j += 1;
        } else if i < n && cost[i][j] == cost[i + 1][j] + 1 {
            diff.push(('-', expected[i].clone()));
            i += 1;
        } else {
            diff.push(('+', actual[j].clone()));
            j += 1;
        }
    }
    Some(
        diff.iter()
            .map(|(mark, line)| format!("{mark} {line}\n"))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn any_text_matches_within_one_line_only() {
        assert!(line_matches("a [..] c", "a b c"));
        assert!(line_matches("a [..] c", "a  c"));
        assert!(line_matches("[..]", ""));
        assert!(line_matches("x[..]y[..]z", "x1y2y3z"));
        assert!(!line_matches("x[..]y[..]z", "x1z2y"));
        assert!(!line_matches("a [..] c", "a b d"));
        // A prefix and a suffix may not share the same characters.
        assert!(!line_matches("ab[..]ba", "aba"));
        // Without a wildcard a line is compared exactly; other brackets are text.
        assert!(line_matches("[sandbox]", "[sandbox]"));
        assert!(!line_matches("[sandbox]", "[sandbox] "));
        assert!(mismatch(&lines("a [..]"), &lines("a b\nc")).is_some());
    }

    #[test]
    fn any_lines_matches_none_one_or_many() {
        let expected = lines("first\n...\nlast");
        for actual in ["first\nlast", "first\nx\nlast", "first\nx\ny\nz\nlast"] {
            assert_eq!(mismatch(&expected, &lines(actual)), None, "{actual:?}");
        }
        assert_eq!(mismatch(&lines("...\nlast"), &lines("a\nb\nlast")), None);
        assert_eq!(mismatch(&lines("first\n..."), &lines("first")), None);
        // The control: lines around it still have to be there.
        assert!(mismatch(&expected, &lines("first\nx")).is_some());
        assert!(mismatch(&expected, &lines("x\nlast")).is_some());
    }

    #[test]
    fn a_wrong_line_is_shown_as_a_diff() {
        let diff = mismatch(&lines("hello\nearth\nbye"), &lines("hello\nworld\nbye"));
        assert_eq!(diff.as_deref(), Some("  hello\n- earth\n+ world\n  bye\n"));
        let diff = mismatch(&lines("a\n...\nz"), &lines("a\nb\ny"));
        assert_eq!(diff.as_deref(), Some("  a\n  b\n  y\n- z\n"));
        assert_eq!(mismatch(&lines("a"), &lines("a")), None);
    }

    fn block(text: &str) -> Block {
        Block {
            file: "doc.md".into(),
            line: 10,
            info: "console".into(),
            heading: String::new(),
            not_run: None,
            lines: lines(text),
        }
    }

    #[test]
    fn a_transcript_reads_as_commands_with_their_output_and_status() {
        let found = steps(&block(
            "$ one \\\n  --flag\nout\n$ cat <<'EOF'\n> x\n>\n> EOF\nx\n\n? 3\n$ three",
        ))
        .expect("a transcript");
        assert_eq!(
            found,
            [
                Step {
                    line: 11,
                    command: "one \\\n  --flag".into(),
                    expected: lines("out"),
                    status: 0
                },
                Step {
                    line: 14,
                    command: "cat <<'EOF'\nx\n\nEOF".into(),
                    expected: vec!["x".into(), String::new()],
                    status: 3
                },
                Step {
                    line: 21,
                    command: "three".into(),
                    expected: Vec::new(),
                    status: 0
                },
            ]
        );
    }

    #[test]
    fn a_transcript_without_a_command_first_or_with_a_bad_status_is_refused() {
        let err = steps(&block("output\n$ true")).expect_err("output first");
        assert!(err.starts_with("doc.md:11: "), "{err}");
        let err = steps(&block("$ true\n? x")).expect_err("a bad status");
        assert!(
            err.contains("doc.md:11: ") && err.contains("`? N`"),
            "{err}"
        );
    }
}
