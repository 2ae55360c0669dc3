//! The shape of the source tree, checked: no import cycle between the files of a crate, no
//! file whose non-test part is over 600 lines, and one way out of agentd for the notifications
//! it sends its client (the gate of `session/update`s, RFC 0003's "The transport").
//!
//! A file depends on another when it names an item of the other's module: through `crate::…`,
//! `super::…`, or a `use` of a child module's path. Declaring a child (`mod x;`) and
//! re-exporting one of its items (`pub use x::Item;`) are not uses: they make the child part of
//! the parent's interface, and the child may still name its parent. Test code (`tests.rs`,
//! `*_tests.rs`, and an inline `#[cfg(test)] mod tests` at the end of a file) is left out: tests
//! may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates whose sources are checked, by their `src` directory.
const CRATES: [&str; 4] = [
    "protocol/src",
    "confine-helper/src",
    "agentd/src",
    "docgen/src",
];

/// The most lines the non-test part of one file may have.
const MAX_LINES: usize = 600;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the workspace")
        .to_owned()
}

/// Every `.rs` file under `dir` that is not test code.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read source dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if name != "tests.rs" && !name.ends_with("_tests.rs") {
                    out.push(path);
                }
            }
        }
    }
    out.sort();
    out
}

/// The module path of a source file: `src/a/b.rs` and `src/a/b/mod.rs` are `[a, b]`; `lib.rs`
/// and `main.rs` are the crate root.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_owned());
    }
    parts
}

/// The code of a file without comments, string contents and its trailing inline test module.
fn code_of(text: &str) -> String {
    let cut = text
        .find("#[cfg(test)]\nmod tests")
        .or_else(|| text.find("#[cfg(test)]\npub mod tests"))
        .unwrap_or(text.len());
    let mut out = String::new();
    for line in text[..cut].lines() {
        let code = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        // String contents may mention paths (`"crate::x"` in a message); drop them, but keep a
        // string that is nothing but a path (`#[serde(with = "crate::x::y")]` names a module).
        let mut string: Option<String> = None;
        let mut escaped = false;
        for c in code.chars() {
            if let Some(text) = string.as_mut() {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    let is_path = (text.starts_with("crate::") || text.starts_with("super::"))
                        && text
                            .chars()
                            .all(|c| c.is_alphanumeric() || c == '_' || c == ':');
                    if is_path {
                        out.push_str(text);
                    }
                    string = None;
                    continue;
                }
                text.push(c);
                continue;
            }
            if c == '"' {
                string = Some(String::new());
                continue;
            }
            out.push(c);
        }
        out.push('\n');
    }
    out
}

/// The lines of the non-test part of a file.
fn non_test_lines(text: &str) -> usize {
    let cut = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..cut].lines().count()
}

/// The paths a file names, each as the module path it starts with (before resolution).
fn named_paths(code: &str, module: &[String], children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    // `crate::a::b…` and `super::…` anywhere in the code.
    for (start, prefix) in code
        .match_indices("crate::")
        .map(|(i, _)| (i, "crate"))
        .chain(code.match_indices("super::").map(|(i, _)| (i, "super")))
    {
        if start > 0
            && code[..start]
                .chars()
                .last()
                .is_some_and(|c| ident(c) || c == ':')
        {
            continue;
        }
        let mut base: Vec<String> = if prefix == "crate" {
            Vec::new()
        } else {
            module[..module.len().saturating_sub(1)].to_vec()
        };
        let mut rest = &code[start + prefix.len() + 2..];
        // `super::super::x`
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        for tail in paths_of(rest) {
            let mut path = base.clone();
            path.extend(tail);
            out.push(path);
        }
    }
    // `child::…` of a module's own children, in code (`bash::run(…)`) and in `use` lines (but
    // not `pub use`, a re-export).
    for child in children {
        let needle = format!("{child}::");
        for (start, _) in code.match_indices(&needle) {
            let before = code[..start].chars().last();
            if before.is_some_and(|c| ident(c) || c == ':') {
                continue;
            }
            let line_start = code[..start].rfind('\n').map_or(0, |i| i + 1);
            let line = code[line_start..start].trim_start();
            if line.starts_with("pub use") || line.starts_with("pub(crate) use") {
                continue;
            }
            for tail in paths_of(&code[start..]) {
                let mut path = module.to_vec();
                path.extend(tail);
                out.push(path);
            }
        }
    }
    for line in code.lines() {
        let trimmed = line.trim_start();
        let Some(rest) = trimmed.strip_prefix("use ") else {
            continue;
        };
        let first: String = rest.chars().take_while(|c| ident(*c)).collect();
        if children.contains(&first) {
            for tail in paths_of(rest) {
                let mut path = module.to_vec();
                path.extend(tail);
                out.push(path);
            }
        }
    }
    out
}

/// The identifiers of a path's text (`a::b::{c, d}` is `[a, b]`, `a::b;` is `[a, b]`): up to the
/// first segment that is not a plain identifier.
fn segments_of(text: &str) -> Vec<String> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for segment in text.split("::") {
        let name: String = segment.chars().take_while(|c| ident(*c)).collect();
        let whole = name.len() == segment.len();
        if !name.is_empty() {
            out.push(name);
        }
        if !whole {
            break;
        }
    }
    out
}

/// The paths a path's text names: `a::b` is one, `a::{b, c::d}` is `a::b` and `a::c::d`.
fn paths_of(text: &str) -> Vec<Vec<String>> {
    let head = segments_of(text);
    let consumed: usize = head.iter().map(|s| s.len() + 2).sum();
    let after = text.get(consumed..).unwrap_or("");
    let Some(group) = after.strip_prefix('{') else {
        return vec![head];
    };
    // The group's top-level items, up to its closing brace.
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for item in items {
        for tail in paths_of(item.trim()) {
            if tail.is_empty() || tail == ["self"] {
                out.push(head.clone());
                continue;
            }
            let mut path = head.clone();
            path.extend(tail);
            out.push(path);
        }
    }
    if out.is_empty() {
        out.push(head);
    }
    out
}

/// Item names a module file re-exports, with the path each comes from: `pub use a::b::{C, D as
/// E};` maps `C` to `[module.., a, b, C]` and `E` to `[module.., a, b, D]`.
type ReExports = BTreeMap<PathBuf, BTreeMap<String, Vec<String>>>;

fn re_exports_of(code: &str, module: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    for statement in code.split(';') {
        let trimmed = statement.trim_start();
        let Some(rest) = ["pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .find_map(|p| trimmed.strip_prefix(p))
        else {
            continue;
        };
        let rest = rest.trim();
        let (base, rest) = if let Some(r) = rest.strip_prefix("crate::") {
            (Vec::new(), r)
        } else if let Some(r) = rest.strip_prefix("self::") {
            (module.to_vec(), r)
        } else if let Some(r) = rest.strip_prefix("super::") {
            (module[..module.len().saturating_sub(1)].to_vec(), r)
        } else {
            (module.to_vec(), rest)
        };
        let (prefix, items) = match rest.find('{') {
            Some(i) => (&rest[..i], rest[i + 1..].trim_end_matches('}').to_owned()),
            None => match rest.rfind("::") {
                Some(i) => (&rest[..i + 2], rest[i + 2..].to_owned()),
                None => continue,
            },
        };
        let mut from = base.clone();
        from.extend(segments_of(prefix.trim_end_matches("::")));
        for item in items.split(',') {
            let mut words = item.split_whitespace();
            let Some(name) = words.next() else { continue };
            let name: String = name.chars().take_while(|c| ident(*c)).collect();
            if name.is_empty() {
                continue;
            }
            let exported = match (words.next(), words.next()) {
                (Some("as"), Some(alias)) => alias.to_owned(),
                _ => name.clone(),
            };
            let mut path = from.clone();
            path.push(name);
            out.insert(exported, path);
        }
    }
    out
}

/// The file that defines what `path` names: the longest prefix that is a module with a file,
/// followed through that module's re-exports.
fn resolve<'a>(
    path: &[String],
    modules: &'a BTreeMap<Vec<String>, PathBuf>,
    re_exports: &ReExports,
    depth: usize,
) -> Option<&'a PathBuf> {
    let (n, file) = (0..=path.len())
        .rev()
        .find_map(|n| modules.get(&path[..n]).map(|f| (n, f)))?;
    if depth < 8
        && let Some(item) = path.get(n)
        && let Some(from) = re_exports.get(file).and_then(|r| r.get(item))
        && from.as_slice() != path
    {
        let mut next = from.clone();
        next.extend(path[n + 1..].iter().cloned());
        return resolve(&next, modules, re_exports, depth + 1).or(Some(file));
    }
    Some(file)
}

/// A cycle in the graph, as the files on it, if there is one.
fn find_cycle(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Option<Vec<PathBuf>> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Open,
        Done,
    }
    fn visit(
        node: &PathBuf,
        graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        state: &mut BTreeMap<PathBuf, State>,
        stack: &mut Vec<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        match state.get(node) {
            Some(State::Done) => return None,
            Some(State::Open) => {
                let from = stack.iter().position(|n| n == node).unwrap_or(0);
                let mut cycle = stack[from..].to_vec();
                cycle.push(node.clone());
                return Some(cycle);
            }
            None => {}
        }
        state.insert(node.clone(), State::Open);
        stack.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, state, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        state.insert(node.clone(), State::Done);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, graph, &mut state, &mut Vec::new()) {
            return Some(cycle);
        }
    }
    None
}

/// The dependency graph between the files of the crate at `src`.
fn graph_of(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let files = sources(src);
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .map(|f| (module_of(src, f), f.clone()))
        .collect();
    let codes: BTreeMap<PathBuf, String> = files
        .iter()
        .map(|f| {
            (
                f.clone(),
                code_of(&std::fs::read_to_string(f).expect("read source")),
            )
        })
        .collect();
    let re_exports: ReExports = files
        .iter()
        .map(|f| (f.clone(), re_exports_of(&codes[f], &module_of(src, f))))
        .collect();
    let mut graph = BTreeMap::new();
    for file in &files {
        let module = module_of(src, file);
        let children: BTreeSet<String> = modules
            .keys()
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(&module))
            .filter_map(|m| m.last().cloned())
            .collect();
        let code = &codes[file];
        let mut edges = BTreeSet::new();
        for path in named_paths(code, &module, &children) {
            if let Some(target) = resolve(&path, &modules, &re_exports, 0)
                && target != file
            {
                edges.insert(target.clone());
            }
        }
        graph.insert(file.clone(), edges);
    }
    graph
}

#[test]
fn no_crate_has_an_import_cycle_between_its_files() {
    let root = workspace();
    let mut cycles = Vec::new();
    for krate in CRATES {
        let src = root.join(krate);
        let mut graph = graph_of(&src);
        // Report every cycle: break each one found at its first edge and look again.
        while let Some(cycle) = find_cycle(&graph) {
            let names: Vec<String> = cycle
                .iter()
                .map(|p| p.strip_prefix(&root).unwrap_or(p).display().to_string())
                .collect();
            cycles.push(names.join(" → "));
            if let Some(edges) = graph.get_mut(&cycle[0]) {
                edges.remove(&cycle[1]);
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "import cycles between files:\n  {}",
        cycles.join("\n  ")
    );
}

#[test]
fn no_file_is_over_the_line_limit() {
    let root = workspace();
    let mut long = Vec::new();
    for krate in CRATES {
        for file in sources(&root.join(krate)) {
            let text = std::fs::read_to_string(&file).expect("read source");
            let lines = non_test_lines(&text);
            if lines > MAX_LINES {
                long.push(format!(
                    "{} ({lines} lines)",
                    file.strip_prefix(&root).unwrap_or(&file).display()
                ));
            }
        }
    }
    assert!(
        long.is_empty(),
        "files whose non-test part is over {MAX_LINES} lines:\n  {}",
        long.join("\n  ")
    );
}

/// The files of agentd that may send a notification to the other side of an ACP connection:
/// the gate every `session/update` goes through, and `agentd exec`'s client, which sends its
/// agent a `session/cancel`.
const NOTIFICATION_SENDERS: [&str; 2] = ["agentd/src/acp/outgoing.rs", "agentd/src/cli/exec.rs"];

#[test]
fn agentd_sends_its_clients_notifications_only_through_the_gate() {
    let root = workspace();
    let mut elsewhere = Vec::new();
    for file in sources(&root.join("agentd/src")) {
        let name = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .display()
            .to_string();
        let text = std::fs::read_to_string(&file).expect("read source");
        if code_of(&text).contains("send_notification")
            && !NOTIFICATION_SENDERS.contains(&name.as_str())
        {
            elsewhere.push(name);
        }
    }
    assert!(
        elsewhere.is_empty(),
        "these files send notifications around the gate of session updates (acp/outgoing.rs: \
         send them with Session::show):\n  {}",
        elsewhere.join("\n  ")
    );
}

#[test]
fn the_checker_finds_a_cycle_and_a_clean_graph_has_none() {
    let a = PathBuf::from("a.rs");
    let b = PathBuf::from("b.rs");
    let c = PathBuf::from("c.rs");
    let mut graph = BTreeMap::new();
    graph.insert(a.clone(), BTreeSet::from([b.clone()]));
    graph.insert(b.clone(), BTreeSet::from([c.clone()]));
    graph.insert(c.clone(), BTreeSet::new());
    assert_eq!(find_cycle(&graph), None);
    graph.insert(c.clone(), BTreeSet::from([a.clone()]));
    assert_eq!(find_cycle(&graph), Some(vec![a.clone(), b, c, a]));
}

#[test]
fn paths_are_found_through_crate_super_and_child_uses_but_not_strings_or_re_exports() {
    let code = code_of(
        "use crate::x::Y;\nuse child::Z;\npub use other::W;\nfn f() { super::g(); let s = \"see crate::q\"; }\n// crate::r\n",
    );
    let children = BTreeSet::from(["child".to_owned(), "other".to_owned()]);
    let module = vec!["m".to_owned(), "n".to_owned()];
    let paths = named_paths(&code, &module, &children);
    assert!(
        paths.contains(&vec!["x".to_owned(), "Y".to_owned()]),
        "{paths:?}"
    );
    assert!(paths.contains(&vec!["m".to_owned(), "g".to_owned()]));
    assert!(paths.contains(&vec![
        "m".to_owned(),
        "n".to_owned(),
        "child".to_owned(),
        "Z".to_owned()
    ]));
    assert!(!paths.iter().any(|p| p.contains(&"q".to_owned())));
    assert!(!paths.iter().any(|p| p.contains(&"r".to_owned())));
    assert!(!paths.iter().any(|p| p.contains(&"W".to_owned())));
    assert_eq!(
        paths_of("a::{B, c::D, self}"),
        vec![
            vec!["a".to_owned(), "B".to_owned()],
            vec!["a".to_owned(), "c".to_owned(), "D".to_owned()],
            vec!["a".to_owned()],
        ]
    );
}
