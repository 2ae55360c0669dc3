//! The Seatbelt profile: its text for every mode, network and kind of protected path (insta
//! snapshots of fixed, made-up macOS paths), how paths are written into it, and the plan that
//! builds it from a real request on this machine.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use confine_protocol::{
    Backend, BackendChoice, Enforcement, Limits, Mode, Network, Policy, Spawn, Stdio, StdioSpec,
};

use super::*;
use crate::ceiling::Ceiling;
use crate::confine::{self, Context, NotRun};
use crate::test_support::Scratch;

// ---------------------------------------------------------------------------------------------
// A reader of SBPL as `sandbox-exec` reads it: lists, atoms, strings (where `\` escapes the next
// character) and `;` comments. The tests judge the profile by what it parses to, not by its
// text: a path that closed its string early would show as forms of its own.

#[derive(Debug, Clone, PartialEq)]
enum Form {
    Atom(String),
    Str(String),
    List(Vec<Form>),
}

fn read(text: &str) -> Vec<Form> {
    let chars: Vec<char> = text.chars().collect();
    let mut stack: Vec<Vec<Form>> = vec![Vec::new()];
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ';' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '(' => {
                stack.push(Vec::new());
                i += 1;
            }
            ')' => {
                let list = stack.pop().expect("a ) closes an open list");
                stack
                    .last_mut()
                    .expect("a ) inside a list")
                    .push(Form::List(list));
                i += 1;
            }
            '"' => {
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        Some('"') => break,
                        Some('\\') => i += 1,
                        Some(_) => {}
                        None => panic!("an unterminated string in {text}"),
                    }
                    s.push(*chars.get(i).unwrap_or_else(|| panic!("a \\ ends {text}")));
                    i += 1;
                }
                stack.last_mut().expect("open").push(Form::Str(s));
                i += 1;
            }
            c if c.is_whitespace() => i += 1,
            _ => {
                let start = i;
                while i < chars.len() && !chars[i].is_whitespace() && !"();\"".contains(chars[i]) {
                    i += 1;
                }
                let atom = chars[start..i].iter().collect();
                stack.last_mut().expect("open").push(Form::Atom(atom));
            }
        }
    }
    assert_eq!(stack.len(), 1, "every list is closed");
    stack.pop().expect("the top level")
}

/// A form written back as SBPL, for messages and comparisons.
fn show(form: &Form) -> String {
    match form {
        Form::Atom(a) => a.clone(),
        Form::Str(s) => format!("{s:?}"),
        Form::List(items) => format!("({})", items.iter().map(show).collect::<Vec<_>>().join(" ")),
    }
}

/// Every rule of the profile as written back.
fn rules_of(text: &str) -> Vec<String> {
    read(text).iter().map(show).collect()
}

/// Every string literal of the profile, decoded.
fn strings_of(text: &str) -> Vec<String> {
    fn walk(form: &Form, out: &mut Vec<String>) {
        match form {
            Form::Str(s) => out.push(s.clone()),
            Form::List(items) => items.iter().for_each(|f| walk(f, out)),
            Form::Atom(_) => {}
        }
    }
    let mut out = Vec::new();
    read(text).iter().for_each(|f| walk(f, &mut out));
    out
}

// ---------------------------------------------------------------------------------------------
// A matcher of the regexes the profile writes, as Seatbelt's POSIX-style regexes read them: `^`
// and `$`, `\` escapes, `[...]` classes without ranges, `(a|b)` groups, `.`, and `?` or `*` after
// an atom. Written apart from the generator, so a wrong escape shows as a wrong match.

#[derive(Debug, Clone)]
enum Atom {
    Char(char),
    Any,
    Class(Vec<char>),
    Group(Vec<Vec<(Atom, char)>>),
}

/// A sequence of (atom, quantifier: ' ', '?' or '*') up to `)` or `|` or the end.
fn parse_seq(re: &[char], i: &mut usize) -> Vec<(Atom, char)> {
    let mut seq = Vec::new();
    while *i < re.len() && re[*i] != ')' && re[*i] != '|' {
        let atom = match re[*i] {
            '\\' => {
                *i += 1;
                Atom::Char(*re.get(*i).expect("an escaped character"))
            }
            '.' => Atom::Any,
            '[' => {
                let mut set = Vec::new();
                *i += 1;
                while re[*i] != ']' {
                    set.push(re[*i]);
                    *i += 1;
                }
                Atom::Class(set)
            }
            '(' => {
                let mut alternatives = Vec::new();
                loop {
                    *i += 1;
                    alternatives.push(parse_seq(re, i));
                    if re[*i] == ')' {
                        break;
                    }
                }
                Atom::Group(alternatives)
            }
            c => {
                assert!(!"^$*+?{}]".contains(c), "{c} unescaped in {re:?}");
                Atom::Char(c)
            }
        };
        *i += 1;
        let quantifier = match re.get(*i) {
            Some(q @ ('?' | '*')) => {
                *i += 1;
                *q
            }
            _ => ' ',
        };
        seq.push((atom, quantifier));
    }
    seq
}

/// Every position in `text` where `seq` can end when it starts at `at`.
fn ends(seq: &[(Atom, char)], text: &[char], at: usize) -> Vec<usize> {
    let Some(((atom, quantifier), rest)) = seq.split_first() else {
        return vec![at];
    };
    let once = |from: usize| -> Vec<usize> {
        match atom {
            Atom::Char(c) => (text.get(from) == Some(c))
                .then_some(from + 1)
                .into_iter()
                .collect(),
            Atom::Any => (from < text.len())
                .then_some(from + 1)
                .into_iter()
                .collect(),
            Atom::Class(set) => (text.get(from).is_some_and(|c| set.contains(c)))
                .then_some(from + 1)
                .into_iter()
                .collect(),
            Atom::Group(alternatives) => alternatives
                .iter()
                .flat_map(|alt| ends(alt, text, from))
                .collect(),
        }
    };
    let mut starts = vec![at];
    match quantifier {
        '?' => starts.extend(once(at)),
        '*' => {
            let mut frontier = vec![at];
            while let Some(from) = frontier.pop() {
                for next in once(from) {
                    if !starts.contains(&next) {
                        starts.push(next);
                        frontier.push(next);
                    }
                }
            }
        }
        _ => starts = once(at),
    }
    let mut out: Vec<usize> = starts
        .into_iter()
        .flat_map(|s| ends(rest, text, s))
        .collect();
    out.dedup();
    out
}

/// Whether the anchored regex `re` matches the whole of `text`.
fn matches(re: &str, text: &str) -> bool {
    let Some(body) = re.strip_prefix('^').and_then(|r| r.strip_suffix('$')) else {
        return false;
    };
    let re: Vec<char> = body.chars().collect();
    let mut i = 0;
    let seq = parse_seq(&re, &mut i);
    assert_eq!(i, re.len(), "the whole of {body} is read");
    let text: Vec<char> = text.chars().collect();
    ends(&seq, &text, 0).contains(&text.len())
}

/// The position of the rule `(HEAD (regex RE))` whose regex matches `path`.
fn regex_rule_at(text: &str, head: &str, path: &str) -> Option<usize> {
    read(text).iter().position(|form| {
        let Form::List(items) = form else {
            return false;
        };
        let Some((Form::List(filter), ops)) = items.split_last() else {
            return false;
        };
        let shown: Vec<String> = ops.iter().map(show).collect();
        shown.join(" ") == head
            && matches!(&filter[..], [Form::Atom(f), Form::Str(re)] if f == "regex" && matches(re, path))
    })
}

#[test]
fn the_matcher_reads_classes_groups_and_escapes() {
    assert!(matches("^[aA]\\.(b|B)(/.*)?$", "A.b/x/y"));
    assert!(matches("^[aA]\\.(b|B)(/.*)?$", "a.B"));
    // The controls: an escaped dot is no wildcard, and a class holds only its letters.
    assert!(!matches("^[aA]\\.(b|B)(/.*)?$", "aXb"));
    assert!(!matches("^[aA]\\.(b|B)(/.*)?$", "c.b"));
    assert!(!matches("^[aA]\\.(b|B)(/.*)?$", "a.bc"));
}

#[test]
fn the_reader_sees_a_string_closed_early_as_forms_of_its_own() {
    // The control of the escaping tests: written unescaped, the hostile name of
    // `a_path_written_to_widen_the_profile_stays_one_literal` becomes a rule.
    let raw = format!("(allow file-write* (subpath \"{BALANCED}\"))");
    let rules = rules_of(&raw);
    assert!(
        rules.contains(&"(allow file-write* (subpath \"/\"))".to_owned()),
        "{rules:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Paths as SBPL strings.

fn path(text: &str) -> PathBuf {
    PathBuf::from(text)
}

#[test]
fn quotes_backslashes_and_scheme_punctuation_stay_inside_one_string() {
    for name in [
        "/Users/dev/with \"quotes\"",
        "/Users/dev/back\\slash\\",
        "/Users/dev/(parens) and spaces",
        "/Users/dev/semi;colon ; not a comment",
        "/Users/dev/#hash 'single' `tick`",
        "/Users/dev/ünïcödé ✓",
    ] {
        let text = quoted(Path::new(name), "writable root").expect("a printable path");
        assert_eq!(strings_of(&text), [name], "{text}");
        assert_eq!(read(&text).len(), 1, "one string: {text}");
    }
}

#[test]
fn control_characters_and_bytes_that_are_not_utf8_are_refused_naming_the_path() {
    for name in [
        "/Users/dev/new\nline",
        "/Users/dev/tab\there",
        "/Users/dev/nul\0byte",
        "/Users/dev/carriage\rreturn",
        "/Users/dev/del\u{7f}",
        "/Users/dev/c1\u{85}",
    ] {
        let err = quoted(Path::new(name), "denied read").expect_err(name);
        assert!(matches!(err, ProfileError::Control { .. }), "{err:?}");
        let message = err.to_string();
        assert!(message.starts_with("denied read /Users/dev/"), "{message}");
        assert!(
            !message.contains('\n'),
            "the message shows it escaped: {message}"
        );
    }
    let bytes = std::ffi::OsStr::from_bytes(b"/Users/dev/latin1-\xe9t\xe9");
    let err = quoted(Path::new(bytes), "protected path").expect_err("not UTF-8");
    assert_eq!(
        err,
        ProfileError::NotUtf8 {
            what: "protected path",
            path: "/Users/dev/latin1-\u{fffd}t\u{fffd}".into()
        }
    );
    // The control: the same names without the offending character pass.
    assert!(quoted(Path::new("/Users/dev/newline"), "denied read").is_ok());
    assert!(quoted(Path::new("/Users/dev/latin1-ete"), "protected path").is_ok());
}

#[test]
fn only_plain_absolute_paths_are_written() {
    for name in [
        "relative/path",
        "/Users/dev/../etc",
        "/Users/dev/./x",
        "/Users//dev",
        "/Users/dev/",
        "",
    ] {
        let err = quoted(Path::new(name), "writable root").expect_err(name);
        assert!(
            matches!(err, ProfileError::NotPlain { .. }),
            "{name}: {err:?}"
        );
    }
    assert_eq!(
        quoted(Path::new("/"), "writable root").as_deref(),
        Ok("\"/\"")
    );
}

/// A workspace-write profile with `hostile` in every place a path goes.
fn everywhere(hostile: &Path) -> Profile {
    Profile {
        mode: Mode::WorkspaceWrite,
        writable: vec![hostile.to_owned()],
        temp: Some(hostile.join("tmp")),
        read_only: vec![hostile.join(".git")],
        pinned: vec![hostile.join("sub")],
        deny_read: vec![hostile.join("secret")],
        network: Net::Denied,
        unix_sockets: vec![hostile.join("sock")],
    }
}

/// A directory name that, written unescaped, would close its rule and add one of its own.
const BALANCED: &str = "/Users/dev/x\")) (allow file-write* (subpath \"/\")) (x (y \"";

#[test]
fn a_path_written_to_widen_the_profile_stays_one_literal() {
    for hostile in [
        BALANCED,
        "/Users/dev/x\")(allow file-write* (subpath \"/\")",
        "/Users/dev/x\\\")) (allow file-write* (subpath \"/\")) (x \\\"",
    ] {
        widening_is_one_literal(Path::new(hostile));
    }
}

fn widening_is_one_literal(hostile: &Path) {
    let text = profile(&everywhere(hostile)).expect("printable paths are written");
    let rules = rules_of(&text);
    assert!(
        !rules
            .iter()
            .any(|r| r == "(allow file-write* (subpath \"/\"))"),
        "{text}"
    );
    let widening: Vec<&String> = rules
        .iter()
        .filter(|r| r.starts_with("(allow file-write*"))
        .collect();
    assert_eq!(widening.len(), 2, "the root, the temp dir: {widening:?}");
    let strings = strings_of(&text);
    for expected in ["", "/tmp", "/sock"] {
        let whole = format!("{}{expected}", hostile.display());
        assert!(strings.contains(&whole), "{whole} in {strings:?}");
    }
    // The denies name their paths by regexes, each matching the hostile path and no other.
    for expected in ["/.git", "/sub", "/secret"] {
        let whole = format!("{}{expected}", hostile.display());
        let matching: Vec<&String> = strings.iter().filter(|s| matches(s, &whole)).collect();
        assert_eq!(matching.len(), 1, "{whole} in {strings:?}");
        assert!(
            !matches(matching[0], &format!("{whole}x")),
            "{}",
            matching[0]
        );
    }
}

#[test]
fn a_control_character_is_refused_wherever_a_path_goes() {
    let newline = path("/Users/dev/x\n(allow file-write* (subpath \"/\"))");
    for place in 0..6 {
        let mut p = everywhere(Path::new("/Users/dev/fine"));
        match place {
            0 => p.writable = vec![newline.clone()],
            1 => p.temp = Some(newline.clone()),
            2 => p.read_only = vec![newline.clone()],
            3 => p.pinned = vec![newline.clone()],
            4 => p.deny_read = vec![newline.clone()],
            _ => p.unix_sockets = vec![newline.clone()],
        }
        assert!(
            matches!(profile(&p), Err(ProfileError::Control { .. })),
            "place {place}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The profile's rules.

#[test]
fn read_only_mode_writes_nothing_but_dev_null_whatever_it_is_given() {
    let mut p = everywhere(Path::new("/Users/dev/project"));
    p.mode = Mode::ReadOnly;
    let rules = rules_of(&profile(&p).expect("a profile"));
    let allowed: Vec<&String> = rules
        .iter()
        .filter(|r| r.starts_with("(allow file-write"))
        .collect();
    assert_eq!(
        allowed,
        [
            "(allow file-write-data file-ioctl (literal \"/dev/null\"))",
            "(allow file-write-data (subpath \"/dev/fd\"))"
        ]
    );
    // The control: the same input in workspace-write allows the root.
    p.mode = Mode::WorkspaceWrite;
    let rules = rules_of(&profile(&p).expect("a profile"));
    assert!(rules.contains(&"(allow file-write* (subpath \"/Users/dev/project\"))".to_owned()));
    p.mode = Mode::DangerFullAccess;
    assert_eq!(profile(&p), Err(ProfileError::Unconfined));
}

#[test]
fn protections_come_after_the_writes_they_take_back() {
    let text = profile(&everywhere(Path::new("/Users/dev/project"))).expect("a profile");
    let rules = rules_of(&text);
    let at = |rule: &str| {
        rules
            .iter()
            .position(|r| r == rule)
            .unwrap_or_else(|| panic!("{rule} in {text}"))
    };
    let root = at("(allow file-write* (subpath \"/Users/dev/project\"))");
    let denied = |head: &str, path: &str| {
        regex_rule_at(&text, head, path).unwrap_or_else(|| panic!("{head} {path} in {text}"))
    };
    let root_pin = denied("deny file-write-unlink", "/Users/dev/project");
    let git = denied("deny file-write*", "/Users/dev/project/.git/config");
    let pin = denied(
        "deny file-write-unlink file-write-create",
        "/Users/dev/project/sub",
    );
    let secret = denied(
        "deny file-read* file-write* file-map-executable process-exec",
        "/Users/dev/project/secret",
    );
    let last = at("(deny job-creation)");
    assert!(root < root_pin && root_pin < git && git < pin && pin < secret && secret < last);
    assert_eq!(rules[0], "(version 1)");
    assert_eq!(rules[1], "(deny default)");
}

#[test]
fn the_network_rules_follow_the_policy_and_unix_sockets_need_a_denied_network() {
    let mut p = everywhere(Path::new("/Users/dev/project"));
    let socket =
        "(allow network-outbound (remote unix-socket (path-literal \"/Users/dev/project/sock\")))";
    let proxy = "(allow network-outbound (remote ip \"localhost:3128\"))";
    let denied = "(deny network*)";
    let resolver = "(allow network-outbound (remote unix-socket (path-literal \"/private/var/run/mDNSResponder\")))";
    let dns =
        "(allow mach-lookup (global-name \"com.apple.SystemConfiguration.DNSConfiguration\"))";
    let trust = "(allow mach-lookup (global-name \"com.apple.trustd\"))";
    for (network, want, unwanted) in [
        (
            Net::Denied,
            vec![denied, socket],
            vec![proxy, resolver, dns, trust],
        ),
        // The proxy resolves the names; a resolver inside would be a way around the list.
        (
            Net::Proxy,
            vec![denied, proxy, socket, trust],
            vec![resolver, dns],
        ),
        (
            Net::Allowed,
            vec![
                "(allow network*)",
                "(deny network-outbound (remote unix-socket))",
                "(deny network-bind (local unix-socket))",
                resolver,
                dns,
                trust,
            ],
            vec![denied, proxy, socket],
        ),
    ] {
        p.network = network;
        let rules = rules_of(&profile(&p).expect("a profile"));
        for rule in want {
            assert!(
                rules.iter().any(|r| r == rule),
                "{network:?}: {rule} in {rules:?}"
            );
        }
        for rule in unwanted {
            assert!(!rules.iter().any(|r| r == rule), "{network:?}: not {rule}");
        }
        if network == Net::Allowed {
            // The resolver's socket is allowed after Unix sockets are denied, or it would not be.
            let at = |rule: &str| rules.iter().position(|r| r == rule);
            assert!(at(resolver) > at("(deny network-outbound (remote unix-socket))"));
        }
    }
}

#[test]
fn the_directories_on_the_way_are_those_below_the_outermost_writable_area() {
    let areas = [path("/w"), path("/w/inner"), path("/t")];
    assert_eq!(
        on_the_way(&areas, Path::new("/w/inner/a/b/.git")),
        [path("/w/inner"), path("/w/inner/a"), path("/w/inner/a/b")]
    );
    assert_eq!(
        on_the_way(&areas, Path::new("/w/.git")),
        Vec::<PathBuf>::new()
    );
    assert_eq!(on_the_way(&areas, Path::new("/t/x/y")), [path("/t/x")]);
    assert_eq!(
        on_the_way(&areas, Path::new("/elsewhere/x/y")),
        Vec::<PathBuf>::new()
    );
    assert_eq!(on_the_way(&areas, Path::new("/w")), Vec::<PathBuf>::new());
    // A sibling whose name starts like an area is no part of it.
    assert_eq!(
        on_the_way(&areas, Path::new("/wx/a/b")),
        Vec::<PathBuf>::new()
    );
}

// ---------------------------------------------------------------------------------------------
// Snapshots: every mode, network and kind of protected path, with fixed made-up paths.

const ROOT: &str = "/Users/dev/project";

/// One case of protected paths, as the plan would decide it for `ROOT` in workspace-write. The
/// same input in read-only mode shows what that mode leaves out.
fn case(name: &str, mode: Mode, network: Net) -> Profile {
    let root = path(ROOT);
    let mut p = Profile {
        mode,
        writable: vec![root.clone()],
        temp: Some(path(
            "/private/tmp/confine-helper-501/cmd-4026531836-812-1f2e3d4c",
        )),
        // Always: the root's repository by name, and the helper's and agentd's own files.
        read_only: vec![
            root.join(".git"),
            path("/usr/local/bin/confine-helper"),
            path("/Users/dev/Library/Application Support/agentd"),
        ],
        pinned: Vec::new(),
        deny_read: Vec::new(),
        network,
        unix_sockets: Vec::new(),
    };
    match name {
        "none" => {}
        "git_metadata" => {
            // A submodule's .git file and a linked worktree's, found by the repository walk.
            p.read_only.push(root.join("vendor/lib/.git"));
            p.read_only.push(root.join("worktrees/feature/.git"));
            p.pinned = vec![
                root.join("vendor"),
                root.join("vendor/lib"),
                root.join("worktrees"),
                root.join("worktrees/feature"),
            ];
        }
        "profile_protected" => {
            p.read_only.push(root.join(".agentd"));
            p.read_only.push(root.join("deploy/keys"));
            p.pinned = vec![root.join("deploy")];
        }
        "deny_read" => {
            p.deny_read = vec![path("/Users/dev/.ssh"), root.join("config/.env")];
            p.pinned = vec![root.join("config")];
        }
        "unix_socket" => p.unix_sockets = vec![path("/private/var/run/docker.sock")],
        other => panic!("no case {other}"),
    }
    p
}

#[test]
fn snapshots_of_every_mode_network_and_protected_path() {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_snapshot_path("snapshots");
    settings.bind(|| {
        for (mode, mode_name) in [
            (Mode::ReadOnly, "read_only"),
            (Mode::WorkspaceWrite, "workspace_write"),
        ] {
            for (network, network_name) in [
                (Net::Denied, "network_denied"),
                (Net::Allowed, "network_allowed"),
                (Net::Proxy, "allow_list"),
            ] {
                for name in [
                    "none",
                    "git_metadata",
                    "profile_protected",
                    "deny_read",
                    "unix_socket",
                ] {
                    let text = profile(&case(name, mode, network)).expect("a profile");
                    insta::assert_snapshot!(
                        format!("seatbelt__{mode_name}__{network_name}__{name}"),
                        text
                    );
                }
            }
        }
    });
}

// ---------------------------------------------------------------------------------------------
// The plan: a real request on this machine, through `confine::plan`.

fn spawn(mode: Mode, workspace: &Path) -> Spawn {
    Spawn {
        id: 1,
        argv: vec![b"-dash-first".to_vec(), b"arg".to_vec()],
        cwd: workspace.as_os_str().as_bytes().to_vec(),
        env: Vec::new(),
        policy: Policy::read_only()
            .with_mode(mode)
            .with_workspace(workspace.as_os_str().as_bytes().to_vec()),
        backend: BackendChoice::Seatbelt,
        limits: Limits::none(),
        stdio: Stdio {
            stdin: StdioSpec::Null,
            stdout: StdioSpec::Null,
            stderr: StdioSpec::Null,
        },
        proxy: false,
    }
}

fn context(scratch: &Scratch) -> Context {
    let mut ctx = Context::new(Ceiling::default(), Vec::new(), Vec::new(), Vec::new());
    ctx.temp_base = scratch.0.join("temp-base");
    ctx
}

/// The plan's profile, after checking the argv around it.
fn planned(spawn: &Spawn, ctx: &Context) -> Result<(confine::Plan, String), NotRun> {
    let roots = confine::writable_roots(spawn, ctx)?;
    let plan = confine::plan(spawn, ctx, Backend::Seatbelt, &roots, None)?;
    assert_eq!(plan.backend, Backend::Seatbelt);
    assert_eq!(plan.argv[0], SANDBOX_EXEC.as_bytes());
    assert_eq!(plan.argv[1], b"-p");
    assert_eq!(plan.argv[3], b"--", "the command follows --");
    assert_eq!(plan.argv[4..], spawn.argv[..]);
    assert!(matches!(plan.confinement, confine::Confinement::None));
    let text = String::from_utf8(plan.argv[2].clone()).expect("a profile is UTF-8");
    Ok((plan, text))
}

fn not_run_text(not_run: NotRun) -> String {
    match not_run {
        NotRun::Refused(why) => why.to_string(),
        NotRun::RunnerFailed(_, _, why) => why,
        NotRun::ExecFailed(errno, ..) => format!("exec failed: {errno}"),
    }
}

#[test]
fn a_workspace_that_is_a_repository_is_writable_but_its_git_metadata_is_not() {
    let scratch = Scratch::new("seatbelt-plan-git");
    let ws = scratch.0.join("repo");
    std::fs::create_dir_all(ws.join(".git/hooks")).expect("a repository");
    std::fs::create_dir_all(ws.join("src")).expect("a source directory");
    let ctx = context(&scratch);
    let (plan, text) = planned(&spawn(Mode::WorkspaceWrite, &ws), &ctx).expect("a plan");
    let rules = rules_of(&text);
    let ws_text = ws.display().to_string();
    let git = ws.join(".git").display().to_string();
    let write = format!("(allow file-write* (subpath {ws_text:?}))");
    let (write_at, git_at) = (
        rules.iter().position(|r| *r == write),
        regex_rule_at(&text, "deny file-write*", &git),
    );
    assert!(write_at.is_some(), "{write} in {text}");
    assert!(
        git_at > write_at,
        "{git} denied after the root's rule in {text}"
    );
    // The command's own temp directory, made for it and removed with the plan.
    let temp = plan.cleanup.temp_dir.clone().expect("a private temp dir");
    let temp_rule = format!(
        "(allow file-write* (subpath {:?}))",
        std::fs::canonicalize(&temp)
            .expect("it exists")
            .display()
            .to_string()
    );
    assert!(rules.contains(&temp_rule), "{temp_rule} in {text}");
    let tmpdir = plan
        .env
        .iter()
        .find(|v| v.name == b"TMPDIR")
        .expect("TMPDIR");
    assert_eq!(tmpdir.value, temp.as_os_str().as_bytes());
    // Whatever is protected, Seatbelt's own gaps make the run partial, naming each.
    let Some(Enforcement::Partial { missing }) = &plan.enforcement else {
        panic!("partial: {:?}", plan.enforcement);
    };
    for gap in gaps() {
        assert!(missing.contains(&gap), "{gap} in {missing:?}");
    }
    assert!(plan.layers.is_empty(), "the protocol has no Seatbelt layer");
    drop(plan);
    assert!(
        !temp.exists(),
        "the plan's cleanup removed {}",
        temp.display()
    );
    // The control: read-only mode has no rule for the workspace and no temp directory.
    let (plan, text) = planned(&spawn(Mode::ReadOnly, &ws), &ctx).expect("a plan");
    assert!(!rules_of(&text).contains(&write), "{text}");
    assert!(
        regex_rule_at(&text, "deny file-write*", &git).is_none(),
        "{text}"
    );
    assert!(plan.cleanup.temp_dir.is_none());
}

/// The temp directory is ruled by the path the plan checked, never by its name resolved again: a
/// link planted there since would otherwise make its target writable.
#[test]
fn the_temp_directory_is_ruled_as_checked_and_not_resolved_again() {
    let scratch = Scratch::new("seatbelt-temp-link");
    let checked_at = scratch.0.join("session-temp");
    let elsewhere = scratch.0.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("a directory the command must not write");
    std::os::unix::fs::symlink(&elsewhere, &checked_at).expect("a planted link");
    let request = spawn(Mode::WorkspaceWrite, &scratch.0.join("ws"));
    let mut checked = Checked::new(&request, &[], Default::default(), &[], None);
    checked.temp = Some((checked_at.clone(), true));
    let profile = checked.profile().expect("a profile");
    assert_eq!(profile.temp.as_deref(), Some(checked_at.as_path()));
    let text = super::profile(&profile).expect("its text");
    let target = format!("{:?}", elsewhere.display().to_string());
    assert!(!text.contains(&target), "{target} is not named in {text}");
}

#[test]
fn a_protected_path_that_does_not_exist_yet_is_enforced_by_name_not_reported_missing() {
    let scratch = Scratch::new("seatbelt-plan-absent");
    let ws = scratch.0.join("ws");
    std::fs::create_dir_all(&ws).expect("a workspace without a repository");
    let mut request = spawn(Mode::WorkspaceWrite, &ws);
    request.policy.protected = vec![b"deploy/keys".to_vec()];
    let ctx = context(&scratch);
    // The control: the repository walk names both as missing, which the Linux backends report.
    let roots = confine::writable_roots(&request, &ctx).expect("roots");
    let walked = crate::protect::protect(&roots, &[path("deploy/keys")]).expect("a walk");
    let absent: Vec<&PathBuf> = walked.absent.iter().map(|(p, _)| p).collect();
    assert_eq!(absent, [&ws.join(".git"), &ws.join("deploy/keys")]);
    assert_eq!(walked.missing.len(), 2, "{:?}", walked.missing);
    assert!(
        walked.missing[0].to_string().starts_with("repository "),
        "{:?}",
        walked.missing
    );
    // Under Seatbelt both are ruled by name, so only Seatbelt's own gaps are missing.
    let (plan, text) = planned(&request, &ctx).expect("a plan");
    let Some(Enforcement::Partial { missing }) = &plan.enforcement else {
        panic!("partial: {:?}", plan.enforcement);
    };
    let mut expected = gaps();
    expected.extend(unverified(None, VERIFIED_MACOS));
    assert_eq!(missing, &expected);
    for absent in absent {
        let shown = absent.display().to_string();
        assert!(
            regex_rule_at(&text, "deny file-write*", &shown).is_some(),
            "{shown} in {text}"
        );
    }
}

#[test]
fn a_submodule_a_protected_path_and_a_denied_read_get_their_rules_and_pins() {
    let scratch = Scratch::new("seatbelt-plan-paths");
    let ws = scratch.0.join("ws");
    std::fs::create_dir_all(ws.join("secrets/inner")).expect("a protected directory");
    std::fs::create_dir_all(ws.join("config")).expect("a config directory");
    std::fs::write(ws.join("config/.env"), "TOKEN=x").expect("a denied file");
    let outside = scratch.0.join("outside");
    std::fs::create_dir_all(&outside).expect("a directory outside");
    let mut request = spawn(Mode::WorkspaceWrite, &ws);
    request.policy.protected = vec![b"secrets".to_vec(), b"deploy/keys".to_vec()];
    request.policy.deny_read = vec![
        ws.join("config/.env").as_os_str().as_bytes().to_vec(),
        outside.as_os_str().as_bytes().to_vec(),
    ];
    let ctx = context(&scratch);
    let (_, text) = planned(&request, &ctx).expect("a plan");
    let shown = |p: PathBuf| p.display().to_string();
    let read = "deny file-read* file-write* file-map-executable process-exec";
    let pin = "deny file-write-unlink file-write-create";
    for (head, path) in [
        ("deny file-write*", shown(ws.join("secrets"))),
        // Not there yet: kept from being made, and so is the directory on its way.
        ("deny file-write*", shown(ws.join("deploy/keys"))),
        (pin, shown(ws.join("deploy"))),
        (pin, shown(ws.join("config"))),
        (read, shown(ws.join("config/.env"))),
        (read, shown(outside.clone())),
    ] {
        assert!(
            regex_rule_at(&text, head, &path).is_some(),
            "{head} {path} in {text}"
        );
    }
    // Nothing outside the writable areas is pinned: it cannot be moved anyway.
    let scratch_dir = shown(scratch.0.clone());
    assert!(regex_rule_at(&text, pin, &scratch_dir).is_none(), "{text}");
    assert!(
        regex_rule_at(&text, "deny file-write-unlink", &scratch_dir).is_none(),
        "{text}"
    );
}

#[test]
fn a_listed_unix_socket_is_allowed_by_its_real_path_and_local_binding_is_refused() {
    let scratch = Scratch::new("seatbelt-plan-socket");
    let ws = scratch.0.join("ws");
    std::fs::create_dir_all(&ws).expect("a workspace");
    let sockets = scratch.0.join("sockets");
    std::fs::create_dir_all(&sockets).expect("a socket directory");
    let socket = sockets.join("agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("a socket");
    std::os::unix::fs::symlink(&sockets, scratch.0.join("link")).expect("a link");
    let mut request = spawn(Mode::WorkspaceWrite, &ws);
    request.policy.unix_sockets = vec![
        scratch
            .0
            .join("link/agent.sock")
            .as_os_str()
            .as_bytes()
            .to_vec(),
        b"/nothing/there.sock".to_vec(),
    ];
    let ctx = context(&scratch);
    let (_, text) = planned(&request, &ctx).expect("a plan");
    let rules = rules_of(&text);
    let allowed: Vec<&String> = rules
        .iter()
        .filter(|r| r.starts_with("(allow network-outbound"))
        .collect();
    assert_eq!(
        allowed,
        [&format!(
            "(allow network-outbound (remote unix-socket (path-literal {:?})))",
            socket.display().to_string()
        )],
        "the real path only; a name with nothing behind it gets no rule"
    );
    assert!(rules.contains(&"(deny network*)".to_owned()));
    request.policy.local_binding = true;
    let why = not_run_text(planned(&request, &ctx).expect_err("refused"));
    assert!(
        why.starts_with("local_binding needs a private network namespace"),
        "{why}"
    );
    // The control: with the network allowed, local_binding changes nothing.
    request.policy.local_binding = true;
    request.policy.unix_sockets.clear();
    request.policy.network = Network::Allow;
    assert!(planned(&request, &ctx).is_ok());
}

#[test]
fn the_allow_list_reaches_the_proxy_port_alone_and_says_the_port_is_the_hosts() {
    let scratch = Scratch::new("seatbelt-plan-proxy");
    let ws = scratch.0.join("ws");
    std::fs::create_dir_all(&ws).expect("a workspace");
    let mut request = spawn(Mode::WorkspaceWrite, &ws);
    request.proxy = true;
    let ctx = context(&scratch);
    let roots = confine::writable_roots(&request, &ctx).expect("roots");
    let (ours, _theirs) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
    let plan = confine::plan(&request, &ctx, Backend::Seatbelt, &roots, Some(ours.into()))
        .expect("a plan");
    let text = String::from_utf8(plan.argv[2].clone()).expect("UTF-8");
    let rules = rules_of(&text);
    let network: Vec<&String> = rules.iter().filter(|r| r.contains("network")).collect();
    assert_eq!(
        network,
        [
            "(deny network*)",
            "(allow network-outbound (remote ip \"localhost:3128\"))"
        ]
    );
    let Some(Enforcement::Partial { missing }) = &plan.enforcement else {
        panic!("partial: {:?}", plan.enforcement);
    };
    assert!(missing.contains(&proxy_gap()), "{missing:?}");
    // The control: without the allow-list the port is not reachable and not named.
    request.proxy = false;
    let (plan, text) = planned(&request, &ctx).expect("a plan");
    assert!(!text.contains("localhost:3128"), "{text}");
    let Some(Enforcement::Partial { missing }) = &plan.enforcement else {
        panic!("partial: {:?}", plan.enforcement);
    };
    assert!(!missing.contains(&proxy_gap()), "{missing:?}");
}

#[test]
fn a_path_no_profile_can_name_refuses_the_command() {
    let scratch = Scratch::new("seatbelt-plan-refused");
    let ws = scratch.0.join("ws");
    std::fs::create_dir_all(&ws).expect("a workspace");
    let mut request = spawn(Mode::WorkspaceWrite, &ws);
    request.policy.protected = vec![b"new\nline".to_vec()];
    let ctx = context(&scratch);
    let why = not_run_text(planned(&request, &ctx).expect_err("refused"));
    assert!(
        why.starts_with(&format!(
            "protected path {}/new\\nline holds a control",
            ws.display()
        )),
        "{why}"
    );
    request.policy.protected = vec![b"newline".to_vec()];
    assert!(planned(&request, &ctx).is_ok(), "the control");
}

// ---------------------------------------------------------------------------------------------
// Deny by default, what is taken away last, and the operations' names.

/// The SBPL operations known to compile on the supported macOS versions (13 and later), as
/// Apple's own profiles (`/System/Library/Sandbox/Profiles`, `/usr/share/sandbox`) use them. An
/// operation Seatbelt does not know makes the whole profile fail to compile, so every command
/// would fail: the generator may emit no other. A name is added here only with a run of the
/// macOS leg of e2e.yml that compiles a profile holding it.
const KNOWN_OPERATIONS: &[&str] = &[
    "default",
    "appleevent-send",
    "file-ioctl",
    "file-map-executable",
    "file-mount",
    "file-read*",
    "file-unmount",
    "file-write*",
    "file-write-create",
    "file-write-data",
    "file-write-unlink",
    "ipc-posix-sem",
    "ipc-posix-shm-read*",
    "ipc-sysv-msg",
    "ipc-sysv-sem",
    "ipc-sysv-shm",
    "job-creation",
    "lsopen",
    "mach-lookup",
    "mach-priv-task-port",
    "network*",
    "network-bind",
    "network-outbound",
    "process-exec",
    "process-fork",
    "process-info*",
    "signal",
    "sysctl-read",
    "user-preference-read",
    "user-preference-write",
];

/// The filters the profile's rules use, known like [`KNOWN_OPERATIONS`].
const KNOWN_FILTERS: &[&str] = &[
    "global-name",
    "ipc-posix-name",
    "literal",
    "local",
    "path-literal",
    "regex",
    "remote",
    "subpath",
    "sysctl-name-prefix",
    "target",
];

/// Every profile the tests can think of: every snapshot case, and one of every place.
fn every_profile() -> Vec<String> {
    let mut texts = Vec::new();
    for mode in [Mode::ReadOnly, Mode::WorkspaceWrite] {
        for network in [Net::Denied, Net::Allowed, Net::Proxy] {
            for name in [
                "none",
                "git_metadata",
                "profile_protected",
                "deny_read",
                "unix_socket",
            ] {
                texts.push(profile(&case(name, mode, network)).expect("a profile"));
            }
            let mut p = everywhere(Path::new("/Users/dev/project"));
            (p.mode, p.network) = (mode, network);
            texts.push(profile(&p).expect("a profile"));
        }
    }
    texts
}

#[test]
fn every_operation_and_filter_the_profile_names_is_one_seatbelt_knows() {
    for text in every_profile() {
        for form in read(&text) {
            let Form::List(items) = &form else {
                panic!("a rule at the top level: {}", show(&form));
            };
            let [Form::Atom(verb), rest @ ..] = &items[..] else {
                panic!("a rule starts with its verb: {}", show(&form));
            };
            if verb == "version" {
                continue;
            }
            assert!(verb == "allow" || verb == "deny", "{}", show(&form));
            let mut operations = 0;
            for item in rest {
                match item {
                    Form::Atom(op) => {
                        assert!(
                            KNOWN_OPERATIONS.contains(&op.as_str()),
                            "{op} in {}",
                            show(&form)
                        );
                        operations += 1;
                    }
                    Form::List(filter) => {
                        let Some(Form::Atom(name)) = filter.first() else {
                            panic!("a filter names itself: {}", show(&form));
                        };
                        assert!(
                            KNOWN_FILTERS.contains(&name.as_str()),
                            "{name} in {}",
                            show(&form)
                        );
                    }
                    Form::Str(_) => panic!("a string outside a filter: {}", show(&form)),
                }
            }
            assert!(operations > 0, "a rule names an operation: {}", show(&form));
        }
    }
    // The control: a name Seatbelt does not know is caught.
    assert!(!KNOWN_OPERATIONS.contains(&"file-write-everything"));
}

#[test]
fn every_profile_denies_by_default_and_takes_the_side_doors_away_last() {
    for text in every_profile() {
        let rules = rules_of(&text);
        assert_eq!(rules[..2], ["(version 1)", "(deny default)"], "{text}");
        assert!(!rules.contains(&"(allow default)".to_owned()), "{text}");
        let last_allow_of_a_path = rules
            .iter()
            .rposition(|r| r.starts_with("(allow file-") || r.starts_with("(allow network"))
            .expect("reads are allowed");
        for denied in [
            "(deny job-creation)",
            "(deny lsopen)",
            "(deny user-preference-write)",
            "(deny file-mount file-unmount)",
            "(deny mach-priv-task-port)",
            "(deny appleevent-send)",
            "(deny mach-lookup (global-name \"com.apple.pasteboard.1\"))",
            "(deny mach-lookup (global-name \"com.apple.windowserver.active\"))",
            "(deny mach-lookup (global-name \"com.apple.coreservices.appleevents\"))",
            "(deny mach-lookup (global-name \"com.apple.coreservices.launchservicesd\"))",
            "(deny mach-lookup (global-name \"com.apple.SecurityServer\"))",
            "(deny sysctl-read (sysctl-name-prefix \"kern.procargs\"))",
        ] {
            let at = rules.iter().position(|r| r == denied);
            assert!(at > Some(last_allow_of_a_path), "{denied} last in {text}");
        }
        // A task port within the sandbox stays allowed: the allow follows its deny.
        let at = |rule: &str| rules.iter().position(|r| r == rule);
        assert!(
            at("(allow mach-priv-task-port (target same-sandbox))")
                > at("(deny mach-priv-task-port)")
        );
        // No Mach service is allowed whole, and none of the denied ones anywhere.
        assert!(!rules.iter().any(|r| r == "(allow mach-lookup)"), "{text}");
        for service in [
            "pasteboard",
            "windowserver",
            "launchservicesd",
            "SecurityServer",
        ] {
            assert!(
                !rules
                    .iter()
                    .any(|r| r.starts_with("(allow mach-lookup") && r.contains(service)),
                "{service} allowed in {text}"
            );
        }
    }
}

#[test]
fn every_writable_root_and_the_temp_directory_is_pinned_in_any_case() {
    let mut p = everywhere(Path::new("/Users/dev/project"));
    p.writable.push(path("/Users/dev/project/nested/root"));
    p.temp = Some(path("/private/tmp/confine-helper-501/cmd-1"));
    let text = profile(&p).expect("a profile");
    for area in [
        "/Users/dev/project",
        "/Users/dev/project/nested/root",
        "/private/tmp/confine-helper-501/cmd-1",
    ] {
        for spelling in [
            area.to_owned(),
            area.to_uppercase(),
            format!("/System/Volumes/Data{area}"),
        ] {
            assert!(
                regex_rule_at(&text, "deny file-write-unlink", &spelling).is_some(),
                "{spelling} pinned in {text}"
            );
        }
        // The control: what is inside a root stays removable.
        let inside = format!("{area}/file");
        assert!(
            regex_rule_at(&text, "deny file-write-unlink", &inside).is_none(),
            "{inside}"
        );
    }
    // Read-only mode writes nothing: no pin is needed, none is written.
    p.mode = Mode::ReadOnly;
    let text = profile(&p).expect("a profile");
    assert!(regex_rule_at(&text, "deny file-write-unlink", "/Users/dev/project").is_none());
}

#[test]
fn a_root_inside_another_writable_area_is_pinned_with_the_directories_on_its_way() {
    let scratch = Scratch::new("seatbelt-nested-root");
    let ws = scratch.0.join("ws");
    let inner = ws.join("a/inner");
    std::fs::create_dir_all(&inner).expect("a root inside the workspace");
    let mut request = spawn(Mode::WorkspaceWrite, &ws);
    request
        .policy
        .writable_roots
        .push(inner.as_os_str().as_bytes().to_vec());
    let (_, text) = planned(&request, &context(&scratch)).expect("a plan");
    let pin = "deny file-write-unlink file-write-create";
    for dir in [ws.join("a"), inner.clone()] {
        let shown = dir.display().to_string();
        assert!(
            regex_rule_at(&text, pin, &shown).is_some(),
            "{shown} in {text}"
        );
    }
    // The control: the outermost root is not on anything's way; it has its own pin alone.
    let outer = ws.display().to_string();
    assert!(regex_rule_at(&text, pin, &outer).is_none(), "{text}");
    assert!(
        regex_rule_at(&text, "deny file-write-unlink", &outer).is_some(),
        "{text}"
    );
}

#[test]
fn protected_and_denied_paths_are_matched_in_any_case_and_spelling() {
    let p = case("deny_read", Mode::WorkspaceWrite, Net::Denied);
    let text = profile(&p).expect("a profile");
    let write = "deny file-write*";
    let read = "deny file-read* file-write* file-map-executable process-exec";
    for (head, spelling) in [
        (write, "/Users/dev/project/.git"),
        (write, "/Users/dev/project/.GIT"),
        (write, "/Users/dev/project/.Git/config"),
        (write, "/users/DEV/Project/.git/hooks/pre-commit"),
        (write, "/System/Volumes/Data/Users/dev/project/.git/config"),
        (write, "/system/volumes/data/Users/dev/project/.GIT"),
        (read, "/Users/dev/project/config/.env"),
        (read, "/Users/dev/project/config/.ENV"),
        (read, "/Users/dev/project/CONFIG/.Env"),
        (read, "/System/Volumes/Data/Users/dev/.ssh/id_ed25519"),
    ] {
        assert!(
            regex_rule_at(&text, head, spelling).is_some(),
            "{spelling} in {text}"
        );
    }
    // Any file named by its numbers is read nothing that way.
    let volfs = "deny file-read* file-map-executable process-exec";
    for spelling in ["/.vol/16777220/2", "/.VOL/16777220/2/x"] {
        assert!(
            regex_rule_at(&text, volfs, spelling).is_some(),
            "{spelling}"
        );
    }
    assert!(
        regex_rule_at(&text, volfs, "/.volume/x").is_none(),
        "the control"
    );
    // The controls: a sibling whose name only starts the same, and the parent, are not denied.
    for (head, other) in [
        (write, "/Users/dev/project/.gitignore"),
        (write, "/Users/dev/project/.git2/config"),
        (write, "/Users/dev/project"),
        (read, "/Users/dev/project/config/.env.example"),
        (read, "/Users/dev/project/config"),
        (read, "/Volumes/Data/Users/dev/.ssh"),
    ] {
        assert!(
            regex_rule_at(&text, head, other).is_none(),
            "{other} in {text}"
        );
    }
}

#[test]
fn the_regex_of_a_path_escapes_every_character_regexes_give_a_meaning() {
    let hostile = "/Users/dev/a.b+c*d?e(f)g[h]i{j}k|l^m$n\\o é #x";
    for reach in [Reach::Itself, Reach::Beneath] {
        let filter = any_case(Path::new(hostile), "protected path", reach).expect("a regex");
        let strings = strings_of(&filter);
        let [re] = &strings[..] else {
            panic!("one string: {filter}");
        };
        assert!(matches(re, hostile), "{re}");
        assert!(matches(re, &hostile.to_uppercase()), "{re}");
        assert_eq!(
            matches(re, &format!("{hostile}/x")),
            reach == Reach::Beneath,
            "{re}"
        );
        // The controls: each character that means something to a regex means only itself.
        for (at, c) in hostile
            .char_indices()
            .filter(|(_, c)| "\\.^$*+?()[]{}|".contains(*c))
        {
            let mut other = hostile.to_owned();
            other.replace_range(at..at + c.len_utf8(), "x");
            assert!(!matches(re, &other), "{c} in {re} matched {other}");
        }
        assert!(!matches(re, "/Users/dev/a"), "{re}");
    }
    // The root itself: every path is beneath it, and it alone is itself.
    let root = any_case(Path::new("/"), "writable root", Reach::Itself).expect("a regex");
    let [re] = &strings_of(&root)[..] else {
        panic!("{root}");
    };
    assert!(matches(re, "/") && !matches(re, "/x"), "{re}");
}

#[test]
fn seatbelt_as_root_is_refused_and_the_control_runs() {
    let scratch = Scratch::new("seatbelt-as-root");
    let request = spawn(Mode::WorkspaceWrite, &scratch.0.join("ws"));
    let mut checked = Checked::new(&request, &[], Default::default(), &[], None);
    checked.as_root = true;
    let err = checked.profile().expect_err("refused as root");
    assert!(
        matches!(err, NotRun::Refused(Refusal::SeatbeltAsRoot)),
        "{}",
        not_run_text(err)
    );
    checked.as_root = false;
    assert!(checked.profile().is_ok(), "the control: an ordinary user");
}

#[test]
fn a_macos_version_is_unverified_until_its_major_version_is_listed() {
    let listed = [15];
    assert_eq!(unverified(Some("15.1.1"), &listed), None);
    assert_eq!(unverified(Some("15"), &listed), None);
    for version in ["14.7", "16.0", "1.15", "x.1", ""] {
        assert_eq!(
            unverified(Some(version), &listed),
            Some(Gap::UnverifiedMacos {
                version: version.to_owned()
            }),
            "{version}"
        );
    }
    assert_eq!(
        unverified(None, &listed),
        Some(Gap::UnverifiedMacos {
            version: "unknown".to_owned()
        })
    );
    let gap = unverified(Some("14.7"), VERIFIED_MACOS).expect("none is verified yet");
    assert!(
        gap.to_string()
            .starts_with("not yet verified on this macOS version (14.7)")
    );
}

#[test]
fn the_product_version_is_read_from_system_version_plist() {
    let plist = "<?xml version=\"1.0\"?>\n<plist version=\"1.0\">\n<dict>\n\t<key>ProductBuildVersion</key>\n\t<string>24B83</string>\n\t<key>ProductName</key>\n\t<string>macOS</string>\n\t<key>ProductVersion</key>\n\t<string>15.1.1</string>\n</dict>\n</plist>\n";
    assert_eq!(product_version(plist).as_deref(), Some("15.1.1"));
    // The controls: no key, a value that is not a version.
    assert_eq!(
        product_version("<key>ProductName</key><string>macOS</string>"),
        None
    );
    assert_eq!(
        product_version("<key>ProductVersion</key><string>15<x/></string>"),
        None
    );
}
