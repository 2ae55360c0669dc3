//! What the confined command does for each path of the corpus, and how its answers are read.
//!
//! One `/bin/sh -c` script per run asks every path in turn and prints one line for it:
//!
//! ```text
//! LABEL t=d r=1 w=0 x=10
//! ```
//!
//! - `t`: what the path is, as the command sees it: `d` a directory, `f` a regular file, `c` a
//!   character device, `o` something else, `-` nothing.
//! - `r`, `w`: `test -r` and `test -w`, which only ask access(2): a mount's read-only flag
//!   answers there, Landlock does not.
//! - `x`: two real attempts. First a read (`ls -A` of a directory, the first byte of a file):
//!   `1` it read something, `e` it read nothing (an empty directory or file, as a mask is), `0`
//!   it was refused, `-` not tried. Then a write: appending a line to a file, or making and
//!   removing a directory `.probe-TAG-PID` in a directory: `1` done, `0` refused, `k` made but
//!   not removed, `-` not tried (the path is not one the test may write to).
//!
//! Lines starting with `#` say what the command saw (its `TMPDIR`, its working directory) and
//! are not compared: where each backend puts the temp directory is its own business.

use std::ffi::OsString;

/// The script: `sh -c SCRIPT sh TAG [LABEL PATH HOW]...`. `PATH` is absolute, or one of
/// `$TMPDIR`, `$TMPDIR/..`, `$HOME`, `$PWD`, expanded inside the sandbox. `HOW` is what write
/// may be tried: `w` (append to a file, a new entry in a directory), `o` (open a file for
/// appending, writing nothing: for `/dev/null`), `-` (none).
pub const SCRIPT: &str = r#"tag=$1; shift
printf '# TMPDIR=%s PWD=%s HOME=%s\n' "${TMPDIR-(unset)}" "$PWD" "${HOME-(unset)}"
while [ $# -ge 3 ]; do
  label=$1 p=$2 how=$3; shift 3
  case $p in
    '$TMPDIR') p=${TMPDIR-} ;;
    '$TMPDIR/..') p=${TMPDIR:+$TMPDIR/..} ;;
    '$HOME') p=${HOME-} ;;
    '$PWD') p=$PWD ;;
  esac
  if [ -d "$p" ]; then t=d; elif [ -f "$p" ]; then t=f; elif [ -c "$p" ]; then t=c
  elif [ -e "$p" ]; then t=o; else t=-; fi
  r=0; [ -r "$p" ] && r=1
  w=0; [ -w "$p" ] && w=1
  case $t in
    d) out=$(ls -A -- "$p" 2>/dev/null; echo ":$?") ;;
    f|c) out=$(head -c 1 -- "$p" 2>/dev/null; echo ":$?") ;;
    *) out=- ;;
  esac
  case $t:${out##*:} in
    [dfc]:0) if [ -n "${out%:*}" ]; then xr=1; else xr=e; fi ;;
    [dfc]:*) xr=0 ;;
    *) xr=- ;;
  esac
  xw=-
  case $how$t in
    wf) if (printf 'probe %s\n' "$tag" >> "$p") 2>/dev/null; then xw=1; else xw=0; fi ;;
    of|oc) if (: >> "$p") 2>/dev/null; then xw=1; else xw=0; fi ;;
    wd) e="$p/.probe-$tag-$$"
        if mkdir -- "$e" 2>/dev/null; then
          if rmdir -- "$e" 2>/dev/null; then xw=1; else xw=k; fi
        else xw=0; fi ;;
  esac
  echo "$label t=$t r=$r w=$w x=$xr$xw"
done
exit 0
"#;

/// Which write the script may try on a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Append a line to a file, or make and remove an entry in a directory: for the test's own
    /// files and directories, and for the places a stray entry is looked for afterwards.
    Real,
    /// Open the file for appending and write nothing: `/dev/null`.
    Open,
    /// No write: a path of the host's that the test must never change.
    Never,
}

impl Write {
    fn code(self) -> &'static str {
        match self {
            Write::Real => "w",
            Write::Open => "o",
            Write::Never => "-",
        }
    }
}

/// One path of the corpus: how the report names it, where it is, and what may be tried on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The path relative to the policy's directory, or as the command names it (`/etc/passwd`,
    /// `$TMPDIR`).
    pub label: String,
    /// An absolute path, or a variable the script expands (see [`SCRIPT`]).
    pub target: OsString,
    pub write: Write,
}

/// `/bin/sh -c SCRIPT sh TAG LABEL PATH HOW...`: the command of one run.
pub fn argv(tag: &str, probes: &[Probe]) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec![
        "/bin/sh".into(),
        "-c".into(),
        SCRIPT.into(),
        "sh".into(),
        tag.into(),
    ];
    for probe in probes {
        argv.push(probe.label.clone().into());
        argv.push(probe.target.clone());
        argv.push(probe.write.code().into());
    }
    argv
}

/// The answer line of each label in the command's output (`t=… r=… w=… x=…`), in the order
/// printed; lines starting with `#` are left out.
pub fn answers(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.rsplit_once(" t="))
        .map(|(label, rest)| (label.to_owned(), format!("t={rest}")))
        .collect()
}

/// The lines of the output that say what the command saw (`# TMPDIR=…`), without the `# `.
pub fn seen(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix("# "))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_by_label_even_with_spaces() {
        let out = "# TMPDIR=/tmp PWD=/w\nws/a b t=d r=1 w=0 x=10\n/dev/null t=c r=1 w=1 x=e1\n";
        assert_eq!(
            answers(out),
            vec![
                ("ws/a b".to_owned(), "t=d r=1 w=0 x=10".to_owned()),
                ("/dev/null".to_owned(), "t=c r=1 w=1 x=e1".to_owned()),
            ]
        );
        assert_eq!(seen(out), vec!["TMPDIR=/tmp PWD=/w".to_owned()]);
    }
}
