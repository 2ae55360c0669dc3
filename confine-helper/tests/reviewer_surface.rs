//! What `confine-helper/README.md` tells a reviewer, checked against the source, so that it
//! cannot drift:
//!
//! - **Unsafe code**: every `unsafe` block, `unsafe fn`, `unsafe impl` (and `unsafe trait`,
//!   `unsafe extern`, `#[unsafe(...)]`) under `src/` is listed by file and function, with how
//!   many of each, in the table of the binary or of the unit tests; nothing listed is gone.
//! - **Size**: the README's count command counts what the README says it counts (the rule is
//!   implemented here a second time), and the number the README states is within 10 % of it.
//! - **Reading order**: every source file is named in it, and every file it names exists.
//! - **Dependencies**: the table names exactly the dependencies of `Cargo.toml`, each with the
//!   features `Cargo.toml` turns on.
//!
//! The source is read as tokens (comments, strings and character literals skipped), so an
//! `unsafe` in a comment, a message or an identifier is not one. Each check is a function of the
//! README's text and the sources; the `controls` tests feed it a broken README or an extra
//! `unsafe` block and show that it fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How far the stated code-line count may be from the real one before the README is wrong.
const COUNT_TOLERANCE: f64 = 0.10;

/// The headings of the unsafe section's two tables.
const UNSAFE_SECTION: &str = "## Unsafe code";
const IN_BINARY: &str = "### In the binary";
const IN_TESTS: &str = "### In unit tests only";

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    std::fs::read_to_string(crate_dir().join("README.md")).expect("confine-helper/README.md")
}

/// Every `.rs` file under `src/`, as (path relative to `src/`, text), sorted by path.
fn sources() -> Vec<(String, String)> {
    sources_in(crate_dir().join("src"))
}

/// Every `.rs` file under `src`, as (path relative to it, text), sorted by path.
fn sources_in(src: PathBuf) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read a source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let name = relative(&src, &path);
                let text = std::fs::read_to_string(&path).expect("read a source file");
                out.push((name, text));
            }
        }
    }
    out.sort();
    out
}

fn relative(base: &Path, path: &Path) -> String {
    path.strip_prefix(base)
        .expect("under the base")
        .to_string_lossy()
        .into_owned()
}

/// The lines of `section` (a `## ` heading, matched exactly) up to the next `## ` heading.
fn section<'a>(readme: &'a str, heading: &str) -> Option<Vec<&'a str>> {
    let mut lines = readme.lines().skip_while(|l| l.trim_end() != heading);
    lines.next()?;
    Some(lines.take_while(|l| !l.starts_with("## ")).collect())
}

// ---------------------------------------------------------------------------------------------
// The source as tokens.

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Punct(char),
}

/// The identifiers and punctuation of Rust source with their 1-based lines; comments, string,
/// byte-string, C-string and character literals, lifetimes and numbers are left out.
fn tokens(text: &str) -> Vec<(Tok, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let ident_start = |c: char| c.is_alphabetic() || c == '_';
    let ident_char = |c: char| c.is_alphanumeric() || c == '_';
    // Skips a quoted literal whose opening quote is at `i`; returns the index after it.
    let skip_quoted = |mut i: usize, quote: char, line: &mut usize| {
        i += 1;
        while i < chars.len() && chars[i] != quote {
            if chars[i] == '\\' {
                i += 1;
            }
            if chars.get(i) == Some(&'\n') {
                *line += 1;
            }
            i += 1;
        }
        i + 1
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if c == '"' {
            i = skip_quoted(i, '"', &mut line);
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{1F600}') or a lifetime ('a, 'static).
            if next == Some('\\') || chars.get(i + 2) == Some(&'\'') {
                i = skip_quoted(i, '\'', &mut line);
            } else {
                i += 1;
                while i < chars.len() && ident_char(chars[i]) {
                    i += 1;
                }
            }
        } else if c.is_ascii_digit() {
            while i < chars.len() && ident_char(chars[i]) {
                i += 1;
            }
        } else if ident_start(c) {
            let start = i;
            while i < chars.len() && ident_char(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let raw_prefix = matches!(word.as_str(), "r" | "br" | "cr");
            let quote_prefix = matches!(word.as_str(), "b" | "c");
            if raw_prefix && matches!(chars.get(i), Some('"' | '#')) {
                let hashes = chars[i..].iter().take_while(|&&c| c == '#').count();
                if chars.get(i + hashes) == Some(&'"') {
                    // A raw string: ends at a quote followed by as many hashes.
                    let mut j = i + hashes + 1;
                    while j < chars.len() {
                        if chars[j] == '"'
                            && chars[j + 1..].iter().take_while(|&&c| c == '#').count() >= hashes
                        {
                            break;
                        }
                        if chars[j] == '\n' {
                            line += 1;
                        }
                        j += 1;
                    }
                    i = j + 1 + hashes;
                    continue;
                }
                if word == "r" && hashes == 1 {
                    // A raw identifier, `r#name`.
                    let start = i + 1;
                    i = start;
                    while i < chars.len() && ident_char(chars[i]) {
                        i += 1;
                    }
                    out.push((Tok::Ident(chars[start..i].iter().collect()), line));
                    continue;
                }
            }
            if quote_prefix && matches!(chars.get(i), Some('"' | '\'')) {
                i = skip_quoted(i, chars[i], &mut line);
                continue;
            }
            out.push((Tok::Ident(word), line));
        } else {
            out.push((Tok::Punct(c), line));
            i += 1;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Unsafe code in the source.

/// What an `unsafe` keyword introduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Fn,
    Impl,
    Trait,
    Extern,
    Attribute,
    Block,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Fn => "fn",
            Kind::Impl => "impl",
            Kind::Trait => "trait",
            Kind::Extern => "extern",
            Kind::Attribute => "attribute",
            Kind::Block => "block",
        }
    }
}

/// Where unsafe code is: file (relative to `src/`), function, and whether it is test code.
type Place = (String, String, bool);

/// How many of each kind one place holds.
type Counts = BTreeMap<Kind, usize>;

/// The unsafe code of one file, by function. Test code is what follows a `#[cfg(test)]` line at
/// the start of a line (the rule of the size count), or all of a `*_tests.rs` file.
fn unsafe_in(file: &str, text: &str) -> BTreeMap<Place, Counts> {
    let tests_from = if file.ends_with("_tests.rs") {
        1
    } else {
        text.lines()
            .position(|l| l.starts_with("#[cfg(test)]"))
            .map_or(usize::MAX, |i| i + 1)
    };
    let toks = tokens(text);
    let ident = |i: usize| match toks.get(i) {
        Some((Tok::Ident(word), _)) => Some(word.as_str()),
        _ => None,
    };
    let punct = |i: usize| match toks.get(i) {
        Some((Tok::Punct(c), _)) => Some(*c),
        _ => None,
    };
    let mut found: BTreeMap<Place, Counts> = BTreeMap::new();
    // One entry per open brace: the function whose body it opens, if it does.
    let mut braces: Vec<Option<String>> = Vec::new();
    let mut depth = 0usize;
    let mut pending_fn: Option<(String, usize)> = None;
    for (i, (tok, line)) in toks.iter().enumerate() {
        match tok {
            Tok::Punct('(' | '[') => depth += 1,
            Tok::Punct(')' | ']') => depth = depth.saturating_sub(1),
            Tok::Punct('{') => {
                let opens_fn = pending_fn.take_if(|(_, at)| *at == depth);
                braces.push(opens_fn.map(|(name, _)| name));
            }
            Tok::Punct('}') => {
                braces.pop();
            }
            Tok::Punct(';') => {
                pending_fn.take_if(|(_, at)| *at == depth);
            }
            Tok::Ident(word) if word == "fn" => {
                if let Some(name) = ident(i + 1) {
                    pending_fn = Some((name.to_owned(), depth));
                }
            }
            Tok::Ident(word) if word == "unsafe" => {
                let enclosing = braces
                    .iter()
                    .rev()
                    .find_map(Clone::clone)
                    .unwrap_or_else(|| "(item)".to_owned());
                let (kind, function) = match (punct(i + 1), ident(i + 1)) {
                    (Some('{'), _) => (Kind::Block, enclosing),
                    (Some('('), _) => (Kind::Attribute, enclosing),
                    (_, Some("fn")) => (Kind::Fn, ident(i + 2).unwrap_or("?").to_owned()),
                    (_, Some("trait")) => (Kind::Trait, ident(i + 2).unwrap_or("?").to_owned()),
                    (_, Some("extern")) => (Kind::Extern, enclosing),
                    (_, Some("impl")) => {
                        let words: Vec<&str> =
                            (i + 1..toks.len()).map_while(ident).collect::<Vec<_>>();
                        (Kind::Impl, words.join(" "))
                    }
                    _ => panic!(
                        "{file}:{line}: `unsafe` followed by something this test does not know"
                    ),
                };
                let place = (file.to_owned(), function, *line >= tests_from);
                *found.entry(place).or_default().entry(kind).or_default() += 1;
            }
            _ => {}
        }
    }
    found
}

fn unsafe_in_sources(sources: &[(String, String)]) -> BTreeMap<Place, Counts> {
    let mut all = BTreeMap::new();
    for (file, text) in sources {
        all.extend(unsafe_in(file, text));
    }
    all
}

/// How a table row writes a place's counts: `unsafe fn + 2 blocks`.
fn render(counts: &Counts) -> String {
    counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(kind, n)| match (kind, n) {
            (Kind::Block, 1) => "1 block".to_owned(),
            (Kind::Block, n) => format!("{n} blocks"),
            (kind, 1) => format!("unsafe {}", kind.word()),
            (kind, n) => format!("{n} × unsafe {}", kind.word()),
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

/// The cells of a table row, without backticks, or `None` for a line that is not a data row.
fn row_cells(line: &str) -> Option<Vec<String>> {
    let line = line.trim();
    if !line.starts_with('|') || line.starts_with("|---") || line.starts_with("| file") {
        return None;
    }
    let cells: Vec<String> = line
        .trim_matches('|')
        .split('|')
        .map(|c| c.trim().replace('`', ""))
        .collect();
    Some(cells)
}

/// The README's unsafe tables: place → how its counts are written.
fn listed_unsafe(readme: &str) -> Result<BTreeMap<Place, String>, Vec<String>> {
    let lines = section(readme, UNSAFE_SECTION)
        .ok_or_else(|| vec![format!("the README has no `{UNSAFE_SECTION}` section")])?;
    let mut listed = BTreeMap::new();
    let mut problems = Vec::new();
    let mut in_tests = None;
    for line in lines {
        if line.starts_with("### ") {
            in_tests = match line.trim_end() {
                IN_BINARY => Some(false),
                IN_TESTS => Some(true),
                other => {
                    problems.push(format!(
                        "unknown table heading {other:?}: use {IN_BINARY:?} or {IN_TESTS:?}"
                    ));
                    None
                }
            };
            continue;
        }
        let Some(cells) = row_cells(line) else {
            continue;
        };
        let Some(tests) = in_tests else {
            problems.push(format!("a row before {IN_BINARY:?}: {line}"));
            continue;
        };
        if cells.len() != 4 || cells[3].is_empty() {
            problems.push(format!(
                "a row needs four cells (file, function, unsafe, why it is sound): {line}"
            ));
            continue;
        }
        let place = (cells[0].clone(), cells[1].clone(), tests);
        if listed.insert(place, cells[2].clone()).is_some() {
            problems.push(format!("listed twice: {line}"));
        }
    }
    if problems.is_empty() {
        Ok(listed)
    } else {
        Err(problems)
    }
}

/// Every difference between the README's unsafe tables and the source.
fn unsafe_problems(readme: &str, sources: &[(String, String)]) -> Vec<String> {
    let listed = match listed_unsafe(readme) {
        Ok(listed) => listed,
        Err(problems) => return problems,
    };
    let found = unsafe_in_sources(sources);
    let table = |tests: bool| if tests { IN_TESTS } else { IN_BINARY };
    let mut problems = Vec::new();
    for (place @ (file, function, tests), counts) in &found {
        let want = render(counts);
        match listed.get(place) {
            None => problems.push(format!(
                "not in the README: unsafe code in {file}, function {function}; add under \
                 {:?}: | `{file}` | `{function}` | {want} | <its SAFETY comment> |",
                table(*tests)
            )),
            Some(got) if *got != want => problems.push(format!(
                "{file}, function {function}: the README says {got:?}, the source has {want:?}"
            )),
            Some(_) => {}
        }
    }
    for place @ (file, function, tests) in listed.keys() {
        if !found.contains_key(place) {
            problems.push(format!(
                "the README lists unsafe code in {file}, function {function} (under {:?}), \
                 which the source does not have there",
                table(*tests)
            ));
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------------
// The size.

/// The README's rule: lines of `src` that are not blank and not comments (`//`, `///`, `//!`),
/// in files not named `*_tests.rs`, before the first line starting with `#[cfg(test)]`.
fn code_lines(sources: &[(String, String)]) -> usize {
    sources
        .iter()
        .filter(|(file, _)| !file.ends_with("_tests.rs"))
        .map(|(_, text)| {
            text.lines()
                .take_while(|l| !l.starts_with("#[cfg(test)]"))
                .filter(|l| {
                    let t = l.trim_start_matches([' ', '\t']);
                    !t.is_empty() && !t.starts_with("//")
                })
                .count()
        })
        .sum()
}

/// The count the README states, written `**7,358** code lines`.
fn stated_count(readme: &str) -> Result<usize, String> {
    let lines = section(readme, "## Size").ok_or("the README has no `## Size` section")?;
    let text = lines.join("\n");
    let at = text
        .find("** code lines")
        .ok_or("the Size section states no count written `**N** code lines`")?;
    let start = text[..at].rfind("**").ok_or("no `**` before the count")? + 2;
    let digits: String = text[start..at].chars().filter(|c| *c != ',').collect();
    digits
        .parse()
        .map_err(|_| format!("the stated count {:?} is not a number", &text[start..at]))
}

/// The README's count command (the `sh` block of its Size section).
fn count_command(readme: &str) -> Result<String, String> {
    let lines = section(readme, "## Size").ok_or("the README has no `## Size` section")?;
    let mut block = lines
        .iter()
        .skip_while(|l| l.trim() != "```sh")
        .skip(1)
        .take_while(|l| l.trim() != "```");
    let first = block.next().ok_or("the Size section has no ```sh block")?;
    Ok(std::iter::once(*first)
        .chain(block.copied())
        .collect::<Vec<_>>()
        .join("\n"))
}

/// Whether `stated` is within the tolerance of `real`.
fn count_problem(stated: usize, real: usize) -> Option<String> {
    let off = stated.abs_diff(real) as f64 / real.max(1) as f64;
    (off > COUNT_TOLERANCE).then(|| {
        format!(
            "the README states {stated} code lines; there are {real} ({:.1} % off, more than \
             {:.0} %): write the new count in the Size section",
            off * 100.0,
            COUNT_TOLERANCE * 100.0
        )
    })
}

// ---------------------------------------------------------------------------------------------
// The Linux trusted core and the enforcement kernel.

/// The code lines the Linux build of the helper holds today, at most: the count may only fall
/// from here. RFC 0021 sets the aim at [`LINUX_CORE_AIM`]; the moves still to come are listed
/// there ("Deferred"). It was 7,700 before the namespace backend; it stays above that while bwrap's
/// runner is in the helper beside it (RFC 0023, step 5). It was 8,470 before the user and
/// network namespaces made ahead (RFC 0023, step 6), which take about half a millisecond off
/// each of the namespace backend's commands for 171 lines, and 8,640 before the reply on the
/// shim's last record (step 7, 63 lines with the two files it split off), and 8,700 before the
/// socket taken on stdin, which lets agentd start the helper by `posix_spawn` (step 8, 8 lines).
const LINUX_CORE_CEILING: usize = 8_706;
/// The size RFC 0021 aims the Linux trusted core at.
const LINUX_CORE_AIM: usize = 5_500;
/// The most code lines the enforcement kernel may have (RFC 0021): 3,500, and while bwrap's
/// runner and the namespace backend are both in it, 3,950 (RFC 0023, step 5), 4,020 with the
/// namespaces made ahead (step 6).
const KERNEL_BUDGET: usize = 4_020;

/// Whether an attribute line keeps the item after it out of a shipped Linux build.
fn off_linux(attribute: &str) -> bool {
    let cfg = attribute.replace(' ', "");
    cfg == "#[cfg(test)]"
        || cfg.contains("feature=\"fuzzing\"")
        || (cfg.contains("target_os=\"macos\"") && !cfg.contains("target_os=\"linux\""))
}

/// The module file that declares `file`, and the name it is declared by.
fn declared_in(file: &str) -> Option<(String, String)> {
    let (dir, name) = match file.rsplit_once('/') {
        Some((dir, name)) => (Some(dir), name),
        None => (None, file),
    };
    let (parent, module) = match (dir, name) {
        (None, "lib.rs" | "main.rs") => return None,
        (Some(dir), "mod.rs") => match dir.rsplit_once('/') {
            Some((up, module)) => (format!("{up}/mod.rs"), module.to_owned()),
            None => ("lib.rs".to_owned(), dir.to_owned()),
        },
        (Some(dir), name) => (
            format!("{dir}/mod.rs"),
            name.trim_end_matches(".rs").to_owned(),
        ),
        (None, name) => ("lib.rs".to_owned(), name.trim_end_matches(".rs").to_owned()),
    };
    Some((parent, module))
}

/// The file of `file`'s directory that declares it with `#[path = "…"]` (a child module kept in
/// a file of its own name, as `sys/call.rs` keeps `sys/macos_call.rs`), and the index of the
/// attribute's line.
fn declared_by_path(file: &str, sources: &[(String, String)]) -> Option<(String, usize)> {
    let (dir, name) = file.rsplit_once('/').map_or(("", file), |(d, n)| (d, n));
    let attribute = format!("#[path = \"{name}\"]");
    sources.iter().find_map(|(other, text)| {
        let other_dir = other.rsplit_once('/').map_or("", |(d, _)| d);
        let at = text.lines().position(|l| l.trim() == attribute)?;
        (other_dir == dir && other != file).then(|| (other.clone(), at))
    })
}

/// Whether the Linux binary compiles `file`: its `mod` line, and its parent's, carry no
/// attribute that keeps it out.
fn in_linux_build(file: &str, sources: &[(String, String)]) -> bool {
    let declaration = match declared_by_path(file, sources) {
        Some((parent, at)) => Some((parent, None, at)),
        None => declared_in(file).map(|(parent, module)| (parent, Some(module), 0)),
    };
    let Some((parent, module, path_at)) = declaration else {
        return true;
    };
    // A child of `dir.rs` lives in `dir/` as a child of `dir/mod.rs` would.
    let beside = parent
        .strip_suffix("/mod.rs")
        .map(|dir| format!("{dir}.rs"));
    let Some((parent, text)) = sources
        .iter()
        .find(|(f, _)| *f == parent)
        .or_else(|| sources.iter().find(|(f, _)| Some(f) == beside.as_ref()))
    else {
        return false;
    };
    let lines: Vec<&str> = text.lines().collect();
    let declares = |l: &&str| {
        let t = l.trim();
        let named = match &module {
            Some(module) => t.ends_with(&format!("mod {module};")),
            None => t.ends_with(';') && t.contains("mod "),
        };
        named
            && matches!(
                t.split_whitespace().next(),
                Some("mod" | "pub" | "pub(crate)" | "pub(super)")
            )
    };
    let Some(at) = lines
        .iter()
        .skip(path_at)
        .position(declares)
        .map(|at| at + path_at)
    else {
        return false;
    };
    let gated = lines[..at]
        .iter()
        .rev()
        .take_while(|l| l.trim().starts_with("#[") || l.trim().starts_with("//"))
        .any(|l| off_linux(l.trim()));
    !gated && in_linux_build(parent, sources)
}

/// The sources the Linux binary compiles.
fn linux_core(sources: &[(String, String)]) -> Vec<(String, String)> {
    sources
        .iter()
        .filter(|(file, _)| in_linux_build(file, sources))
        .cloned()
        .collect()
}

/// A count the README states as `**N** <words>` in `heading`'s section.
fn stated(readme: &str, heading: &str, words: &str) -> Result<usize, String> {
    let lines = section(readme, heading).ok_or(format!("the README has no `{heading}`"))?;
    let text = lines.join("\n");
    let marker = format!("** {words}");
    let at = text.find(&marker).ok_or(format!(
        "`{heading}` states no count written `**N** {words}`"
    ))?;
    let start = text[..at].rfind("**").ok_or("no `**` before the count")? + 2;
    let digits: String = text[start..at].chars().filter(|c| *c != ',').collect();
    digits
        .parse()
        .map_err(|_| format!("the stated count {:?} is not a number", &text[start..at]))
}

/// The enforcement kernel's files: the first backticked path of each numbered line of its
/// README section.
fn kernel_files(readme: &str) -> Vec<String> {
    section(readme, "## Enforcement kernel")
        .unwrap_or_default()
        .iter()
        .filter(|l| {
            l.split_once(". ")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
        })
        .filter_map(|l| l.split('`').nth(1).map(str::to_owned))
        .collect()
}

#[test]
fn the_linux_trusted_core_is_counted_as_the_readme_says_and_does_not_grow() {
    let sources = sources();
    let left_out: Vec<&str> = sources
        .iter()
        .map(|(f, _)| f.as_str())
        .filter(|f| !f.ends_with("_tests.rs") && !in_linux_build(f, &sources))
        .collect();
    // Control: the rule finds what the README says the Linux build leaves out.
    for file in [
        "confine/seatbelt.rs",
        "sys/macos_call.rs",
        "sys/macos_tree.rs",
        "paths_macos.rs",
    ] {
        assert!(
            left_out.contains(&file),
            "{file} is in the Linux build: {left_out:?}"
        );
    }
    assert!(!left_out.contains(&"seccomp.rs"), "{left_out:?}");
    assert!(!left_out.contains(&"paths.rs"), "{left_out:?}");
    let readme = readme();
    let lines = section(&readme, "### The Linux trusted core").expect("the section");
    for file in &left_out {
        assert!(
            lines.iter().any(|l| l.contains(&format!("`{file}`"))),
            "the README's Linux trusted core does not name {file}, which the Linux build leaves out"
        );
    }
    let real = code_lines(&linux_core(&sources));
    let stated = stated(&readme, "### The Linux trusted core", "code lines").expect("stated");
    if let Some(problem) = count_problem(stated, real) {
        panic!("Linux trusted core: {problem}");
    }
    assert!(
        real <= LINUX_CORE_CEILING,
        "the Linux trusted core has {real} code lines, more than the {LINUX_CORE_CEILING} it \
         had when this ceiling was set (aim: {LINUX_CORE_AIM}, RFC 0021): move what decides \
         nothing at the boundary out instead"
    );
}

#[test]
fn the_enforcement_kernel_is_listed_and_within_its_budget() {
    let readme = readme();
    let sources = sources();
    let files = kernel_files(&readme);
    assert!(
        files.len() >= 5,
        "the Enforcement kernel section lists {files:?}"
    );
    let kernel: Vec<(String, String)> = files
        .iter()
        .map(|f| {
            sources
                .iter()
                .find(|(s, _)| s == f)
                .cloned()
                .unwrap_or_else(|| panic!("the enforcement kernel names {f}, which is no file"))
        })
        .collect();
    let real = code_lines(&kernel);
    let stated = stated(&readme, "## Enforcement kernel", "code lines").expect("stated");
    if let Some(problem) = count_problem(stated, real) {
        panic!("enforcement kernel: {problem}");
    }
    assert!(
        real <= KERNEL_BUDGET,
        "the enforcement kernel has {real} code lines, over its budget of {KERNEL_BUDGET}"
    );
}

// ---------------------------------------------------------------------------------------------
// Reading order and dependencies.

/// Source files the reading order does not name, and names in it that are no file.
fn reading_order_problems(readme: &str, sources: &[(String, String)]) -> Vec<String> {
    let Some(lines) = section(readme, "## Reading order") else {
        return vec!["the README has no `## Reading order` section".to_owned()];
    };
    let text = lines.join("\n");
    let named: Vec<&str> = text
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| s.ends_with(".rs"))
        .collect();
    let mut problems = Vec::new();
    for (file, _) in sources {
        if !named.contains(&file.as_str()) {
            problems.push(format!("the reading order does not name `{file}`"));
        }
    }
    for name in named {
        if !sources.iter().any(|(file, _)| file == name) {
            problems.push(format!(
                "the reading order names `{name}`, which is no file of src/"
            ));
        }
    }
    problems
}

/// `[dependencies]` of a Cargo.toml, and those of its `[target.'cfg(…)'.dependencies]`
/// sections: name → its features, sorted.
fn dependencies(manifest: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let mut in_dependencies = false;
    let body = manifest.lines().filter(|l| {
        if l.starts_with('[') {
            let header = l.trim();
            in_dependencies = header == "[dependencies]"
                || (header.starts_with("[target.") && header.ends_with(".dependencies]"));
            return false;
        }
        in_dependencies
    });
    for line in body {
        if line.trim_start().starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let name = key.trim().trim_end_matches(".workspace").trim().to_owned();
        let mut features: Vec<String> = match value.split_once("features = [") {
            Some((_, rest)) => {
                let list = rest.split_once(']').map_or(rest, |(l, _)| l);
                list.split(',')
                    .map(|f| f.trim().trim_matches('"').to_owned())
                    .filter(|f| !f.is_empty())
                    .collect()
            }
            None => Vec::new(),
        };
        features.sort();
        out.insert(name, features);
    }
    out
}

/// Differences between the README's dependency table and the manifest.
fn dependency_problems(readme: &str, manifest: &str) -> Vec<String> {
    let Some(lines) = section(readme, "## Dependencies") else {
        return vec!["the README has no `## Dependencies` section".to_owned()];
    };
    let declared = dependencies(manifest);
    let mut problems = Vec::new();
    let mut listed = BTreeMap::new();
    for line in lines {
        let Some(cells) = row_cells(line) else {
            continue;
        };
        if cells.first().is_some_and(|c| c == "dependency") {
            continue;
        }
        if cells.len() != 3 {
            problems.push(format!(
                "a row needs three cells (dependency, features, why): {line}"
            ));
            continue;
        }
        let mut features: Vec<String> = cells[1]
            .split(',')
            .map(|f| f.trim().to_owned())
            .filter(|f| !f.is_empty() && f != "—")
            .collect();
        features.sort();
        listed.insert(cells[0].clone(), features);
    }
    for (name, features) in &declared {
        match listed.get(name) {
            None => problems.push(format!("the README does not list the dependency {name}")),
            Some(got) if got != features => problems.push(format!(
                "{name}: the README lists features {got:?}, Cargo.toml turns on {features:?}"
            )),
            Some(_) => {}
        }
    }
    for name in listed.keys() {
        if !declared.contains_key(name) {
            problems.push(format!(
                "the README lists {name}, which Cargo.toml does not depend on"
            ));
        }
    }
    problems
}

fn assert_none(what: &str, problems: &[String]) {
    assert!(
        problems.is_empty(),
        "confine-helper/README.md is out of date ({what}):\n{}",
        problems.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// The checks on the real README and source.

#[test]
fn every_unsafe_block_and_unsafe_item_is_listed_in_the_readme_and_nothing_else() {
    assert_none("unsafe code", &unsafe_problems(&readme(), &sources()));
}

#[test]
fn the_readme_count_command_counts_by_its_rule_and_the_stated_count_is_within_ten_percent() {
    let readme = readme();
    let sources = sources();
    let real = code_lines(&sources);
    let command = count_command(&readme).expect("the count command");
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(&command)
        .current_dir(crate_dir().parent().expect("the workspace root"))
        .output()
        .expect("run the README's count command with sh");
    assert!(
        output.status.success(),
        "the README's count command failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        printed.trim().parse::<usize>().ok(),
        Some(real),
        "the README's count command printed {printed:?}; its rule counts {real}"
    );
    let stated = stated_count(&readme).expect("the stated count");
    if let Some(problem) = count_problem(stated, real) {
        panic!("{problem}");
    }
}

/// The most code lines `confine-service` (the root service, `service/src`) may have by the
/// same rule: RFC 0001, "Code map and size".
const SERVICE_BUDGET: usize = 800;

#[test]
fn the_root_service_stays_within_its_budget() {
    let root = crate_dir().parent().expect("the workspace root").to_owned();
    let service = sources_in(root.join("service").join("src"));
    assert!(
        service.iter().any(|(file, _)| file == "main.rs"),
        "no service/src/main.rs: {service:?}"
    );
    let real = code_lines(&service);
    assert!(
        real <= SERVICE_BUDGET,
        "confine-service has {real} code lines, over its budget of {SERVICE_BUDGET}: it holds \
         admission and hand-off only; move what it does not need out, or change the budget in \
         RFC 0001 and here"
    );
}

#[test]
fn the_reading_order_names_every_source_file() {
    assert_none(
        "reading order",
        &reading_order_problems(&readme(), &sources()),
    );
}

#[test]
fn the_dependency_table_matches_cargo_toml() {
    let manifest =
        std::fs::read_to_string(crate_dir().join("Cargo.toml")).expect("confine-helper/Cargo.toml");
    assert_none("dependencies", &dependency_problems(&readme(), &manifest));
}

// ---------------------------------------------------------------------------------------------
// Controls: each check fails when what it checks is broken.

mod controls {
    use super::*;

    /// A source file with one more unsafe block, in a function of its own.
    fn with_extra_block(mut sources: Vec<(String, String)>) -> Vec<(String, String)> {
        sources.push((
            "sys/extra.rs".to_owned(),
            "fn extra() {\n    // SAFETY: none.\n    unsafe { libc::getpid() };\n}\n".to_owned(),
        ));
        sources
    }

    #[test]
    fn an_unlisted_block_a_stale_row_and_a_wrong_count_are_each_reported() {
        let readme = readme();
        let sources = sources();
        assert!(
            unsafe_problems(&readme, &sources).is_empty(),
            "the base case holds"
        );

        let problems = unsafe_problems(&readme, &with_extra_block(sources.clone()));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("sys/extra.rs, function extra"),
            "{problems:?}"
        );

        let stale = readme.replacen(
            &format!("{IN_BINARY}\n"),
            &format!("{IN_BINARY}\n\n| `sys/call.rs` | `no_such_function` | 1 block | made up |\n"),
            1,
        );
        let problems = unsafe_problems(&stale, &sources);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("no_such_function"), "{problems:?}");

        let (file, function, counts) = unsafe_in_sources(&sources)
            .into_iter()
            .find(|(_, counts)| counts.get(&Kind::Block) == Some(&1))
            .map(|((file, function, _), counts)| (file, function, counts))
            .expect("a function with one block");
        let row = format!("| `{file}` | `{function}` | {} |", render(&counts));
        assert!(readme.contains(&row), "the README writes {row}");
        let miscounted =
            readme.replacen(&row, &format!("| `{file}` | `{function}` | 2 blocks |"), 1);
        let problems = unsafe_problems(&miscounted, &sources);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("the source has \"1 block\""),
            "{problems:?}"
        );
    }

    #[test]
    fn unsafe_in_comments_strings_and_names_is_not_code_and_the_function_is_the_innermost() {
        let text = r####"
// unsafe { in a line comment }
/* unsafe { in /* a nested */ block comment } */
fn outer() {
    let _ = "unsafe { in a string }";
    let _ = r#"unsafe { in a "raw" string }"#;
    let _ = b"unsafe {";
    let _ = c"unsafe {";
    let _ = '{';
    let _ = '\'';
    let unsafe_name = 1;
    fn inner<'a>(x: &'a str) -> &'a str {
        // SAFETY: a test.
        unsafe { x }
    }
    let f = |y: u8| {
        // SAFETY: a test.
        unsafe { y }
    };
    // SAFETY: a test.
    unsafe { f(unsafe_name) }
}
unsafe fn raw() -> i32 {
    // SAFETY: a test.
    unsafe { 1 }
}
// SAFETY: a test.
unsafe impl Send for Thing {}
#[cfg(test)]
mod tests {
    fn helper() {
        // SAFETY: a test.
        unsafe { 2 };
    }
}
"####;
        let found = unsafe_in("x.rs", text);
        let place = |f: &str, tests: bool| ("x.rs".to_owned(), f.to_owned(), tests);
        let counts = |pairs: &[(Kind, usize)]| pairs.iter().copied().collect::<Counts>();
        let want: BTreeMap<Place, Counts> = [
            (place("outer", false), counts(&[(Kind::Block, 2)])),
            (place("inner", false), counts(&[(Kind::Block, 1)])),
            (
                place("raw", false),
                counts(&[(Kind::Fn, 1), (Kind::Block, 1)]),
            ),
            (
                place("impl Send for Thing", false),
                counts(&[(Kind::Impl, 1)]),
            ),
            (place("helper", true), counts(&[(Kind::Block, 1)])),
        ]
        .into_iter()
        .collect();
        assert_eq!(found, want);
        assert_eq!(render(&want[&place("raw", false)]), "unsafe fn + 1 block");
    }

    #[test]
    fn a_count_more_than_ten_percent_off_is_reported_and_one_within_is_not() {
        let readme = readme();
        let real = code_lines(&sources());
        let stated = stated_count(&readme).expect("the stated count");
        assert!(count_problem(stated, real).is_none(), "the base case holds");
        assert!(count_problem(real * 111 / 100, real).is_some());
        assert!(count_problem(real * 89 / 100, real).is_some());
        assert!(count_problem(real * 109 / 100, real).is_none());
        let written = format!("**{}** code lines", with_commas(stated));
        assert!(readme.contains(&written), "the README writes {written}");
        let inflated = readme.replace(&written, &format!("**{}** code lines", real * 2));
        let stated = stated_count(&inflated).expect("the inflated count");
        assert_eq!(stated, real * 2);
        assert!(count_problem(stated, real).is_some());
        assert!(stated_count("## Size\n\nno number here\n").is_err());
    }

    fn with_commas(n: usize) -> String {
        let digits = n.to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    }

    #[test]
    fn the_code_line_rule_skips_blanks_comments_test_modules_and_test_files() {
        let sources = vec![
            (
                "a.rs".to_owned(),
                "//! doc\nfn a() {}\n\n    // note\n\t/// doc\nlet x = 1; // trailing\n#[cfg(test)]\nmod tests { fn t() {} }\n".to_owned(),
            ),
            ("a_tests.rs".to_owned(), "fn t() {}\n".to_owned()),
        ];
        assert_eq!(code_lines(&sources), 2);
    }

    #[test]
    fn a_file_missing_from_the_reading_order_or_a_name_that_is_no_file_is_reported() {
        let readme = readme();
        let sources = sources();
        assert!(
            reading_order_problems(&readme, &sources).is_empty(),
            "the base case holds"
        );
        let problems = reading_order_problems(&readme, &with_extra_block(sources.clone()));
        assert_eq!(problems, ["the reading order does not name `sys/extra.rs`"]);
        let named = readme.replacen("## Reading order\n", "## Reading order\n\n`gone.rs`\n", 1);
        let problems = reading_order_problems(&named, &sources);
        assert_eq!(
            problems,
            ["the reading order names `gone.rs`, which is no file of src/"]
        );
    }

    #[test]
    fn a_dependency_missing_from_the_table_or_with_other_features_is_reported() {
        let readme = readme();
        let manifest = std::fs::read_to_string(crate_dir().join("Cargo.toml")).expect("manifest");
        assert!(
            dependency_problems(&readme, &manifest).is_empty(),
            "the base case holds"
        );
        let added = manifest.replacen("[dependencies]\n", "[dependencies]\nlibc = \"0.2\"\n", 1);
        assert_eq!(
            dependency_problems(&readme, &added),
            ["the README does not list the dependency libc"]
        );
        // A platform's own section counts as much as the common one.
        let linux = "[target.'cfg(target_os = \"linux\")'.dependencies]\n";
        assert!(manifest.contains(linux), "the manifest has a Linux section");
        let targeted = manifest.replacen(linux, &format!("{linux}libc = \"0.2\"\n"), 1);
        assert_eq!(
            dependency_problems(&readme, &targeted),
            ["the README does not list the dependency libc"]
        );
        let fewer = manifest.replacen("\"uio\", ", "", 1);
        assert_ne!(fewer, manifest, "the manifest names nix's uio feature");
        let problems = dependency_problems(&readme, &fewer);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("nix: the README lists features"),
            "{problems:?}"
        );
    }
}
