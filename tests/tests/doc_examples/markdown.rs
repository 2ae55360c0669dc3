//! The fenced code blocks of a Markdown file, with what the example checks need around each: its
//! line, its info string, the heading it sits under and a `<!-- not run: REASON -->` comment
//! just before it. Only fences are read (``` or ~~~, three or more, indented like a list item's
//! or not); the rest of Markdown does not matter here.

/// One fenced code block.
#[derive(Debug, Clone)]
pub struct Block {
    /// The file, relative to the repository, as given.
    pub file: String,
    /// The line of the opening fence, from 1.
    pub line: usize,
    /// The first word of the info string (`console`, `sh`, …), empty when there is none.
    pub info: String,
    /// The text of the nearest heading above the block.
    pub heading: String,
    /// The reason of a `<!-- not run: REASON -->` on the last non-blank line before the fence.
    pub not_run: Option<String>,
    /// The block's lines, without the fence's indentation.
    pub lines: Vec<String>,
}

impl Block {
    /// The line of the file that holds the block's `i`-th line (from 0).
    pub fn line_of(&self, i: usize) -> usize {
        self.line + 1 + i
    }
}

const NOT_RUN_OPEN: &str = "<!-- not run:";
const COMMENT_CLOSE: &str = "-->";

/// An opening or closing fence: its indentation, its character and its length.
fn fence(line: &str) -> Option<(usize, char, usize)> {
    let trimmed = line.trim_start_matches(' ');
    let indent = line.len() - trimmed.len();
    let c = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let run = trimmed.chars().take_while(|x| *x == c).count();
    (run >= 3).then_some((indent, c, run))
}

/// The reason of a `not run` comment, when `line` is one.
fn not_run_reason(line: &str) -> Option<String> {
    let inner = line
        .trim()
        .strip_prefix(NOT_RUN_OPEN)?
        .strip_suffix(COMMENT_CLOSE)?;
    Some(inner.trim().to_owned())
}

/// Every fenced block of `text`, in order.
pub fn blocks(file: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut heading = String::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let Some((indent, c, run)) = fence(line) else {
            let title = line.trim_start_matches('#');
            if title.len() < line.len() && (title.is_empty() || title.starts_with(' ')) {
                heading = title.trim().to_owned();
            }
            i += 1;
            continue;
        };
        let info = line.trim_start()[run..]
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_owned();
        let not_run = lines[..i]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| not_run_reason(l));
        let mut body = Vec::new();
        let mut j = i + 1;
        while j < lines.len() {
            let closes = fence(lines[j]).is_some_and(|(_, cc, rr)| {
                cc == c && rr >= run && lines[j].trim().chars().all(|x| x == c)
            });
            if closes {
                break;
            }
            let content = lines[j];
            let strip = content.len() - content.trim_start_matches(' ').len();
            body.push(content[strip.min(indent)..].to_owned());
            j += 1;
        }
        out.push(Block {
            file: file.to_owned(),
            line: i + 1,
            info,
            heading: heading.clone(),
            not_run,
            lines: body,
        });
        i = j + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_carry_their_line_info_heading_and_not_run_reason() {
        let text = "# Top\n\n## Use\n\n<!-- not run: needs a model -->\n```sh\nagentd exec hi\n```\n\n  ```console\n  $ true\n  ```\n~~~~\n```\n~~~~\n";
        let found = blocks("doc.md", text);
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(
            (
                found[0].line,
                found[0].info.as_str(),
                found[0].heading.as_str()
            ),
            (6, "sh", "Use")
        );
        assert_eq!(found[0].not_run.as_deref(), Some("needs a model"));
        assert_eq!(found[0].lines, ["agentd exec hi"]);
        // An indented fence: its indentation is not part of the lines, and no comment precedes.
        assert_eq!(
            (found[1].info.as_str(), found[1].not_run.clone()),
            ("console", None)
        );
        assert_eq!(found[1].lines, ["$ true"]);
        assert_eq!(found[1].line_of(0), 11);
        // A shorter fence inside a longer one is content, not a block of its own.
        assert_eq!(found[2].lines, ["```"]);
    }

    #[test]
    fn a_comment_separated_by_text_is_not_the_blocks() {
        let text = "<!-- not run: x -->\nSome text.\n```sh\nagentd run -- true\n```\n";
        assert_eq!(blocks("doc.md", text)[0].not_run, None);
    }
}
