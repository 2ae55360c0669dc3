//! The shape of the source tree, checked: no import circle between the files of a crate nor
//! between its folders, in every crate of the workspace and the scenarios' support code;
//! agentd's modules in layers that import only down; no file whose non-test part is over 600
//! lines; no `Result<_, String>` outside test code (errors are typed: a caller can tell one
//! failure from another without reading its text); and one way out of agentd for the
//! notifications it sends its client (the gate of `session/update`s, RFC 0003's "The
//! transport").
//!
//! A file depends on another when it names an item of the other's module: through `crate::…`,
//! `super::…`, or a `use` of a child module's path. Declaring a child (`mod x;`) and
//! re-exporting one of its items (`pub use x::Item;`) are not uses: they make the child part of
//! the parent's interface, and the child may still name its parent. A module declared with
//! `#[path]` is the module it is declared as, wherever its file lies. Test code (`tests.rs`,
//! `*_tests.rs`, `test_support.rs`, and an inline `#[cfg(test)] mod tests { … }` at the end of
//! a file) is left out: tests may reach anywhere.
//!
//! A folder depends on a sibling (folder or file) when one of its files, at any depth, depends
//! on a file of the sibling: `agents/lineage.rs → tools/filter.rs` makes `agents/ → tools/`.
//! A circle between folders is a tangle even when no two files form one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates whose files and folders are checked for import circles, by their source root:
/// every crate of the workspace and the scenarios' shared support code.
const CRATES: [&str; 9] = [
    "protocol/src",
    "confine-helper/src",
    "service/src",
    "file-io/src",
    "agentd/src",
    "docgen/src",
    "bench/src",
    "kernel-e2e/src",
    "tests/tests/support",
];

/// The crates whose files are held to [`MAX_LINES`].
const LINE_LIMITED: [&str; 6] = [
    "protocol/src",
    "confine-helper/src",
    "service/src",
    "file-io/src",
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
                if !matches!(name, "tests.rs" | "test_support.rs") && !name.ends_with("_tests.rs") {
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

/// Where a file's inline test module starts (`#[cfg(test)] mod tests {` at its end), or its
/// length. A test module in a file of its own (`mod tests;`) cuts nothing.
fn test_tail(text: &str) -> usize {
    ["#[cfg(test)]\nmod tests {", "#[cfg(test)]\npub mod tests {"]
        .iter()
        .filter_map(|start| text.find(start))
        .min()
        .unwrap_or(text.len())
}

/// The code of a file without comments, string contents and its trailing inline test module.
fn code_of(text: &str) -> String {
    let cut = test_tail(text);
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
    text[..test_tail(text)].lines().count()
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

/// A source file of a crate: where it is and the module it is.
#[derive(Debug, Clone)]
struct SourceFile {
    path: PathBuf,
    module: Vec<String>,
    /// Its place in the crate's folders, relative to the source root: `a/b.rs`; a file declared
    /// with `#[path]` outside the root is placed where its declaring module's children are.
    place: Vec<String>,
}

/// `a/./b/../c` is `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The modules a file declares with `#[path = "…"]` outside its test code, as (name, file).
fn path_modules(file: &Path, text: &str) -> Vec<(String, PathBuf)> {
    let lines: Vec<&str> = text[..test_tail(text)].lines().map(str::trim).collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(target) = line
            .strip_prefix("#[path = \"")
            .and_then(|r| r.strip_suffix("\"]"))
        else {
            continue;
        };
        if i > 0 && lines[i - 1] == "#[cfg(test)]" {
            continue;
        }
        let Some(name) = lines.get(i + 1).and_then(|l| {
            l.trim_start_matches("pub ")
                .strip_prefix("mod ")
                .and_then(|r| r.strip_suffix(';'))
        }) else {
            continue;
        };
        let dir = file.parent().unwrap_or(Path::new(""));
        out.push((name.to_owned(), normalize(&dir.join(target))));
    }
    out
}

/// The files of the crate at `src`, each with its module: those under `src` and those its
/// modules declare with `#[path]`. A `main.rs` beside a `lib.rs` is a crate of its own that
/// reaches the library by its name, never by `crate::`, so it is left out.
fn files_of(src: &Path) -> Vec<SourceFile> {
    let has_lib = src.join("lib.rs").exists();
    let mut files: Vec<SourceFile> = sources(src)
        .into_iter()
        .filter(|f| !(has_lib && f == &src.join("main.rs")))
        .map(|f| {
            let relative = f.strip_prefix(src).expect("under src");
            SourceFile {
                module: module_of(src, &f),
                place: relative
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect(),
                path: f,
            }
        })
        .collect();
    let mut next = 0;
    while next < files.len() {
        let declaring = files[next].clone();
        next += 1;
        let text = std::fs::read_to_string(&declaring.path).expect("read source");
        for (name, target) in path_modules(&declaring.path, &text) {
            let mut module = declaring.module.clone();
            module.push(name.clone());
            if let Some(known) = files.iter_mut().find(|f| normalize(&f.path) == target) {
                known.module = module;
            } else {
                let mut place = declaring.place.clone();
                place.pop();
                place.push(format!("{name}.rs"));
                files.push(SourceFile {
                    path: target,
                    module,
                    place,
                });
            }
        }
    }
    files
}

/// The dependency graph between the files of the crate at `src`.
fn graph_of(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let files = files_of(src);
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .map(|f| (f.module.clone(), f.path.clone()))
        .collect();
    let codes: BTreeMap<PathBuf, String> = files
        .iter()
        .map(|f| {
            (
                f.path.clone(),
                code_of(&std::fs::read_to_string(&f.path).expect("read source")),
            )
        })
        .collect();
    let re_exports: ReExports = files
        .iter()
        .map(|f| (f.path.clone(), re_exports_of(&codes[&f.path], &f.module)))
        .collect();
    let mut graph = BTreeMap::new();
    for file in &files {
        let module = &file.module;
        let children: BTreeSet<String> = modules
            .keys()
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
            .filter_map(|m| m.last().cloned())
            .collect();
        let code = &codes[&file.path];
        let mut edges = BTreeSet::new();
        for path in named_paths(code, module, &children) {
            if let Some(target) = resolve(&path, &modules, &re_exports, 0)
                && target != &file.path
            {
                edges.insert(target.clone());
            }
        }
        graph.insert(file.path.clone(), edges);
    }
    graph
}

/// The two sides of a file edge `a → b` as seen from the folder that holds both: each is the
/// file itself when it lies directly in that folder, or the sub-folder (ending in `/`) that
/// holds it. `agents/lineage.rs → tools/mod.rs` is `agents/ → tools/`; `cases/mod.rs →
/// cases/ipc.rs` is itself.
fn lift(a: &[String], b: &[String]) -> (String, String) {
    let (dir_a, dir_b) = (&a[..a.len() - 1], &b[..b.len() - 1]);
    let common = dir_a.iter().zip(dir_b).take_while(|(x, y)| x == y).count();
    let side = |place: &[String]| {
        let mut name = place[..=common].join("/");
        if place.len() > common + 1 {
            name.push('/');
        }
        name
    };
    (side(a), side(b))
}

/// The graph between the folders of a crate: an edge `x/ → y/` (or `x/ → f.rs`) for every file
/// edge that leaves `x/` for a sibling of it. Edges between two files of one folder are the file
/// graph's and are left out.
fn folder_graph_of(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let places: BTreeMap<PathBuf, Vec<String>> = files_of(src)
        .into_iter()
        .map(|f| (f.path, f.place))
        .collect();
    let mut graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for (from, targets) in graph_of(src) {
        for to in targets {
            let (Some(a), Some(b)) = (places.get(&from), places.get(&to)) else {
                continue;
            };
            let (x, y) = lift(a, b);
            if x.ends_with('/') || y.ends_with('/') {
                graph.entry(src.join(&x)).or_default().insert(src.join(&y));
            }
        }
    }
    graph
}

/// Import circles known and allowed: none. (The helper's last, `confine/` ↔ `landlock.rs`, went
/// when the denied reads' Landlock rules moved into `landlock.rs`.) A cycle would be let through
/// only when every node of it is in one of these.
const KNOWN_CIRCLES: [&[&str]; 0] = [];

/// Every cycle of `graph`, each as its nodes' names relative to `root`, leaving out those whose
/// every node lies in one of [`KNOWN_CIRCLES`].
fn cycles_of(mut graph: BTreeMap<PathBuf, BTreeSet<PathBuf>>, root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    // Break each cycle found at its first edge and look again.
    while let Some(cycle) = find_cycle(&graph) {
        let names: Vec<String> = cycle
            .iter()
            .map(|p| p.strip_prefix(root).unwrap_or(p).display().to_string())
            .collect();
        let known = KNOWN_CIRCLES
            .iter()
            .any(|known| names.iter().all(|n| known.iter().any(|k| n.starts_with(k))));
        if !known {
            out.push(names.join(" → "));
        }
        if let Some(edges) = graph.get_mut(&cycle[0]) {
            edges.remove(&cycle[1]);
        }
    }
    out
}

/// No crate's graph, as `graph` draws it from the crate's source root, has a cycle; `between`
/// says what its nodes are, for the failure's message.
fn assert_no_cycle_in_any_crate(
    graph: fn(&Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>>,
    between: &str,
) {
    let root = workspace();
    let cycles: Vec<String> = CRATES
        .iter()
        .flat_map(|krate| cycles_of(graph(&root.join(krate)), &root))
        .collect();
    assert!(
        cycles.is_empty(),
        "import cycles between {between}:\n  {}",
        cycles.join("\n  ")
    );
}

#[test]
fn no_crate_has_an_import_cycle_between_its_files() {
    assert_no_cycle_in_any_crate(graph_of, "files");
}

#[test]
fn no_crate_has_an_import_cycle_between_its_folders() {
    assert_no_cycle_in_any_crate(folder_graph_of, "folders (a folder is all its files)");
}

/// agentd's top-level modules in layers, lowest first. A module may use modules of its own
/// layer or below, never one above; `lib.rs` only declares them. `agentd/src/lib.rs` says the
/// same in words.
const AGENTD_LAYERS: &[&[&str]] = &[
    // Leaves: values and small utilities that name nothing else of agentd.
    &[
        "words",
        "clock",
        "terminal",
        "cancel",
        "credentials",
        "real_path",
        "deny_read",
        "depth",
        "environment",
        "session_temp",
    ],
    // What agentd reaches outside itself through: the helper, HTTP, the proxy, and what the
    // helper grants and denies.
    &[
        "helper_client",
        "http_client",
        "proxy",
        "composition",
        "denial",
        "profile",
    ],
    // Running things: a command's facts and pipes, the model provider, checkpoints.
    &["command", "model", "checkpoint"],
    // The session: its log, its knobs, its approvals, what narrowing does to it.
    &["session", "knobs", "approval", "narrowing"],
    // What a turn calls: MCP servers and the tools.
    &["mcp", "tools"],
    // Agents that start agents: a persona names the tools it may use, a lineage holds its scope.
    &["agents"],
    // The configuration file, which names all of the above.
    &["config"],
    // The front ends: the ACP agent, the command line, the demo; and `api`, what other crates
    // use of agentd.
    &["acp", "cli", "demo", "api"],
];

/// The layer of each of agentd's top-level modules, by its name in [`AGENTD_LAYERS`].
fn agentd_layer(node: &str) -> Option<usize> {
    let name = node.trim_end_matches('/').trim_end_matches(".rs");
    AGENTD_LAYERS.iter().position(|layer| layer.contains(&name))
}

/// The imports between agentd's top-level modules that run up its layers, and the modules the
/// layers do not place.
fn agentd_upward_imports(src: &Path) -> (Vec<String>, BTreeSet<String>) {
    let places: BTreeMap<PathBuf, Vec<String>> = files_of(src)
        .into_iter()
        .map(|f| (f.path, f.place))
        .collect();
    let mut up = BTreeSet::new();
    let unplaced: BTreeSet<String> = places
        .values()
        .filter_map(|place| {
            let top = place.first()?;
            let node = if place.len() > 1 {
                format!("{top}/")
            } else {
                top.clone()
            };
            (!matches!(top.as_str(), "lib.rs" | "main.rs") && agentd_layer(&node).is_none())
                .then_some(node)
        })
        .collect();
    for (from, targets) in graph_of(src) {
        for to in targets {
            let (Some(a), Some(b)) = (places.get(&from), places.get(&to)) else {
                continue;
            };
            let (x, y) = lift(&a[..], &b[..]);
            if x.contains('/') && !x.ends_with('/') || y.contains('/') && !y.ends_with('/') {
                continue; // both inside one top-level folder
            }
            if x == "lib.rs" {
                continue;
            }
            match (agentd_layer(&x), agentd_layer(&y)) {
                (Some(lx), Some(ly)) if ly > lx => {
                    up.insert(format!(
                        "{x} (layer {lx}) uses {y} (layer {ly}): {} → {}",
                        from.strip_prefix(src).unwrap_or(&from).display(),
                        to.strip_prefix(src).unwrap_or(&to).display()
                    ));
                }
                _ => {}
            }
        }
    }
    (up.into_iter().collect(), unplaced)
}

#[test]
fn agentd_layers_run_one_way() {
    let src = workspace().join("agentd/src");
    let (up, unplaced) = agentd_upward_imports(&src);
    assert!(
        unplaced.is_empty(),
        "agentd modules missing from AGENTD_LAYERS (place each in its layer): {unplaced:?}"
    );
    assert!(
        up.is_empty(),
        "imports running up agentd's layers (move the code down or the import out):\n  {}",
        up.join("\n  ")
    );
}

#[test]
fn no_file_is_over_the_line_limit() {
    let root = workspace();
    let mut long = Vec::new();
    for krate in LINE_LIMITED {
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

/// The source roots whose non-test code holds no `Result<_, String>`: the `src/` of every
/// member of the workspace (read from its `Cargo.toml`, so a new crate is held too), and the
/// tests' shared support library, which the crates' tests and the confinement suite include.
fn typed_error_roots(root: &Path) -> Vec<PathBuf> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("read Cargo.toml");
    let members = manifest
        .split_once("\nmembers = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
        .expect("a members list in the workspace's Cargo.toml");
    let mut roots: Vec<PathBuf> = members
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|m| root.join(m).join("src"))
        .filter(|src| src.is_dir())
        .collect();
    assert!(roots.len() >= 8, "the members found: {roots:?}");
    roots.push(root.join("tests/shared"));
    roots
}

/// The two lints every crate root switches on: no function longer than the workspace's
/// `clippy.toml` allows, and no index or slice expression that can panic outside tests (CI runs
/// clippy with every warning an error).
const ROOT_LINTS: [&str; 2] = [
    "#![warn(clippy::too_many_lines)]",
    "#![cfg_attr(not(test), warn(clippy::indexing_slicing))]",
];

/// Crate roots that only call their library, whose root carries the lints: held to three
/// lines, so that nothing grows in them unlinted (and the helper's counted lines stay its
/// library's).
const THIN_ROOTS: [&str; 1] = ["confine-helper/src/main.rs"];

/// Which of [`ROOT_LINTS`] the crate root `text` lacks, as an inner attribute of its own line.
fn missing_root_lints(text: &str) -> Vec<&'static str> {
    ROOT_LINTS
        .into_iter()
        .filter(|lint| !text.lines().any(|line| line.trim() == *lint))
        .collect()
}

#[test]
fn every_crate_root_lints_long_functions_and_panicking_indexes() {
    let root = workspace();
    let clippy = std::fs::read_to_string(root.join("clippy.toml")).expect("read clippy.toml");
    assert!(
        clippy
            .lines()
            .any(|l| l.replace(' ', "") == "too-many-lines-threshold=80"),
        "the workspace's clippy.toml sets the longest function to 80 lines: {clippy}"
    );
    let mut checked = 0;
    let mut lacking = Vec::new();
    for src in typed_error_roots(&root) {
        for name in ["lib.rs", "main.rs"] {
            let file = src.join(name);
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            checked += 1;
            if THIN_ROOTS.iter().any(|thin| root.join(thin) == file) {
                assert!(
                    text.lines().count() <= 3,
                    "{} only calls its library",
                    file.display()
                );
                continue;
            }
            for lint in missing_root_lints(&text) {
                lacking.push(format!("{}: {lint}", file.display()));
            }
        }
    }
    assert!(checked >= 10, "{checked} crate roots found");
    assert!(
        lacking.is_empty(),
        "crate roots without the lints:\n{}",
        lacking.join("\n")
    );
}

#[test]
fn the_lint_checker_finds_a_root_without_the_lints() {
    let bare = "//! A crate.\n\nuse std::io;\n";
    assert_eq!(missing_root_lints(bare), ROOT_LINTS.to_vec());
    // Named in a comment or a string is not switched on.
    let mentioned = "// #![warn(clippy::too_many_lines)]\nconst S: &str = \"#![cfg_attr(not(test), warn(clippy::indexing_slicing))]\";\n";
    assert_eq!(missing_root_lints(mentioned), ROOT_LINTS.to_vec());
    let linted = format!("//! A crate.\n\n{}\n{}\n", ROOT_LINTS[0], ROOT_LINTS[1]);
    assert!(missing_root_lints(&linted).is_empty());
}

/// Where in `code` (as [`code_of`] leaves it) a `Result` names `String` as its error, by line.
fn string_results(code: &str) -> Vec<usize> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("Result<").map(|i| from + i) {
        from = at + "Result<".len();
        let ident_before = at > 0
            && bytes
                .get(at - 1)
                .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
        if ident_before {
            continue;
        }
        // The arguments between the brackets, split at the commas of their own level; an
        // arrow (`Fn() -> T`) is not a closing bracket.
        let mut depth = 0usize;
        let mut args = vec![String::new()];
        let mut i = from;
        while let Some(&b) = bytes.get(i) {
            match b {
                b'-' if bytes.get(i + 1) == Some(&b'>') => {
                    args.last_mut().expect("one argument").push_str("->");
                    i += 2;
                    continue;
                }
                b'<' | b'(' | b'[' => depth += 1,
                b'>' | b')' | b']' if depth == 0 => break,
                b'>' | b')' | b']' => depth -= 1,
                b',' if depth == 0 => {
                    args.push(String::new());
                    i += 1;
                    continue;
                }
                _ => {}
            }
            args.last_mut().expect("one argument").push(char::from(b));
            i += 1;
        }
        let error = args
            .iter()
            .map(|a| a.split_whitespace().collect::<String>())
            .rfind(|a| !a.is_empty());
        if args.len() > 1
            && error.is_some_and(|e| matches!(e.as_str(), "String" | "std::string::String"))
        {
            found.push(code[..at].matches('\n').count() + 1);
        }
    }
    found
}

#[test]
fn no_crate_returns_a_string_as_its_error_outside_tests() {
    let root = workspace();
    let mut stringly = Vec::new();
    for src in typed_error_roots(&root) {
        for file in sources(&src) {
            let text = std::fs::read_to_string(&file).expect("read source");
            for line in string_results(&code_of(&text)) {
                stringly.push(format!(
                    "{}:{line}",
                    file.strip_prefix(&root).unwrap_or(&file).display()
                ));
            }
        }
    }
    assert!(
        stringly.is_empty(),
        "a Result whose error is a String, in non-test code (give the module an error enum \
         whose Display keeps the message; thiserror is a workspace dependency):\n  {}",
        stringly.join("\n  ")
    );
}

#[test]
fn the_checker_finds_a_string_error_and_passes_a_typed_one() {
    // Each text, and the lines where a `Result` with a `String` error starts in it.
    let cases: [(&str, &[usize]); 9] = [
        ("fn f() -> Result<u8, String> {}", &[1]),
        (
            "\nfn f() -> Result<Vec<(u8, u8)>, std::string::String>",
            &[2],
        ),
        ("type Hook = Box<dyn Fn() -> Result<(), String>>;", &[1]),
        (
            "fn f() -> Result<\n    Box<dyn Fn() -> u8>,\n    String,\n> {}",
            &[1],
        ),
        // The controls: a typed error, a `Result` of one argument, another type's name, and
        // mentions in a string or a comment.
        ("fn f() -> Result<String, Error> {}", &[]),
        ("fn f() -> io::Result<String> {}", &[]),
        ("fn f() -> MyResult<u8, String> {}", &[]),
        ("let s = \"Result<u8, String>\"; // Result<u8, String>", &[]),
        // Test code is left out: the inline test module at a file's end.
        (
            "fn f() {}\n#[cfg(test)]\nmod tests {\n    fn g() -> Result<u8, String> {}\n}\n",
            &[],
        ),
    ];
    for (text, lines) in cases {
        assert_eq!(string_results(&code_of(text)), lines, "{text:?}");
    }
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

#[test]
fn file_edges_lift_to_the_folders_below_the_one_both_share() {
    let place = |p: &str| p.split('/').map(str::to_owned).collect::<Vec<_>>();
    let lifted = |a: &str, b: &str| {
        let (x, y) = lift(&place(a), &place(b));
        (x.to_owned(), y.to_owned())
    };
    assert_eq!(
        lifted("agents/lineage.rs", "tools/filter.rs"),
        ("agents/".to_owned(), "tools/".to_owned())
    );
    assert_eq!(
        lifted("cases/mod.rs", "cases/ipc.rs"),
        ("cases/mod.rs".to_owned(), "cases/ipc.rs".to_owned())
    );
    assert_eq!(
        lifted("lib.rs", "a/b/c.rs"),
        ("lib.rs".to_owned(), "a/".to_owned())
    );
    assert_eq!(
        lifted("a/b/c.rs", "a/d.rs"),
        ("a/b/".to_owned(), "a/d.rs".to_owned())
    );
}

// ---------------------------------------------------------------------------------------------
// The helper's reading orders: each file uses only files named before it.

/// The source files a section of `confine-helper/README.md` names (backticked paths ending in
/// `.rs`, relative to its `src/`), in the order of their first mention; with `listed`, only
/// those its numbered items begin with (`1. \`file.rs\` — …`).
fn named_in_order(readme: &str, heading: &str, listed: bool) -> Vec<String> {
    let mut lines = readme.lines().skip_while(|l| l.trim() != heading);
    let mut text = String::new();
    if lines.next().is_some() {
        for line in lines.take_while(|l| !l.starts_with("## ")) {
            let numbered = line
                .split_once(". `")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok());
            if listed && !numbered {
                continue;
            }
            let line = if listed {
                line.split(" — ").next().unwrap_or(line)
            } else {
                line
            };
            text.push_str(line);
            text.push('\n');
        }
    }
    let mut named: Vec<String> = Vec::new();
    for name in text.split('`').skip(1).step_by(2) {
        if name.ends_with(".rs") && !named.iter().any(|n| n == name) {
            named.push(name.to_owned());
        }
    }
    named
}

/// Each use of a file `order` names after the file using it: "`a` uses `b`, named after it".
fn order_problems(
    order: &[String],
    graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
    src: &Path,
) -> Vec<String> {
    let at = |file: &Path| {
        let name = file.strip_prefix(src).ok()?.to_str()?;
        order.iter().position(|n| n == name)
    };
    let mut problems = Vec::new();
    for (file, uses) in graph {
        let Some(i) = at(file) else { continue };
        for used in uses {
            if at(used).is_some_and(|j| j > i) {
                problems.push(format!(
                    "`{}` uses `{}`, which the order names after it",
                    order[i],
                    used.strip_prefix(src).unwrap_or(used).display()
                ));
            }
        }
    }
    problems
}

#[test]
fn the_helpers_reading_orders_name_what_a_file_uses_before_it() {
    let root = workspace();
    let src = root.join("confine-helper/src");
    let readme =
        std::fs::read_to_string(root.join("confine-helper/README.md")).expect("the README");
    let graph = graph_of(&src);
    for (heading, listed) in [("## Reading order", false), ("## Enforcement kernel", true)] {
        let order = named_in_order(&readme, heading, listed);
        assert!(order.len() >= 10, "{heading} names only {order:?}");
        let problems = order_problems(&order, &graph, &src);
        assert!(
            problems.is_empty(),
            "confine-helper/README.md, {heading}:\n  {}",
            problems.join("\n  ")
        );
        // The control: read backwards, the same files break the rule.
        let backwards: Vec<String> = order.iter().rev().cloned().collect();
        assert!(
            !order_problems(&backwards, &graph, &src).is_empty(),
            "{heading}: the check finds nothing even backwards"
        );
    }
}
