//! Telling, after the fact, whether the confinement denied something a command tried.
//!
//! Neither backend reports denials to the helper: the command just sees an error from the
//! kernel (`EROFS` under bwrap's read-only mounts, `EACCES` or `EPERM` from Landlock and seccomp)
//! and usually prints its text. So the classification reads the end of the command's stderr for
//! those texts, and only counts them when the command failed under a confining backend. It is
//! deliberately conservative: a false "denied" sends a caller off to widen a sandbox that was not
//! the problem, which is worse than missing a denial.

use confine_protocol::{Backend, ExitStatus};

/// What [`classify`] looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evidence<'a> {
    /// How the command ended; `None` when it did not run.
    pub exit: Option<ExitStatus>,
    /// The backend that confined it; `None` when it did not run.
    pub backend: Option<Backend>,
    /// A runner step failed (or the helper went away).
    pub runner_failed: bool,
    /// The helper refused the request.
    pub refused: bool,
    /// The end of the command's stderr (agentd keeps the last 8 KiB). Only stderr counts: stdout
    /// is the command's data, which may well quote such texts.
    pub stderr_tail: &'a [u8],
}

/// Whether the confinement denied something the command tried. True only when all hold:
/// - the command exited by itself with a non-zero code (not killed by a signal);
/// - no runner step failed and the request was not refused (a runner failure always outranks
///   a denial);
/// - the backend confines (bwrap, Landlock, Seatbelt; never `none`);
/// - a line of the stderr tail shows that backend's denial text ([`denial_texts`]) and is not a
///   known look-alike ([`NOT_SANDBOX_DENIALS`]).
pub fn classify(evidence: &Evidence<'_>) -> bool {
    if evidence.runner_failed || evidence.refused {
        return false;
    }
    let Some(ExitStatus::Code(code)) = evidence.exit else {
        return false;
    };
    if code == 0 {
        return false;
    }
    let Some(backend) = evidence.backend else {
        return false;
    };
    evidence
        .stderr_tail
        .split(|&b| b == b'\n')
        .any(|line| is_denial_line(backend, line))
}

/// The error texts through which `backend`'s denials reach a command, as `strerror` words them
/// (so matched case-sensitively). Empty for [`Backend::None`].
pub fn denial_texts(backend: Backend) -> &'static [&'static str] {
    match backend {
        // Writes to read-only binds fail with EROFS; seccomp and missing devices with EPERM/EACCES.
        Backend::Bwrap => &[
            "Read-only file system",
            "Permission denied",
            "Operation not permitted",
        ],
        // Landlock denies with EACCES; its seccomp filter with EPERM.
        Backend::Landlock => &["Permission denied", "Operation not permitted"],
        // The sandbox profile denies with EPERM.
        Backend::Seatbelt => &["Operation not permitted"],
        Backend::None => &[],
    }
}

/// Lines containing one of these are not sandbox denials even though they contain a denial
/// text: they are a remote end refusing, not the local kernel. Each entry is as specific as it
/// can be, so that a real denial on the same kind of line (say Rust's
/// "Permission denied (os error 13)") still counts.
pub const NOT_SANDBOX_DENIALS: &[&str] = &[
    // ssh: the server rejected every authentication method ("Permission denied (publickey).",
    // "Permission denied (publickey,password).", …); one entry per method ssh can list first.
    "Permission denied (publickey",
    "Permission denied (password",
    "Permission denied (keyboard-interactive",
    "Permission denied (hostbased",
    "Permission denied (gssapi",
    // ssh: a wrong password at the prompt.
    "Permission denied, please try again",
];

/// Whether one line of stderr shows a denial by `backend`.
pub fn is_denial_line(backend: Backend, line: &[u8]) -> bool {
    denial_texts(backend)
        .iter()
        .any(|text| contains(line, text.as_bytes()))
        && !NOT_SANDBOX_DENIALS
            .iter()
            .any(|text| contains(line, text.as_bytes()))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed_with(backend: Backend, code: i32, stderr: &str) -> bool {
        classify(&Evidence {
            exit: Some(ExitStatus::Code(code)),
            backend: Some(backend),
            runner_failed: false,
            refused: false,
            stderr_tail: stderr.as_bytes(),
        })
    }

    #[test]
    fn dash_writing_to_a_read_only_bind_under_bwrap_is_a_denial() {
        assert!(failed_with(
            Backend::Bwrap,
            2,
            "sh: 1: cannot create /root/c: Read-only file system\n"
        ));
    }

    #[test]
    fn python_denied_by_landlock_is_a_denial() {
        let stderr = "Traceback (most recent call last):\n  File \"<string>\", line 1, in \
                      <module>\nPermissionError: [Errno 13] Permission denied: '/root/c'\n";
        assert!(failed_with(Backend::Landlock, 1, stderr));
    }

    #[test]
    fn a_denial_among_other_lines_and_without_a_final_newline_counts() {
        let stderr = "warning: something\nmkdir: cannot create directory '/x': Permission denied";
        assert!(failed_with(Backend::Landlock, 1, stderr));
    }

    #[test]
    fn rust_io_errors_count() {
        assert!(failed_with(
            Backend::Bwrap,
            101,
            "error: failed to open `/root/x`: Permission denied (os error 13)\n"
        ));
    }

    #[test]
    fn success_is_never_a_denial() {
        assert!(!failed_with(
            Backend::Bwrap,
            0,
            "sh: 1: cannot create /root/c: Read-only file system\n"
        ));
    }

    #[test]
    fn death_by_signal_is_not_a_denial() {
        let evidence = Evidence {
            exit: Some(ExitStatus::Signal(9)),
            backend: Some(Backend::Bwrap),
            runner_failed: false,
            refused: false,
            stderr_tail: b"sh: 1: cannot create /root/c: Read-only file system\n",
        };
        assert!(!classify(&evidence));
    }

    #[test]
    fn danger_full_access_is_never_a_denial() {
        assert!(!failed_with(
            Backend::None,
            1,
            "cat: /etc/shadow: Permission denied\nOperation not permitted\nRead-only file system\n"
        ));
    }

    #[test]
    fn a_runner_failure_outranks_a_denial() {
        let evidence = Evidence {
            exit: Some(ExitStatus::Code(1)),
            backend: Some(Backend::Bwrap),
            runner_failed: true,
            refused: false,
            stderr_tail: b"bwrap: Operation not permitted\n",
        };
        assert!(!classify(&evidence));
        let nothing_ran = Evidence {
            exit: None,
            backend: None,
            ..evidence
        };
        assert!(!classify(&nothing_ran));
    }

    #[test]
    fn a_refusal_is_not_a_denial() {
        let evidence = Evidence {
            exit: None,
            backend: None,
            runner_failed: false,
            refused: true,
            stderr_tail: b"Permission denied\n",
        };
        assert!(!classify(&evidence));
    }

    #[test]
    fn ssh_authentication_failures_are_not_denials() {
        for line in [
            "git@github.com: Permission denied (publickey).\nfatal: Could not read from remote \
             repository.\n",
            "u@h: Permission denied (publickey,password).\n",
            "u@h: Permission denied (password).\n",
            "Permission denied, please try again.\n",
        ] {
            assert!(!failed_with(Backend::Bwrap, 255, line), "{line}");
            assert!(!failed_with(Backend::Landlock, 128, line), "{line}");
        }
    }

    #[test]
    fn an_ssh_line_does_not_hide_a_real_denial_on_another_line() {
        let stderr = "u@h: Permission denied (publickey).\n\
                      sh: 1: cannot create /root/c: Read-only file system\n";
        assert!(failed_with(Backend::Bwrap, 2, stderr));
    }

    #[test]
    fn a_programs_own_lowercase_wording_is_not_a_denial() {
        assert!(!failed_with(
            Backend::Bwrap,
            1,
            "error: permission denied: you are not a maintainer of this project\n"
        ));
        assert!(!failed_with(
            Backend::Landlock,
            1,
            "operation not permitted by policy\n"
        ));
    }

    #[test]
    fn a_denial_text_on_stdout_only_is_not_a_denial() {
        // The caller passes only stderr; stdout's "Permission denied" never reaches here.
        assert!(!failed_with(Backend::Bwrap, 1, "make: *** [all] Error 1\n"));
    }

    #[test]
    fn each_backend_counts_only_its_own_texts() {
        let erofs = "touch: cannot touch 'x': Read-only file system\n";
        assert!(failed_with(Backend::Bwrap, 1, erofs));
        assert!(!failed_with(Backend::Landlock, 1, erofs));
        assert!(!failed_with(Backend::Seatbelt, 1, erofs));
        let eacces = "touch: cannot touch 'x': Permission denied\n";
        assert!(!failed_with(Backend::Seatbelt, 1, eacces));
        let eperm = "touch: cannot touch 'x': Operation not permitted\n";
        assert!(failed_with(Backend::Seatbelt, 1, eperm));
        assert!(failed_with(Backend::Landlock, 1, eperm));
        assert!(failed_with(Backend::Bwrap, 1, eperm));
    }

    #[test]
    fn an_empty_stderr_is_not_a_denial() {
        assert!(!failed_with(Backend::Bwrap, 1, ""));
    }

    #[test]
    fn non_utf8_stderr_is_searched_as_bytes() {
        let mut stderr = vec![0xff, 0xfe, b' '];
        stderr.extend_from_slice(b"cannot open: Permission denied\n");
        let evidence = Evidence {
            exit: Some(ExitStatus::Code(1)),
            backend: Some(Backend::Landlock),
            runner_failed: false,
            refused: false,
            stderr_tail: &stderr,
        };
        assert!(classify(&evidence));
    }
}
