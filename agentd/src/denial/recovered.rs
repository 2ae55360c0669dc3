//! Tools' own reports that they worked around an access the sandbox denied them.
//!
//! Some tools meet a directory they cannot write and carry on without it: pip, finding its cache
//! directory not writable, disables its cache and installs anyway. The command then succeeds and
//! prints none of the backend's error texts, so the dialect never sees it, yet the sandbox did
//! deny a write the user may well want to allow (a cache preset). Such a report is a tool's exact
//! sentence naming the path, so it is judged whatever the exit code; the path then has to pass
//! the same checks as any file write (outside the writable roots, writable by the user without
//! the sandbox).
//!
//! A tool reports only what it noticed, and it notices by its own checks:
//! - pip asks `access(2)` for `W_OK` on the cache directory's nearest existing ancestor. bwrap's
//!   read-only mounts answer `EROFS` there, so pip warns; Landlock does not govern `access(2)`,
//!   so under Landlock pip goes on, its cache writes fail and it says nothing. As root pip only
//!   checks that root owns the directory, prints nothing, and its cache writes fail silently:
//!   nothing can be reported there either.

/// One tool's report, as it prints it: `<before>PATH<after>…`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// What the tool did instead of the denied access, as a note names it.
    pub instead: &'static str,
    /// The text just before the path.
    pub before: &'static str,
    /// The text just after the path; with `before`, what makes the line this report.
    pub after: &'static str,
    /// Whether the report can be the sandbox's doing when the user is root. pip, as root, checks
    /// the directory's owner instead of `access(2)`, which no sandbox changes.
    pub for_root: bool,
}

/// Every known report. Each is one tool's exact wording; a new one needs its tool's source and a
/// run that shows it.
pub const REPORTS: &[Report] = &[
    // pip's `check_path_owner` failing for the cache directory (`pip/_internal/cli/req_command`,
    // `base_command`), printed as "WARNING: The directory '/home/u/.cache/pip' or its parent
    // directory is not owned or is not writable by the current user. The cache has been
    // disabled. …".
    Report {
        instead: "pip disabled its cache",
        before: "The directory '",
        after: "' or its parent directory is not owned or is not writable by the current user",
        for_root: false,
    },
];

/// The report `line` is, and the path it names; `None` when it is none of [`REPORTS`] or names
/// no path.
pub fn find(line: &str) -> Option<(&'static Report, &str)> {
    REPORTS.iter().find_map(|report| {
        let start = line.find(report.before)? + report.before.len();
        let rest = &line[start..];
        let path = &rest[..rest.find(report.after)?];
        (!path.is_empty()).then_some((report, path))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PIP: &str = "WARNING: The directory '/home/u/.cache/pip' or its parent directory is \
                       not owned or is not writable by the current user. The cache has been \
                       disabled. Check the permissions and owner of that directory. If executing \
                       pip with sudo, you should use sudo's -H flag.";

    #[test]
    fn pips_warning_names_its_cache_directory() {
        let (report, path) = find(PIP).expect("pip's report");
        assert_eq!(report.instead, "pip disabled its cache");
        assert_eq!(path, "/home/u/.cache/pip");
    }

    #[test]
    fn a_path_with_quotes_in_it_is_named_whole() {
        let line = PIP.replace("/home/u/.cache/pip", "/home/u/it's here");
        assert_eq!(find(&line).map(|(_, path)| path), Some("/home/u/it's here"));
    }

    #[test]
    fn lines_that_are_not_a_whole_report_are_none() {
        for line in [
            "",
            "WARNING: The directory '/home/u/.cache/pip' is fine",
            "or its parent directory is not owned or is not writable by the current user",
            "WARNING: The directory '' or its parent directory is not owned or is not writable \
             by the current user.",
            "Permission denied: '/home/u/.cache/pip'",
        ] {
            assert_eq!(find(line), None, "{line}");
        }
    }
}
