//! P09. The built-in denied reads (RFC 0014): the credential stores of the home directory stay
//! unreadable to a confined command, on every backend and in both confined modes, while what
//! ssh reads on the way to a host stays readable; lifting one in the profile makes it readable.
//! The set under test is the one agentd lists (`agentd config show`), not a copy of it, so an
//! entry agentd lists but no longer denies fails here.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::case::{Case, Cx, RunChecks, Stop, Verdict, fail};
use crate::ensure;
use crate::matrix::{Backend, CONFINED};

pub const CASES: &[Case] = &[Case {
    id: "P09",
    title: "built-in denied reads: a file at every credential path agentd lists reads nothing, ~/.ssh/known_hosts and ~/.ssh/config stay readable, and a lifted entry is read",
    modes: CONFINED,
    exclusive: false,
    body: credential_stores_are_unreadable_until_lifted,
}];

/// How `agentd config show` begins the line of a built-in entry in force.
const DENIED: &str = "  denied: ";
/// How it begins the line of a lifted one.
const LIFTED: &str = "  lifted: ";
/// What follows the path on a built-in entry's line.
const BUILT_IN: &str = " (built in: ";
/// The suffix agentd shows on the entry of a directory's private keys.
const KEYS_OF: &str = "/*";

/// One built-in entry as `config show` lists it: its name and the path it stands for.
struct Listed {
    entry: String,
    path: PathBuf,
    lifted: bool,
}

/// The built-in entries `agentd config show` lists with `HOME` at `home` and the configuration
/// file `config`.
fn listed(cx: &mut Cx, home: &Path, config: &Path) -> Result<Vec<Listed>, Stop> {
    let argv: Vec<OsString> = vec![
        cx.launcher.binaries.agentd.clone().into(),
        "config".into(),
        "show".into(),
        "--config".into(),
        config.into(),
    ];
    let run = cx.run_plain("config show", &cx.control(argv).env("HOME", home))?;
    ensure!(
        run.status == Some(0),
        "agentd config show exited {:?}: {}",
        run.status,
        run.stderr
    );
    let mut out = Vec::new();
    for line in run.stdout.lines() {
        let (lifted, rest) = match (line.strip_prefix(DENIED), line.strip_prefix(LIFTED)) {
            (Some(rest), _) => (false, rest),
            (_, Some(rest)) => (true, rest),
            _ => continue,
        };
        let Some((quoted, source)) = rest.split_once(BUILT_IN) else {
            continue;
        };
        let path: String = serde_json::from_str(quoted)
            .map_err(|e| fail(format!("config show quotes {quoted} oddly: {e}")))?;
        let entry = source
            .split([';', ')'])
            .next()
            .unwrap_or_default()
            .to_owned();
        out.push(Listed {
            entry,
            path: PathBuf::from(path),
            lifted,
        });
    }
    ensure!(
        !out.is_empty(),
        "agentd config show lists no built-in denied read: {}",
        run.stdout
    );
    Ok(out)
}

fn credential_stores_are_unreadable_until_lifted(cx: &mut Cx) -> Verdict {
    let home = cx.dir(&cx.dir.join("home"))?;
    let home = home.canonicalize().unwrap_or(home);
    let plain = cx.file(&cx.dir.join("agentd.toml"), "")?;
    let list = listed(cx, &home, &plain)?;
    let (secrets, readable) = plant_secrets(cx, &list, &home)?;

    // Every file is tried, and the command fails when any read did, as a program would.
    let mut argv = cx.sh("rc=0; for f in \"$@\"; do cat \"$f\" || rc=1; done; exit $rc");
    argv.push("sh".into());
    argv.extend(secrets.iter().map(|(p, _, _)| p.clone().into()));
    argv.extend(readable.iter().map(|(p, _)| p.clone().into()));

    confined_reads_are_denied(cx, &argv, &home, &secrets, &readable)?;
    one_lifted_entry_is_read(cx, &argv, &home, &secrets)?;

    // The control: unconfined, the same command reads every one of them.
    let control = cx.run("control", &cx.control(argv).env("HOME", &home))?;
    control.succeeded()?;
    for (path, secret, _) in &secrets {
        ensure!(
            control.stdout.contains(secret.as_str()),
            "the control did not read {}, so the confined run's silence proves nothing: {:?}",
            path.display(),
            control.stdout
        );
    }
    Ok(())
}

/// A file planted at a listed path: where, the secret it holds, and the built-in entry that
/// denies it.
type Planted<'a> = (PathBuf, String, &'a str);

/// A file that stays readable, and the text it holds.
type Readable = (PathBuf, String);

/// A file holding a secret at every listed path (each with the entry that lists it); for the
/// keys of ~/.ssh, a key beside the two files that stay readable (the second list, each with
/// its text).
fn plant_secrets<'a>(
    cx: &Cx,
    list: &'a [Listed],
    home: &Path,
) -> Result<(Vec<Planted<'a>>, Vec<Readable>), Stop> {
    let tag = cx.tag.clone();
    let mut secrets: Vec<Planted<'a>> = Vec::new();
    let mut readable: Vec<Readable> = Vec::new();
    for (i, listed) in list.iter().enumerate() {
        ensure!(
            !listed.lifted,
            "nothing is lifted, yet config show lists {} as lifted",
            listed.entry
        );
        let secret = format!("credential-{i}-{tag}");
        let path = match listed.path.to_str().and_then(|p| p.strip_suffix(KEYS_OF)) {
            Some(dir) => {
                let dir = PathBuf::from(dir);
                for name in ["known_hosts", "config"] {
                    let text = format!("readable-{name}-{tag}");
                    readable.push((cx.file(&dir.join(name), &format!("{text}\n"))?, text));
                }
                dir.join("id_ed25519")
            }
            None => listed.path.clone(),
        };
        ensure!(
            path.starts_with(home),
            "config show lists {} outside HOME {}",
            path.display(),
            home.display()
        );
        cx.file(&path, &format!("{secret}\n"))?;
        secrets.push((path, secret, listed.entry.as_str()));
    }
    Ok((secrets, readable))
}

/// Confined, with nothing lifted: the readable files are read, no secret is, the facts name
/// every denied path, and under Landlock they say a file read was denied.
fn confined_reads_are_denied(
    cx: &mut Cx,
    argv: &[OsString],
    home: &Path,
    secrets: &[Planted<'_>],
    readable: &[Readable],
) -> Verdict {
    let run = cx.run("confined", &cx.confined(argv.to_vec()).env("HOME", home))?;
    let facts = run.ran()?.clone();
    let out = &run.stdout;
    for (path, text) in readable {
        ensure!(
            out.contains(text.as_str()),
            "the confined run could not read {}, which stays readable: {out:?}",
            path.display()
        );
    }
    for (path, secret, entry) in secrets {
        ensure!(
            !out.contains(secret.as_str()),
            "the confined run read {} (built in: {entry}): {out:?}",
            path.display()
        );
        let shown = path.to_string_lossy().into_owned();
        ensure!(
            facts.deny_read.contains(&shown),
            "the facts' deny_read {:?} does not name {shown}, which {entry} denies",
            facts.deny_read
        );
    }
    if cx.cell.backend == Backend::Landlock {
        ensure!(
            facts.denied && facts.denials.iter().any(|d| d == "file-read"),
            "under Landlock the reads fail, yet the facts do not say a file read was denied: \
             denied {}, {:?}",
            facts.denied,
            facts.denials
        );
    }
    Ok(())
}

/// Lifted in the profile, one entry is read; the others stay denied.
fn one_lifted_entry_is_read(
    cx: &mut Cx,
    argv: &[OsString],
    home: &Path,
    secrets: &[Planted<'_>],
) -> Verdict {
    let (lifted_path, lifted_secret, lifted_entry) = secrets
        .iter()
        .find(|(p, _, e)| !e.ends_with(KEYS_OF) && p.starts_with(home))
        .cloned()
        .ok_or_else(|| fail("config show lists no built-in entry of a single path"))?;
    let lifting = cx.file(
        &cx.dir.join("lifting.toml"),
        &format!("[sandbox]\nlift_deny_read = [{lifted_entry:?}]\n"),
    )?;
    let relisted = listed(cx, home, &lifting)?;
    ensure!(
        relisted.iter().any(|l| l.lifted && l.entry == lifted_entry),
        "config show does not list {lifted_entry} as lifted by the profile"
    );
    let run = cx.run(
        "confined, one lifted",
        &cx.confined(argv.to_vec())
            .env("HOME", home)
            .config(&lifting),
    )?;
    let facts = run.ran()?.clone();
    ensure!(
        run.stdout.contains(&lifted_secret),
        "{lifted_entry} is lifted, yet the confined run could not read {}: {:?}",
        lifted_path.display(),
        run.stdout
    );
    ensure!(
        !facts
            .deny_read
            .contains(&lifted_path.to_string_lossy().into_owned()),
        "{lifted_entry} is lifted, yet the facts still deny {}",
        lifted_path.display()
    );
    for (path, secret, entry) in secrets {
        ensure!(
            *entry == lifted_entry || !run.stdout.contains(secret.as_str()),
            "lifting {lifted_entry} let {} be read too",
            path.display()
        );
    }
    Ok(())
}
