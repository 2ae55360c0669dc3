//! `confine-helper enter`: the second layer inside a bwrap sandbox.
//!
//! Mount permissions do not cover everything: the kernel skips the read-only mount check for
//! FIFOs, sockets and devices, so `--ro-bind / /` alone lets a command write into any FIFO the
//! user can reach. So under bwrap the command is not bwrap's program: this binary is, executed
//! from the descriptor the helper holds of itself (`/proc/self/fd/N`, so no name inside the
//! sandbox decides which program runs), after bwrap has built the namespaces, the mounts and the
//! seccomp filter. It applies the Landlock ruleset the helper built before forking (from the
//! same descriptors the mounts were made from), marks every descriptor but stdio close-on-exec,
//! and executes the command. It decides nothing: the ruleset is complete when it arrives.
//!
//! It runs with the command's environment (bwrap set it) and reads only `PATH` from it, as
//! `execvp` does. It reports to the helper on the report pipe, in records of one kind byte and a
//! native-endian errno: a failed layer (and the command does not run), or "ready" just before
//! `execve` and then, if that fails, the exec failure. The pipe closes on `execve`, so once the
//! command runs it holds no descriptor to forge a report with; and a pipe with no record at all
//! means bwrap never got as far as running `enter`, so the sandbox was never built.

use std::ffi::{CString, OsString};
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use crate::sys;

/// The report's kind byte: applying the ruleset failed; the command did not run.
pub(crate) const REPORT_LANDLOCK: u8 = b'L';
/// The report's kind byte: the layer is applied and the command is about to be executed.
pub(crate) const REPORT_READY: u8 = b'R';
/// The report's kind byte: `execve` of the command failed.
pub(crate) const REPORT_EXEC: u8 = b'E';
/// The report's kind byte: the proxy bridge could not be started; the command did not run.
pub(crate) const REPORT_BRIDGE: u8 = b'B';
/// Bytes of one report record: the kind and an errno.
pub(crate) const REPORT_SIZE: usize = 5;
/// Bytes `enter` writes at most: "ready", then an exec failure.
pub(crate) const REPORT_MAX: usize = 2 * REPORT_SIZE;

/// What `enter` reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entered {
    /// Nothing: bwrap ended before it ran `enter`, so the sandbox was never built.
    Never,
    /// The Landlock layer could not be applied (or the report is not one `enter` writes); the
    /// command did not run.
    LayerFailed(i32),
    /// The layer is applied and the command was executed.
    Ran,
    /// The layer is applied, and `execve` of the command failed with this errno.
    ExecFailed(i32),
    /// The proxy bridge could not be started (this errno); the command did not run.
    BridgeFailed(i32),
}

/// What `enter` was asked to do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Enter {
    pub(crate) ruleset: RawFd,
    pub(crate) report: RawFd,
    /// The proxy bridge's socket ([`crate::bridge`]), when the sandbox has one.
    pub(crate) bridge: Option<RawFd>,
    /// The process cap, set as `RLIMIT_NPROC` in bwrap's user namespace (a helper that is not
    /// root; `confine::caps`).
    pub(crate) max_processes: Option<u64>,
    pub(crate) argv: Vec<OsString>,
}

/// The descriptors `enter` is given, numbered as the command sees them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fds {
    /// This binary.
    pub(crate) exe: RawFd,
    pub(crate) ruleset: RawFd,
    pub(crate) report: RawFd,
    pub(crate) bridge: Option<RawFd>,
}

/// The argument vector that makes bwrap run `argv` through `enter`, capped at `max_processes`
/// tasks when given.
pub(crate) fn argv(fds: &Fds, max_processes: Option<u64>, argv: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = vec![
        format!("/proc/self/fd/{}", fds.exe).into_bytes(),
        b"enter".to_vec(),
        b"--ruleset".to_vec(),
        fds.ruleset.to_string().into_bytes(),
        b"--report".to_vec(),
        fds.report.to_string().into_bytes(),
    ];
    if let Some(bridge) = fds.bridge {
        out.extend([b"--bridge".to_vec(), bridge.to_string().into_bytes()]);
    }
    if let Some(n) = max_processes {
        out.extend([b"--max-processes".to_vec(), n.to_string().into_bytes()]);
    }
    out.push(b"--".to_vec());
    out.extend(argv.iter().cloned());
    out
}

/// Why the arguments after `enter` are not what the helper passes; printed before exit 126.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ArgsError {
    /// The value of this flag is not a descriptor number above stdio.
    #[error("{0} needs a descriptor number above 2")]
    Descriptor(&'static str),
    #[error("--max-processes needs a count of at least 1")]
    Count,
    #[error(
        "enter takes --ruleset FD --report FD [--bridge FD] [--max-processes N] -- PROGRAM \
         [ARGS...]"
    )]
    Shape,
}

/// Parses the arguments after `enter`.
pub(crate) fn parse(args: &[OsString]) -> Result<Enter, ArgsError> {
    let number = |flag: &'static str, value: &OsString| -> Result<RawFd, ArgsError> {
        value
            .to_str()
            .and_then(|v| v.parse::<RawFd>().ok())
            .filter(|fd| *fd > 2)
            .ok_or(ArgsError::Descriptor(flag))
    };
    let [r, ruleset, p, report, rest @ ..] = args else {
        return Err(ArgsError::Shape);
    };
    if r != "--ruleset" || p != "--report" {
        return Err(ArgsError::Shape);
    }
    let mut enter = Enter {
        ruleset: number("--ruleset", ruleset)?,
        report: number("--report", report)?,
        bridge: None,
        max_processes: None,
        argv: Vec::new(),
    };
    let mut rest = rest;
    // The optional flags, each at most once and in this order.
    if let [flag, value, after @ ..] = rest
        && flag == "--bridge"
    {
        enter.bridge = Some(number("--bridge", value)?);
        rest = after;
    }
    if let [flag, value, after @ ..] = rest
        && flag == "--max-processes"
    {
        let count = value.to_str().and_then(|v| v.parse::<u64>().ok());
        enter.max_processes = Some(count.filter(|n| *n > 0).ok_or(ArgsError::Count)?);
        rest = after;
    }
    match rest {
        [dashes, argv @ ..] if dashes == "--" && !argv.is_empty() => {
            enter.argv = argv.to_vec();
            Ok(enter)
        }
        _ => Err(ArgsError::Shape),
    }
}

/// Applies the ruleset and executes the command; returns only if that failed.
pub(crate) fn main(enter: &Enter) -> ExitCode {
    let report = |kind: u8, errno: i32| {
        let mut record = [0u8; REPORT_SIZE];
        record[0] = kind;
        record[1..].copy_from_slice(&errno.to_ne_bytes());
        sys::write_raw(enter.report, &record)
    };
    if let Err(e) = sys::enter_landlock(enter.ruleset, enter.max_processes) {
        let errno = e.raw_os_error().unwrap_or(0);
        // Nothing runs whether or not the record gets through.
        let _ = report(REPORT_LANDLOCK, errno);
        eprintln!("confine-helper: the Landlock layer could not be applied ({e}); nothing was run");
        return ExitCode::from(126);
    }
    // The bridge runs under the layer too, in its own process outside the command's tree.
    if let Some(control) = enter.bridge
        && let Err(e) = crate::bridge::start(control)
    {
        let errno = e.raw_os_error().unwrap_or(0);
        let _ = report(REPORT_BRIDGE, errno);
        eprintln!("confine-helper: the proxy bridge could not be started ({e}); nothing was run");
        return ExitCode::from(126);
    }
    // Without "ready" on the pipe the helper would report that the sandbox was never built, so
    // a command that cannot be announced is not run.
    if let Err(e) = report(REPORT_READY, 0) {
        eprintln!("confine-helper: cannot report to the helper ({e}); nothing was run");
        return ExitCode::from(126);
    }
    let argv: Vec<CString> = enter
        .argv
        .iter()
        .map(|a| CString::new(a.as_bytes()).unwrap_or_default())
        .collect();
    // `parse` takes no empty command; without one there is nothing to find, as execvp says.
    let errno = match argv.first() {
        Some(program) => match nix::unistd::execvp(program, &argv) {
            Err(e) => e as i32,
            Ok(never) => match never {},
        },
        None => nix::Error::ENOENT as i32,
    };
    // The exit status below says the same if the record does not get through.
    let _ = report(REPORT_EXEC, errno);
    eprintln!(
        "confine-helper: cannot run {}: {}",
        enter
            .argv
            .first()
            .map(|a| a.to_string_lossy())
            .unwrap_or_default(),
        nix::Error::from_raw(errno).desc()
    );
    // The helper reports the exec failure from the record above; the status is the shell's
    // convention for the rare reader of bwrap's own exit.
    let code = crate::record::exec_failure_code(errno);
    ExitCode::from(u8::try_from(code).unwrap_or(126))
}

/// Decodes what `enter` reported: at most [`REPORT_MAX`] bytes read from the pipe once bwrap
/// has ended. Anything that is not a sequence `enter` writes is a failed layer: the helper then
/// says the command did not run, which is the safe reading.
pub(crate) fn decode_report(bytes: &[u8]) -> Entered {
    let record = |at: usize| -> Option<(u8, i32)> {
        let r: &[u8; REPORT_SIZE] = bytes.get(at..at + REPORT_SIZE)?.try_into().ok()?;
        Some((r[0], i32::from_ne_bytes([r[1], r[2], r[3], r[4]])))
    };
    match (bytes.len(), record(0), record(REPORT_SIZE)) {
        (0, _, _) => Entered::Never,
        (REPORT_SIZE, Some((REPORT_LANDLOCK, errno)), _) => Entered::LayerFailed(errno),
        (REPORT_SIZE, Some((REPORT_BRIDGE, errno)), _) => Entered::BridgeFailed(errno),
        (REPORT_SIZE, Some((REPORT_READY, 0)), _) => Entered::Ran,
        (REPORT_MAX, Some((REPORT_READY, 0)), Some((REPORT_EXEC, errno))) => {
            Entered::ExecFailed(errno)
        }
        _ => Entered::LayerFailed(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_argv_bwrap_runs_parses_back() {
        let fds = Fds {
            exe: 7,
            ruleset: 8,
            report: 9,
            bridge: None,
        };
        let built = argv(
            &fds,
            None,
            &[b"sh".to_vec(), b"-c".to_vec(), b"--".to_vec()],
        );
        let text: Vec<OsString> = built
            .iter()
            .map(|a| OsString::from(String::from_utf8_lossy(a).into_owned()))
            .collect();
        assert_eq!(text[0], "/proc/self/fd/7");
        assert_eq!(text[1], "enter");
        assert_eq!(
            parse(&text[2..]),
            Ok(Enter {
                ruleset: 8,
                report: 9,
                bridge: None,
                max_processes: None,
                argv: os(&["sh", "-c", "--"]),
            })
        );
        let with_bridge = argv(
            &Fds {
                bridge: Some(10),
                ..fds
            },
            Some(2048),
            &[b"true".to_vec()],
        );
        let text: Vec<OsString> = with_bridge
            .iter()
            .map(|a| OsString::from(String::from_utf8_lossy(a).into_owned()))
            .collect();
        assert_eq!(
            parse(&text[2..]),
            Ok(Enter {
                ruleset: 8,
                report: 9,
                bridge: Some(10),
                max_processes: Some(2048),
                argv: os(&["true"]),
            })
        );
    }

    #[test]
    fn bad_arguments_are_refused() {
        let shape = Err(ArgsError::Shape);
        assert_eq!(
            parse(&os(&["--ruleset", "8", "--report", "9", "--"])),
            shape
        );
        let low = parse(&os(&["--ruleset", "1", "--report", "9", "--", "x"]));
        assert_eq!(low, Err(ArgsError::Descriptor("--ruleset")));
        assert_eq!(
            low.map_err(|e| e.to_string()),
            Err("--ruleset needs a descriptor number above 2".to_owned())
        );
        assert_eq!(
            parse(&os(&["--report", "9", "--ruleset", "8", "--", "x"])),
            shape
        );
        assert!(parse(&os(&["--ruleset", "x", "--report", "9", "--", "x"])).is_err());
        let bridge = parse(&os(&[
            "--ruleset",
            "8",
            "--report",
            "9",
            "--bridge",
            "2",
            "--",
            "x",
        ]));
        assert_eq!(bridge, Err(ArgsError::Descriptor("--bridge")));
        for count in ["0", "-1", "x"] {
            let capped = parse(&os(&[
                "--ruleset",
                "8",
                "--report",
                "9",
                "--max-processes",
                count,
                "--",
                "x",
            ]));
            assert_eq!(capped, Err(ArgsError::Count), "{count}");
        }
        // Out of order, the flags are the program's.
        let swapped = parse(&os(&[
            "--ruleset",
            "8",
            "--report",
            "9",
            "--max-processes",
            "5",
            "--bridge",
            "10",
            "--",
            "x",
        ]));
        assert_eq!(swapped, shape);
    }

    #[test]
    fn reports_decode() {
        let record = |kind: u8, errno: i32| {
            let mut r = vec![kind];
            r.extend_from_slice(&errno.to_ne_bytes());
            r
        };
        let ready = record(REPORT_READY, 0);
        assert_eq!(decode_report(&[]), Entered::Never);
        assert_eq!(
            decode_report(&record(REPORT_BRIDGE, 98)),
            Entered::BridgeFailed(98)
        );
        assert_eq!(decode_report(&ready), Entered::Ran);
        let exec = [ready.clone(), record(REPORT_EXEC, 2)].concat();
        assert_eq!(decode_report(&exec), Entered::ExecFailed(2));
        assert_eq!(
            decode_report(&record(REPORT_LANDLOCK, 1)),
            Entered::LayerFailed(1)
        );
        // What `enter` never writes reads as a failed layer: not run.
        for bad in [
            record(b'?', 0),
            record(REPORT_EXEC, 2),
            record(REPORT_READY, 5),
            ready[..3].to_vec(),
            [ready.clone(), ready.clone()].concat(),
            [record(REPORT_LANDLOCK, 1), record(REPORT_EXEC, 2)].concat(),
            [exec.clone(), vec![0]].concat(),
        ] {
            assert_eq!(decode_report(&bad), Entered::LayerFailed(0), "{bad:?}");
        }
    }
}
