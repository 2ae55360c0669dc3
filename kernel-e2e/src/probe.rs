//! The probe: a Python script that makes precise attempts and reports what the kernel answered.
//!
//! Shell tools hide errno behind their own messages and fall back silently (`mv` copies when a
//! rename fails), so cases that need to know exactly which call failed, and why, use the probe.
//! Each step is labelled by the case, so its outcome can be looked up by what it means.

use std::ffi::OsString;
use std::path::Path;

/// The probe's source, written next to the workspaces when the suite starts.
pub const SOURCE: &str = include_str!("../probe/probe.py");

/// errnos by which the sandbox says no.
pub const DENIAL_ERRNOS: [&str; 3] = ["EACCES", "EPERM", "EROFS"];

/// Builds a probe command line: `python3 -I -B probe.py OP ARGS [+ OP ARGS]...`.
#[derive(Debug, Clone)]
pub struct Probe {
    argv: Vec<OsString>,
    steps: usize,
}

impl Probe {
    /// A probe run by `python` (isolated from the environment, writing no bytecode).
    pub fn new(python: &Path, script: &Path) -> Probe {
        Probe {
            argv: vec![python.into(), "-I".into(), "-B".into(), script.into()],
            steps: 0,
        }
    }

    /// Adds one step. `label` names its outcome (`op#label` on the probe's command line).
    pub fn step<I, S>(mut self, label: &str, op: &str, args: I) -> Probe
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        if self.steps > 0 {
            self.argv.push("+".into());
        }
        self.steps += 1;
        self.argv.push(format!("{op}#{label}").into());
        self.argv.extend(args.into_iter().map(Into::into));
        self
    }

    /// Adds a step whose outcome lines carry their own names (`mount-api`, `tiocsti`, ...).
    pub fn op<I, S>(self, op: &str, args: I) -> Probe
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.step(op, op, args)
    }

    pub fn argv(&self) -> Vec<OsString> {
        self.argv.clone()
    }
}

/// What one step reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Err {
        errno: String,
        message: String,
    },
    /// The step cannot be attempted here; the case is skipped, not failed.
    Unsupported(String),
}

impl Outcome {
    /// Whether the step failed with one of the sandbox's denial errnos.
    pub fn is_denial(&self) -> bool {
        matches!(self, Outcome::Err { errno, .. } if DENIAL_ERRNOS.contains(&errno.as_str()))
    }

    pub fn errno(&self) -> Option<&str> {
        match self {
            Outcome::Err { errno, .. } => Some(errno),
            _ => None,
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Ok => f.write_str("succeeded"),
            Outcome::Err { errno, message } => write!(f, "failed with {errno} ({message})"),
            Outcome::Unsupported(why) => write!(f, "could not be attempted: {why}"),
        }
    }
}

/// Everything a probe printed: step outcomes by label, and `data` lines.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub steps: Vec<(String, Outcome)>,
    pub data: Vec<(String, String)>,
}

impl Report {
    /// Reads the probe's stdout; lines that are not the probe's (the command's own) are ignored.
    pub fn parse(stdout: &str) -> Report {
        let mut report = Report::default();
        for line in stdout.lines() {
            if let Some(rest) = line.strip_prefix("step ") {
                let mut words = rest.splitn(3, ' ');
                let (Some(op), Some(result)) = (words.next(), words.next()) else {
                    continue;
                };
                let label = op.split_once('#').map_or(op, |(_, label)| label).to_owned();
                let rest = words.next().unwrap_or("");
                let outcome = match result {
                    "ok" => Outcome::Ok,
                    "unsupported" => Outcome::Unsupported(rest.to_owned()),
                    _ => {
                        let (errno, message) = rest.split_once(' ').unwrap_or((rest, ""));
                        Outcome::Err {
                            errno: errno.to_owned(),
                            message: message.to_owned(),
                        }
                    }
                };
                report.steps.push((label, outcome));
            } else if let Some(rest) = line.strip_prefix("data ") {
                let (key, value) = rest.split_once(' ').unwrap_or((rest, ""));
                report.data.push((key.to_owned(), value.to_owned()));
            }
        }
        report
    }

    /// The outcome of the step labelled `label`, if it reported (its last report: a step that
    /// says `ok` and then execs may still report the exec's failure).
    pub fn step(&self, label: &str) -> Option<&Outcome> {
        self.steps
            .iter()
            .rfind(|(l, _)| l == label)
            .map(|(_, outcome)| outcome)
    }

    /// The first `data KEY VALUE` line for `key`.
    pub fn data(&self, key: &str) -> Option<&str> {
        self.data
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every `data KEY VALUE` value for `key`, in order.
    pub fn all_data<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.data
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_found_by_label() {
        let report = Report::parse(
            "hello\nstep write#home ok\nstep create#tmp err EROFS Read-only file system\n\
             data fds 0 1 2\nstep mount err EPERM Operation not permitted\n",
        );
        assert_eq!(report.step("home"), Some(&Outcome::Ok));
        assert!(report.step("tmp").is_some_and(Outcome::is_denial));
        assert_eq!(report.step("mount").and_then(Outcome::errno), Some("EPERM"));
        assert_eq!(report.data("fds"), Some("0 1 2"));
        assert_eq!(report.step("absent"), None);
    }

    #[test]
    fn steps_are_joined_with_plus() {
        let probe = Probe::new(Path::new("/usr/bin/python3"), Path::new("/p.py"))
            .step("a", "write", ["/x"])
            .op("socketpair", Vec::<String>::new());
        let argv: Vec<String> = probe
            .argv()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            argv,
            [
                "/usr/bin/python3",
                "-I",
                "-B",
                "/p.py",
                "write#a",
                "/x",
                "+",
                "socketpair#socketpair"
            ]
        );
    }
}
