//! Running a transcript's commands: each in `sh -c`, with the workspace's build of `agentd` and
//! `confine-helper` first on `PATH`, a private home, `XDG_*` directories and `TMPDIR`, in a
//! fresh working directory per example, so nothing touches the real home. The placeholders
//! (`[WORKSPACE]`, …) are put in before a command runs and put back into what it printed.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use super::markdown::Block;
use super::transcript::{self, Step};

/// How long one command may run before it is killed and reported.
const LIMIT: Duration = Duration::from_secs(60);

/// Besides the build's directory, the `PATH` of every command.
const SYSTEM_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The directory that holds every example's directories while the test runs, removed after.
#[derive(Debug)]
pub struct Root(PathBuf);

impl Root {
    /// A fresh directory (one per call: tests run at once) outside `/tmp` and outside `checkout`: workspace-write gives a command
    /// its own `/tmp` under the helper's own namespaces and bwrap, so a home under `/tmp` would
    /// be missing inside the sandbox under one backend and present under another; and a home inside the checkout would be
    /// what a refusal of the checkout as a workspace names first.
    pub fn new(checkout: &Path) -> Root {
        static ROOTS: AtomicUsize = AtomicUsize::new(0);
        let n = ROOTS.fetch_add(1, Ordering::Relaxed);
        let base = PathBuf::from("/var/tmp");
        let path = base.join(format!("agentd-doc-examples-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        if let Err(e) = std::fs::create_dir_all(&path) {
            panic!(
                "the examples need a directory outside /tmp and outside the checkout; {} could \
                 not be made: {e}",
                path.display()
            );
        }
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        assert!(
            !path.starts_with("/tmp") && !path.starts_with(checkout),
            "{} lies under /tmp or the checkout {}; the examples need a directory outside both",
            path.display(),
            checkout.display()
        );
        Root(path)
    }

    /// A fresh set of directories for example number `n`.
    pub fn example(&self, n: usize, bin: &Path, checkout: &Path) -> Places {
        let dir = self.0.join(format!("example-{n}"));
        let made = |name: &str| {
            let path = dir.join(name);
            std::fs::create_dir_all(&path).expect("an example's directory");
            path
        };
        Places {
            pairs: vec![
                ("[WORKSPACE]", made("work")),
                ("[HOME]", made("home")),
                ("[TMPDIR]", made("tmp")),
                ("[BIN]", bin.to_owned()),
                ("[CHECKOUT]", checkout.to_owned()),
            ],
            dir,
        }
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The placeholders of one example and the paths they stand for.
#[derive(Debug)]
pub struct Places {
    pairs: Vec<(&'static str, PathBuf)>,
    dir: PathBuf,
}

impl Places {
    fn get(&self, name: &str) -> &Path {
        self.pairs
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| p.as_path())
            .unwrap_or(Path::new("/nonexistent"))
    }

    /// `command` with each placeholder replaced by its path, as one shell word: a checkout may
    /// live in a path with a space. (A placeholder is written bare in an example's command,
    /// never inside quotes.)
    pub fn substitute(&self, command: &str) -> String {
        let mut out = command.to_owned();
        for (name, path) in &self.pairs {
            out = out.replace(name, &shell_word(&path.to_string_lossy()));
        }
        out
    }

    /// `output` with each path replaced by its placeholder, the longest path first, so that
    /// `[BIN]` wins over the `[CHECKOUT]` it lies in.
    pub fn normalise(&self, output: &str) -> String {
        let mut pairs: Vec<&(&str, PathBuf)> = self.pairs.iter().collect();
        pairs.sort_by_key(|(_, path)| std::cmp::Reverse(path.as_os_str().len()));
        let mut out = output.to_owned();
        for (name, path) in pairs {
            out = out.replace(path.to_string_lossy().as_ref(), name);
        }
        out
    }
}

/// `text` as one word of `sh`: as it is when it needs no quoting, else in single quotes.
fn shell_word(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:=@%".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        return text.to_owned();
    }
    format!("'{}'", text.replace('\'', "'\\''"))
}

impl Drop for Places {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What one command printed (stdout, then stderr, normalised) and how it ended.
#[derive(Debug)]
pub struct Ran {
    pub lines: Vec<String>,
    /// The exit code, or why there is none.
    pub status: Result<i32, String>,
}

/// Runs `command` (placeholders not yet replaced) in `places`' working directory.
pub fn run(command: &str, places: &Places) -> Ran {
    let home = places.get("[HOME]");
    let path = format!("{}:{SYSTEM_PATH}", places.get("[BIN]").display());
    let spawned = Command::new("/bin/sh")
        .arg("-c")
        .arg(places.substitute(command))
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("TMPDIR", places.get("[TMPDIR]"))
        .env("LANG", "C.UTF-8")
        .current_dir(places.get("[WORKSPACE]"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            return Ran {
                lines: Vec::new(),
                status: Err(format!("/bin/sh did not start: {e}")),
            };
        }
    };
    let (tx, rx) = mpsc::channel();
    for (stream, pipe) in [
        (
            0,
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
        (
            1,
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            let _ = tx.send((stream, bytes));
        });
    }
    let group = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    // Until it is reaped the shell's pid, its group's id, cannot be anyone else's.
    let kill_group = || {
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    };
    let mut timed_out = !crate::support::wait_gone(child.id(), LIMIT);
    if timed_out {
        kill_group();
    }
    let mut streams = [Vec::new(), Vec::new()];
    for _ in 0..2 {
        // A process the command left behind may still hold a pipe open.
        let got = rx.recv_timeout(LIMIT).or_else(|_| {
            timed_out = true;
            kill_group();
            rx.recv()
        });
        if let Ok((stream, bytes)) = got {
            streams[stream] = bytes;
        }
    }
    let status = match child.wait() {
        Err(e) => Err(format!("could not be waited for: {e}")),
        Ok(_) if timed_out => Err(format!("still running after {} s: killed", LIMIT.as_secs())),
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => Ok(code),
            (None, Some(signal)) => Err(format!("killed by signal {signal}")),
            (None, None) => Err(format!("{status}")),
        },
    };
    let text = String::from_utf8_lossy(&streams.concat()).into_owned();
    Ran {
        lines: places.normalise(&text).lines().map(str::to_owned).collect(),
        status,
    }
}

/// Runs every command of a `console` block in fresh directories, stopping at the first that
/// does not print or end as the transcript says; the report names the file, the line and the
/// command, with a diff.
pub fn check(block: &Block, places: &Places) -> Result<usize, String> {
    let steps = transcript::steps(block)?;
    for step in &steps {
        let ran = run(&step.command, places);
        report(block, step, &ran)?;
    }
    Ok(steps.len())
}

/// `Ok` when `ran` is what `step` expects, else the report.
pub fn report(block: &Block, step: &Step, ran: &Ran) -> Result<(), String> {
    let diff = transcript::mismatch(&step.expected, &ran.lines);
    let status_differs = ran.status != Ok(step.status);
    if diff.is_none() && !status_differs {
        return Ok(());
    }
    let mut out = format!(
        "{}:{}: `{}`\n",
        block.file,
        step.line,
        transcript::first_line(&step.command)
    );
    if let Some(diff) = diff {
        out.push_str("output (- expected, + printed; stdout, then stderr):\n");
        out.push_str(&diff);
    }
    if status_differs {
        let got = match &ran.status {
            Ok(code) => code.to_string(),
            Err(why) => why.clone(),
        };
        out.push_str(&format!(
            "exit status: expected {}, got {got}\n",
            step.status
        ));
    }
    Err(out)
}
