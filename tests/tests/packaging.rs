//! What the packages promise, checked against what they ship: the declared `rust-version` is
//! not below what a locked dependency of a published crate declares; the hand-written manual
//! page of confine-helper names every mode and flag of its usage; the packaged default ceiling
//! sets nothing, documents every key the helper reads, and its examples are valid; the agentd
//! package depends on the helper of exactly its own version; the Debian changelog's newest
//! entry is that version; every file the Debian packages take from the source exists; and
//! `agentd man` and `agentd completions` print exactly the pages and scripts the agentd package
//! installs, for those who install with cargo.

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use support::acp::Scratch;
use support::workspace;

/// The crates a user installs from source (`cargo install confine-helper confine-file-io
/// agentd`) and the one they need; every other member of the workspace is `publish = false`.
const PUBLISHED: [&str; 4] = [
    "confine-protocol",
    "confine-helper",
    "confine-file-io",
    "agentd",
];

/// `cargo metadata --locked --format-version 1` of the workspace: every package of the lock
/// file with its declared `rust_version`, and the resolved graph.
fn metadata() -> Value {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--locked", "--format-version", "1"])
        .current_dir(workspace())
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata --locked failed (is Cargo.lock up to date?): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// A version such as `1.88` or `1.88.0` as comparable numbers (a missing part is 0).
fn version(text: &str) -> Vec<u64> {
    let mut parts: Vec<u64> = text
        .split('.')
        .map(|p| {
            p.parse()
                .unwrap_or_else(|_| panic!("not a version: {text:?}"))
        })
        .collect();
    parts.resize(3, 0);
    parts
}

/// The workspace member `name`'s package in `meta`.
fn member<'a>(meta: &'a Value, name: &str) -> &'a Value {
    let members: Vec<&Value> = meta["workspace_members"]
        .as_array()
        .expect("workspace_members")
        .iter()
        .collect();
    meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == name && members.contains(&&p["id"]))
        .unwrap_or_else(|| panic!("no workspace member {name}"))
}

/// Every package id that building the published crates compiles: them, and their normal and
/// build dependencies, transitively, for every platform (a dev-dependency is not built by
/// `cargo install`). Conservative: a dependency only some other platform uses counts too.
fn built_by_published(meta: &Value) -> BTreeSet<String> {
    let nodes = meta["resolve"]["nodes"].as_array().expect("resolve nodes");
    let node = |id: &str| {
        nodes
            .iter()
            .find(|n| n["id"] == id)
            .unwrap_or_else(|| panic!("no resolve node {id}"))
    };
    let mut seen = BTreeSet::new();
    let mut stack: Vec<String> = PUBLISHED
        .iter()
        .map(|name| member(meta, name)["id"].as_str().expect("id").to_owned())
        .collect();
    while let Some(id) = stack.pop() {
        if !seen.insert(id.clone()) {
            continue;
        }
        for dep in node(&id)["deps"].as_array().expect("deps") {
            let built = dep["dep_kinds"]
                .as_array()
                .expect("dep_kinds")
                .iter()
                .any(|k| k["kind"].is_null() || k["kind"] == "build");
            if built {
                stack.push(dep["pkg"].as_str().expect("pkg").to_owned());
            }
        }
    }
    seen
}

/// The locked registry packages of `built` whose declared `rust_version` is newer than
/// `declared`, as `name version needs X`; and how many registry packages were looked at.
fn newer_than(meta: &Value, built: &BTreeSet<String>, declared: &str) -> (Vec<String>, usize) {
    let mut checked = 0;
    let mut newer = Vec::new();
    for package in meta["packages"].as_array().expect("packages") {
        let id = package["id"].as_str().expect("id");
        if !built.contains(id) || !package["source"].is_string() {
            continue;
        }
        checked += 1;
        if let Some(needs) = package["rust_version"].as_str()
            && version(needs) > version(declared)
        {
            let name = package["name"].as_str().unwrap_or("?");
            let at = package["version"].as_str().unwrap_or("?");
            newer.push(format!("{name} {at} needs {needs}"));
        }
    }
    (newer, checked)
}

/// The workspace declares the oldest toolchain that builds it; a locked dependency that needs
/// a newer one makes that claim false. Each published crate inherits the declaration.
#[test]
fn no_locked_dependency_of_a_published_crate_needs_a_newer_rust_than_declared() {
    let meta = metadata();
    let declared = member(&meta, "agentd")["rust_version"]
        .as_str()
        .expect("agentd declares a rust-version")
        .to_owned();
    for name in PUBLISHED {
        assert_eq!(
            member(&meta, name)["rust_version"].as_str(),
            Some(declared.as_str()),
            "{name} declares another rust-version than the workspace"
        );
    }
    let built = built_by_published(&meta);
    let (newer, checked) = newer_than(&meta, &built, &declared);
    assert!(
        checked > 20,
        "only {checked} locked dependencies found: the graph walk is broken"
    );
    assert!(
        newer.is_empty(),
        "the workspace declares rust-version {declared}, but these locked dependencies of the \
         published crates declare a newer one: {newer:?}; raise rust-version in Cargo.toml \
         (and the toolchain of CI's msrv job) or lock older versions"
    );
    // The control: a declaration one minor version below the newest a dependency declares is
    // caught.
    let newest = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| built.contains(id)))
        .filter(|p| p["source"].is_string())
        .filter_map(|p| p["rust_version"].as_str().map(version))
        .max()
        .expect("some dependency declares a rust_version");
    let below = format!("{}.{}", newest[0], newest[1] - 1);
    assert!(
        !newer_than(&meta, &built, &below).0.is_empty(),
        "rust-version {below} is below {newest:?}, yet no dependency was found newer"
    );
}

/// roff text as a reader sees it: escaped hyphens as hyphens, font changes and zero-width
/// escapes removed.
fn roff_plain(line: &str) -> String {
    line.replace("\\-", "-")
        .replace("\\fB", "")
        .replace("\\fI", "")
        .replace("\\fR", "")
        .replace("\\fP", "")
        .replace("\\&", "")
}

/// Whether `word` occurs in `text` not as part of a longer flag or word (`--fd` is not in
/// `--fds`).
fn has_token(text: &str, word: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.match_indices(word)
        .any(|(at, _)| !text[..at].ends_with(part) && !text[at + word.len()..].starts_with(part))
}

/// The modes and flags of `program`'s usage text: every `--flag` and `-x` it names, and every
/// word that follows `program ` at the start of a line and is not a flag.
fn usage_words(usage: &str, program: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut flags = BTreeSet::new();
    let mut modes = BTreeSet::new();
    for line in usage.lines() {
        if let Some(rest) = line
            .trim_start()
            .strip_prefix(program)
            .and_then(|rest| rest.strip_prefix(' '))
            && let Some(word) = rest.split_whitespace().next()
            && !word.starts_with('-')
        {
            modes.insert(word.to_owned());
        }
        for word in line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
            let flag = word
                .strip_prefix("--")
                .map_or_else(|| word.strip_prefix('-').filter(|f| f.len() == 1), Some);
            if flag.is_some_and(|f| f.starts_with(|c: char| c.is_ascii_alphabetic())) {
                flags.insert(word.to_owned());
            }
        }
    }
    (modes, flags)
}

/// What of `program`'s usage text its manual page does not document: a mode missing from the
/// synopsis (`program MODE`) or from the tagged paragraphs (`.TP` then `.B MODE`), a flag
/// without a tagged paragraph of its own.
fn undocumented(usage: &str, man: &str, program: &str) -> Vec<String> {
    let (modes, flags) = usage_words(usage, program);
    let lines: Vec<String> = man.lines().map(roff_plain).collect();
    let tags: Vec<&String> = lines
        .windows(2)
        .filter(|w| w[0] == ".TP")
        .map(|w| &w[1])
        .collect();
    let page: String = lines.join("\n");
    let mut missing = Vec::new();
    for mode in &modes {
        if !has_token(&page, &format!("{program} {mode}")) {
            missing.push(format!("mode {mode} (synopsis)"));
        }
        if !tags.iter().any(|t| *t == &format!(".B {mode}")) {
            missing.push(format!("mode {mode} (its own paragraph)"));
        }
    }
    for flag in &flags {
        if !tags.iter().any(|t| has_token(t, flag)) {
            missing.push(format!("flag {flag}"));
        }
    }
    missing
}

/// Holds `program`'s manual page (`page`, under `packaging/`) to its usage text: every mode and
/// flag of it is documented, the usage was read (it names each of `seen`), and the control —
/// `grown_line` added to the usage — is found missing as `grown_missing`.
fn page_documents_usage(
    program: &str,
    usage: &str,
    page: &str,
    seen: &[&str],
    grown_line: &str,
    grown_missing: &[&str],
) {
    let man_path = workspace().join("packaging").join(page);
    let man = std::fs::read_to_string(&man_path).expect("read the manual page");
    let (modes, flags) = usage_words(usage, program);
    assert!(
        seen.iter()
            .all(|w| modes.contains(*w) || flags.contains(*w)),
        "the usage text of {program} was not read: modes {modes:?}, flags {flags:?}"
    );
    let missing = undocumented(usage, &man, program);
    assert!(
        missing.is_empty(),
        "{} does not document what {program}'s usage names: {missing:?}",
        man_path.display()
    );
    let grown = format!("{usage}\n  {grown_line}\n");
    assert_eq!(undocumented(&grown, &man, program), grown_missing);
}

/// The usage `program` prints with `args`, on the stream it prints it to, with the status it
/// exits with then.
fn usage_of(program: &str, args: &[&str], code: i32, on_stderr: bool) -> String {
    let out = Command::new(support::binary(program))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    assert_eq!(out.status.code(), Some(code), "{program} {args:?}: {out:?}");
    String::from_utf8(if on_stderr { out.stderr } else { out.stdout }).expect("UTF-8 usage")
}

#[test]
fn the_manual_page_documents_every_mode_and_flag_of_the_helpers_usage() {
    page_documents_usage(
        "confine-helper",
        &usage_of("confine-helper", &["--help"], 0, false),
        "confine-helper/confine-helper.1",
        &["enter", "--served-from", "--fd"],
        "confine-helper frobnicate --no-such-flag N",
        &[
            "mode frobnicate (synopsis)",
            "mode frobnicate (its own paragraph)",
            "flag --no-such-flag",
        ],
    );
}

#[test]
fn the_file_programs_manual_page_documents_every_mode_and_flag_of_its_usage() {
    // The program prints its usage, after what is wrong, for a command line it cannot take.
    page_documents_usage(
        "confine-file-io",
        &usage_of("confine-file-io", &[], 2, true),
        "confine-helper/confine-file-io.1",
        &["write", "read", "--max", "--parents"],
        "confine-file-io append --no-such-flag",
        &[
            "mode append (synopsis)",
            "mode append (its own paragraph)",
            "flag --no-such-flag",
        ],
    );
}

#[test]
fn the_service_manual_page_documents_every_flag_of_its_usage() {
    page_documents_usage(
        "confine-service",
        &usage_of("confine-service", &["--help"], 0, false),
        "confine-service/confine-service.8",
        &["--socket", "--helper", "--group"],
        "[--no-such-flag N]",
        &["flag --no-such-flag"],
    );
}

/// The keys a ceiling file may set: the fields of `struct File` in the helper's source, which
/// the parser takes with `deny_unknown_fields`.
fn ceiling_keys() -> Vec<String> {
    let source = std::fs::read_to_string(workspace().join("confine-helper/src/ceiling.rs"))
        .expect("read ceiling.rs");
    let body = source
        .split_once("struct File {")
        .and_then(|(_, rest)| rest.split_once('}'))
        .map(|(body, _)| body)
        .expect("ceiling.rs defines struct File");
    body.lines()
        .filter_map(|l| l.trim().split_once(": Option<"))
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// `agentd probe --json` asking this build's helper, with `--helper-ceiling ceiling` if given,
/// in a scratch home and XDG directories (no user ceiling; the verdict cache stays in the
/// scratch area).
fn probe(scratch: &Scratch, ceiling: Option<&Path>) -> Value {
    let mut command = Command::new(support::binary("agentd"));
    command
        .args(["probe", "--json", "--helper"])
        .arg(support::binary("confine-helper"))
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", scratch.root.join("home"))
        .env("XDG_CONFIG_HOME", scratch.root.join("config"))
        .env("XDG_CACHE_HOME", scratch.root.join("tmp"))
        .env("XDG_STATE_HOME", scratch.root.join("tmp"));
    if let Some(path) = ceiling {
        command.arg("--helper-ceiling").arg(path);
    }
    // probe exits 1 when no backend is usable; the ceiling is reported either way.
    let out = command.output().expect("run agentd probe");
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("probe --json: {e}: {out:?}"))
}

/// Whether `probe` read `path` as a ceiling source.
fn read_as_source(probe: &Value, path: &Path) -> bool {
    let path = std::fs::canonicalize(path).expect("canonical ceiling path");
    probe["ceiling"]["sources"]
        .as_array()
        .is_some_and(|s| s.iter().any(|p| p.as_str() == path.to_str()))
}

#[test]
fn the_packaged_ceiling_narrows_nothing_and_its_commented_examples_are_valid() {
    let path = workspace().join("packaging/confine-helper/ceiling.toml");
    let text = std::fs::read_to_string(&path).expect("read the packaged ceiling.toml");
    let set: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect();
    assert!(set.is_empty(), "the packaged ceiling sets {set:?}");
    let keys = ceiling_keys();
    assert!(keys.len() >= 10, "struct File was not read: {keys:?}");
    let example = |key: &str| format!("#{key} = ");
    let undocumented: Vec<&String> = keys
        .iter()
        .filter(|k| !text.lines().any(|l| l.starts_with(&example(k))))
        .collect();
    assert!(
        undocumented.is_empty(),
        "{} has no commented example of {undocumented:?}",
        path.display()
    );

    let scratch = Scratch::new("packaged-ceiling");
    let baseline = probe(&scratch, None);
    assert!(
        baseline["ceiling"]["broken"].is_null(),
        "this machine's own ceiling is broken, so the packaged one cannot be judged: {baseline}"
    );
    // As shipped: read, usable, and no narrower than no file at all.
    let shipped = probe(&scratch, Some(&path));
    assert!(read_as_source(&shipped, &path), "{shipped}");
    assert!(shipped["ceiling"]["broken"].is_null(), "{shipped}");
    assert_eq!(
        shipped["ceiling"]["max_mode"],
        baseline["ceiling"]["max_mode"]
    );
    assert_eq!(
        shipped["ceiling"]["allow_network"],
        baseline["ceiling"]["allow_network"]
    );
    // Every example uncommented: still usable, and it narrows (the control that the file is
    // read and judged: its max_mode and allow_network take effect).
    let uncommented: String = text
        .lines()
        .map(|l| match keys.iter().find(|k| l.starts_with(&example(k))) {
            Some(_) => &l[1..],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let all = scratch.root.join("tmp/every-example.toml");
    std::fs::write(&all, &uncommented).expect("write the uncommented ceiling");
    let narrowed = probe(&scratch, Some(&all));
    assert!(read_as_source(&narrowed, &all), "{narrowed}");
    assert!(narrowed["ceiling"]["broken"].is_null(), "{narrowed}");
    // The example's workspace-write, unless this machine's own ceiling is narrower still.
    let modes = ["read-only", "workspace-write", "danger-full-access"];
    let rank = |v: &Value| modes.iter().position(|m| v == *m).expect("a mode");
    let expected = modes[rank(&baseline["ceiling"]["max_mode"]).min(1)];
    assert_eq!(narrowed["ceiling"]["max_mode"], expected);
    assert_eq!(narrowed["ceiling"]["allow_network"], false);
    // A key the helper does not know breaks the ceiling: the check above would see it.
    let unknown = scratch.root.join("tmp/unknown-key.toml");
    std::fs::write(&unknown, format!("{uncommented}\nno_such_key = 1\n")).expect("write");
    assert!(probe(&scratch, Some(&unknown))["ceiling"]["broken"].is_string());
    let _ = std::fs::remove_dir_all(&scratch.root);
}

#[test]
fn the_agentd_and_service_packages_depend_on_the_helper_of_their_own_version() {
    let meta = metadata();
    let agentd = member(&meta, "agentd");
    let helper = member(&meta, "confine-helper");
    let service = member(&meta, "confine-service");
    let version = agentd["version"].as_str().expect("version");
    assert_eq!(helper["version"].as_str(), Some(version));
    assert_eq!(service["version"].as_str(), Some(version));
    // No Debian revision: each package's version is the crate's.
    for package in [agentd, helper, service] {
        assert_eq!(
            package["metadata"]["deb"]["revision"], "",
            "{}: [package.metadata.deb] revision must be \"\"",
            package["name"]
        );
    }
    for package in [agentd, service] {
        let depends = package["metadata"]["deb"]["depends"]
            .as_str()
            .expect("[package.metadata.deb] depends");
        let pinned: Vec<&str> = depends
            .split(',')
            .map(str::trim)
            .filter(|d| d.starts_with("confine-helper"))
            .collect();
        assert_eq!(
            pinned,
            [format!("confine-helper (= {version})")],
            "{}'s [package.metadata.deb] depends ({depends:?}) must pin confine-helper to \
             {version}, the version the crates have",
            package["name"]
        );
    }
}

/// The version of the newest entry of a Debian changelog (`agentd (0.1.0) unstable; ...`).
fn changelog_version(changelog: &str) -> Option<&str> {
    let first = changelog.lines().next()?;
    let (_, rest) = first.split_once(" (")?;
    rest.split_once(')').map(|(version, _)| version)
}

/// Every package ships `packaging/changelog`; its newest entry is the version being packaged, so
/// a version bump without its entry fails here.
#[test]
fn the_debian_changelog_starts_with_the_version_being_packaged() {
    let meta = metadata();
    let version = member(&meta, "agentd")["version"]
        .as_str()
        .expect("version");
    let path = workspace().join("packaging/changelog");
    let changelog = std::fs::read_to_string(&path).expect("read packaging/changelog");
    assert_eq!(
        changelog_version(&changelog),
        Some(version),
        "{}: the newest entry must be for {version}, the version of the crates",
        path.display()
    );
    // The control: an entry of another version is not taken for this one.
    assert_eq!(
        changelog_version("agentd (0.0.1) unstable; urgency=medium\n"),
        Some("0.0.1")
    );
}

/// The files of `[package.metadata.deb] assets` that come from the source tree: every source
/// path but the built binaries (`target/release/...`), relative to the crate's directory.
fn source_assets(package: &Value) -> Vec<String> {
    package["metadata"]["deb"]["assets"]
        .as_array()
        .expect("[package.metadata.deb] assets")
        .iter()
        .map(|a| {
            a[0].as_str()
                .or_else(|| a["source"].as_str())
                .expect("an asset's source")
                .to_owned()
        })
        .filter(|s| !s.starts_with("target/"))
        .collect()
}

#[test]
fn every_file_the_debian_packages_take_from_the_source_exists() {
    let meta = metadata();
    let mut missing = Vec::new();
    let mut found = 0;
    for name in ["confine-helper", "confine-service", "agentd"] {
        let package = member(&meta, name);
        let dir = Path::new(package["manifest_path"].as_str().expect("manifest_path"))
            .parent()
            .expect("crate directory")
            .to_owned();
        for source in source_assets(package) {
            let path = dir.join(&source);
            let exists = match source.rsplit_once("/*") {
                // A glob of one directory (`man/*.1`): at least one file matches.
                Some((parent, suffix)) => std::fs::read_dir(dir.join(parent))
                    .map(|entries| {
                        entries.flatten().any(|e| {
                            e.file_name().to_string_lossy().ends_with(suffix) && e.path().is_file()
                        })
                    })
                    .unwrap_or(false),
                None => path.is_file(),
            };
            if exists {
                found += 1;
            } else {
                missing.push(format!("{name}: {source}"));
            }
        }
    }
    assert!(found >= 3, "no asset was found: the check is broken");
    assert!(
        missing.is_empty(),
        "files the Debian packages install are missing (the man pages and completions of agentd \
         are written by `cargo run -p agentd-docgen`): {missing:?}"
    );
}

/// agentd's binary run with `args`.
fn agentd(args: &[&str]) -> std::process::Output {
    Command::new(support::binary("agentd"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("agentd {args:?}: {e}"))
}

/// The files of `dir` (under `agentd/`), by name, with their text.
fn generated(dir: &str) -> Vec<(String, String)> {
    let dir = workspace().join("agentd").join(dir);
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|entry| {
            let text = std::fs::read_to_string(entry.path()).expect("a generated file");
            (entry.file_name().to_string_lossy().into_owned(), text)
        })
        .collect();
    files.sort();
    files
}

#[test]
fn agentd_man_and_completions_print_the_files_the_package_installs() {
    let pages = generated("man");
    assert!(pages.len() >= 10, "{pages:?}");
    for (file, text) in &pages {
        let name = file.strip_suffix(".1").expect("a page of section 1");
        let args: Vec<&str> = match name.strip_prefix("agentd-") {
            Some(sub) => vec!["man", sub],
            None => vec!["man"],
        };
        let out = agentd(&args);
        assert!(out.status.success(), "agentd {args:?}: {out:?}");
        assert!(
            out.stdout == text.as_bytes(),
            "`agentd {}` does not print agentd/man/{file}: rebuild agentd after `cargo run -p \
             agentd-docgen`",
            args.join(" ")
        );
    }
    // The control: two pages differ, so the comparison above can fail.
    assert_ne!(
        agentd(&["man", "run"]).stdout,
        agentd(&["man", "exec"]).stdout
    );

    let scratch = Scratch::new("man-dir");
    let dir = scratch.root.join("share/man/man1");
    let out = agentd(&["man", "--dir", dir.to_str().expect("utf-8")]);
    assert!(out.status.success(), "agentd man --dir: {out:?}");
    let written: Vec<(String, String)> = pages
        .iter()
        .map(|(file, _)| {
            let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
            (file.clone(), text)
        })
        .collect();
    assert_eq!(written, pages, "agentd man --dir");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        pages.len(),
        "one written path per line: {out:?}"
    );

    let scripts = generated("completions");
    for (shell, file) in [
        ("bash", "agentd.bash"),
        ("zsh", "_agentd"),
        ("fish", "agentd.fish"),
    ] {
        let out = agentd(&["completions", shell]);
        assert!(out.status.success(), "agentd completions {shell}: {out:?}");
        let text = scripts
            .iter()
            .find(|(name, _)| name == file)
            .map(|(_, text)| text.as_bytes());
        assert!(
            Some(out.stdout.as_slice()) == text,
            "`agentd completions {shell}` does not print agentd/completions/{file}"
        );
    }
    let out = agentd(&["completions", "tcsh"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(
        stderr.contains("invalid value 'tcsh' for '<SHELL>'")
            && stderr.contains("[possible values: bash, zsh, fish]"),
        "{stderr}"
    );
}
