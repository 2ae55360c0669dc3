//! The credential stores no confined command may read unless the profile says otherwise: a
//! built-in set of denied reads ([`BUILT_IN`]), from the home directory of the user agentd runs
//! as, sent with every request of read-only and workspace-write beside `sandbox.deny_read`
//! (RFC 0014). A command asked to "look around" reads what it finds; these are the files whose
//! content is a key, a token or a password and that no build or test needs.
//!
//! Each entry can be lifted by naming it exactly in `sandbox.lift_deny_read` ([`lift`]). A
//! path that does not exist denies nothing and is not sent ([`expand`]). The private keys of
//! `~/.ssh` are found at each request ([`Shape::PrivateKeys`]): every entry of the directory but
//! the few that ssh reads on the way to a host and that hold no secret ([`SSH_PUBLIC`], and
//! `*.pub`), so a key added later is denied by the next request without naming it.

use std::path::{Path, PathBuf};

/// What a built-in entry denies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// The path itself (a file, or a directory with everything in it).
    Path,
    /// Every entry of the directory but [`SSH_PUBLIC`] and `*.pub`, as found at each request.
    PrivateKeys,
}

/// One built-in denied read: the entry as `sandbox.lift_deny_read` names it, and why it is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltIn {
    /// `~/…`, as the user writes it to lift it; for [`Shape::PrivateKeys`] the directory
    /// followed by `/*`.
    pub entry: &'static str,
    pub shape: Shape,
    /// What it holds, in a few words.
    pub holds: &'static str,
}

const fn path(entry: &'static str, holds: &'static str) -> BuiltIn {
    BuiltIn {
        entry,
        shape: Shape::Path,
        holds,
    }
}

/// The entries of `~/.ssh` that stay readable: what ssh and git read to reach a host, none of it
/// a secret (besides `*.pub`).
pub const SSH_PUBLIC: [&str; 4] = [
    "known_hosts",
    "known_hosts.old",
    "config",
    "authorized_keys",
];

/// The suffix of a public key in `~/.ssh`, readable too.
pub const SSH_PUBLIC_SUFFIX: &str = ".pub";

/// The entries every platform has.
const COMMON: &[BuiltIn] = &[
    BuiltIn {
        entry: "~/.ssh/*",
        shape: Shape::PrivateKeys,
        holds: "SSH private keys",
    },
    path("~/.gnupg", "GnuPG private keys"),
    path("~/.aws/credentials", "AWS access keys"),
    path("~/.config/gcloud", "Google Cloud credentials"),
    path("~/.azure", "Azure credentials"),
    path("~/.kube/config", "Kubernetes cluster credentials"),
    path("~/.docker/config.json", "container registry credentials"),
    path("~/.netrc", "passwords for hosts"),
    path("~/.git-credentials", "git passwords and tokens"),
    path("~/.config/gh/hosts.yml", "GitHub CLI tokens"),
    path("~/.npmrc", "npm registry tokens"),
    path("~/.pypirc", "PyPI upload passwords and tokens"),
    path("~/.cargo/credentials", "crates.io tokens"),
    path("~/.cargo/credentials.toml", "crates.io tokens"),
    path("~/.password-store", "a pass password store"),
];

/// The browser profiles (cookies, saved passwords) and keyrings where Linux keeps them.
#[cfg(not(target_os = "macos"))]
const PLATFORM: &[BuiltIn] = &[
    path("~/.mozilla/firefox", "Firefox profiles"),
    path("~/snap/firefox/common/.mozilla/firefox", "Firefox profiles"),
    path("~/.config/google-chrome", "Chrome profiles"),
    path("~/.config/chromium", "Chromium profiles"),
    path("~/snap/chromium/common/chromium", "Chromium profiles"),
    path("~/.config/BraveSoftware/Brave-Browser", "Brave profiles"),
    path("~/.config/microsoft-edge", "Edge profiles"),
    path("~/.local/share/keyrings", "GNOME keyrings"),
];

/// The browser profiles (cookies, saved passwords) and keychains where macOS keeps them.
#[cfg(target_os = "macos")]
const PLATFORM: &[BuiltIn] = &[
    path(
        "~/Library/Application Support/Firefox/Profiles",
        "Firefox profiles",
    ),
    path(
        "~/Library/Application Support/Google/Chrome",
        "Chrome profiles",
    ),
    path(
        "~/Library/Application Support/Chromium",
        "Chromium profiles",
    ),
    path(
        "~/Library/Application Support/BraveSoftware/Brave-Browser",
        "Brave profiles",
    ),
    path(
        "~/Library/Application Support/Microsoft Edge",
        "Edge profiles",
    ),
    path("~/Library/Keychains", "keychains"),
];

/// Every built-in entry of this platform, in order.
pub fn built_in() -> impl Iterator<Item = &'static BuiltIn> {
    COMMON.iter().chain(PLATFORM)
}

/// The built-in entry named exactly `entry`.
pub fn named(entry: &str) -> Option<&'static BuiltIn> {
    built_in().find(|b| b.entry == entry)
}

/// Every entry's name, for a message: `~/.ssh/*, ~/.gnupg, …`.
pub fn names() -> String {
    built_in().map(|b| b.entry).collect::<Vec<_>>().join(", ")
}

/// A built-in entry resolved from a home directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub built_in: &'static BuiltIn,
    /// The entry's path with `~` taken from the home directory (for [`Shape::PrivateKeys`],
    /// the directory).
    pub path: PathBuf,
}

impl Credential {
    /// The path as `config show` prints it: the directory followed by `/*` for the keys.
    pub fn shown(&self) -> String {
        match self.built_in.shape {
            Shape::Path => self.path.display().to_string(),
            Shape::PrivateKeys => format!("{}/*", self.path.display()),
        }
    }
}

/// Every built-in entry from `home` but those named in `lifted`, in order.
pub fn resolve(home: &Path, lifted: &[&str]) -> Vec<Credential> {
    built_in()
        .filter(|b| !lifted.contains(&b.entry))
        .map(|b| Credential {
            built_in: b,
            path: home.join(directory_of(b).trim_start_matches("~/")),
        })
        .collect()
}

/// The path part of an entry: without the `/*` of [`Shape::PrivateKeys`].
fn directory_of(b: &BuiltIn) -> &'static str {
    match b.shape {
        Shape::Path => b.entry,
        Shape::PrivateKeys => b.entry.trim_end_matches("/*"),
    }
}

/// Whether a name in `~/.ssh` stays readable.
pub fn ssh_public(name: &std::ffi::OsStr) -> bool {
    SSH_PUBLIC.iter().any(|p| name == *p)
        || name
            .to_str()
            .is_some_and(|n| n.ends_with(SSH_PUBLIC_SUFFIX))
}

/// The real paths `list` denies now, each with its entry: what exists (a path that does not
/// denies nothing), resolved so that no link is sent, the keys of `~/.ssh` as listed now. An
/// entry that holds one of `roots` (the workspace, a writable root) is left out: the user opened
/// it to work in, and the helper refuses to deny what a command may write.
pub fn expand(list: &[Credential], roots: &[PathBuf]) -> Vec<(PathBuf, &'static BuiltIn)> {
    let mut out: Vec<(PathBuf, &'static BuiltIn)> = Vec::new();
    let mut push = |path: PathBuf, b: &'static BuiltIn| {
        let holds_root = roots.iter().any(|root| root.starts_with(&path));
        if !holds_root && !out.iter().any(|(p, _)| *p == path) {
            out.push((path, b));
        }
    };
    for credential in list {
        let Ok(real) = credential.path.canonicalize() else {
            continue;
        };
        let listing = match credential.built_in.shape {
            Shape::Path => {
                push(real, credential.built_in);
                continue;
            }
            Shape::PrivateKeys if real.is_dir() => std::fs::read_dir(&real),
            Shape::PrivateKeys => {
                push(real, credential.built_in);
                continue;
            }
        };
        let Ok(entries) = listing else {
            // A directory of keys that cannot be listed is denied whole: closed.
            push(real, credential.built_in);
            continue;
        };
        for entry in entries {
            let Ok(entry) = entry else {
                push(real.clone(), credential.built_in);
                break;
            };
            if ssh_public(&entry.file_name()) {
                continue;
            }
            // A link to nothing points at nothing to read.
            if let Ok(key) = entry.path().canonicalize() {
                push(key, credential.built_in);
            }
        }
    }
    out
}

/// The built-in entry that denied `path` (a real path), among `list`: the one whose real path
/// is it or holds it.
pub fn denying(list: &[Credential], path: &Path) -> Option<&'static BuiltIn> {
    list.iter().find_map(|credential| {
        let real = credential.path.canonicalize().ok()?;
        let held = match credential.built_in.shape {
            Shape::Path => path.starts_with(&real),
            Shape::PrivateKeys => {
                path.starts_with(&real)
                    && path != real
                    && path
                        .strip_prefix(&real)
                        .ok()
                        .and_then(|rest| rest.iter().next())
                        .is_some_and(|first| !ssh_public(first))
            }
        };
        held.then_some(credential.built_in)
    })
}

/// The sentence the model and the user read about `path`, denied by the built-in `b`.
pub fn lift_note(path: &Path, b: &BuiltIn) -> String {
    format!(
        "{} is a credential store ({}) kept unreadable by default; to let commands read it, add \
         lift_deny_read = [\"{}\"] to [sandbox] in agentd.toml",
        path.display(),
        b.holds,
        b.entry
    )
}

/// The lines of [`lift_note`] for each of a denial's `paths` that a built-in entry of `list`
/// denied.
pub fn lift_notes(paths: &[PathBuf], list: &[Credential]) -> Vec<String> {
    paths
        .iter()
        .filter_map(|path| denying(list, path).map(|b| lift_note(path, b)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::Scratch;

    #[test]
    fn the_set_covers_the_usual_credential_stores_and_each_name_is_unique() {
        for entry in [
            "~/.ssh/*",
            "~/.gnupg",
            "~/.aws/credentials",
            "~/.config/gcloud",
            "~/.azure",
            "~/.kube/config",
            "~/.docker/config.json",
            "~/.netrc",
            "~/.git-credentials",
            "~/.config/gh/hosts.yml",
            "~/.npmrc",
            "~/.pypirc",
            "~/.cargo/credentials",
            "~/.cargo/credentials.toml",
            "~/.password-store",
        ] {
            assert!(named(entry).is_some(), "{entry}");
        }
        #[cfg(not(target_os = "macos"))]
        for entry in [
            "~/.mozilla/firefox",
            "~/.config/google-chrome",
            "~/.config/chromium",
            "~/.config/BraveSoftware/Brave-Browser",
            "~/.config/microsoft-edge",
            "~/.local/share/keyrings",
        ] {
            assert!(named(entry).is_some(), "{entry}");
        }
        let all: Vec<&str> = built_in().map(|b| b.entry).collect();
        for (i, entry) in all.iter().enumerate() {
            assert!(entry.starts_with("~/"), "{entry}");
            assert!(!all[i + 1..].contains(entry), "{entry} twice");
        }
        assert!(named("~/.ssh").is_none(), "named exactly");
    }

    #[test]
    fn what_exists_is_denied_as_a_real_path_and_the_ssh_keys_as_listed_now() {
        let scratch = Scratch::new("credentials-expand");
        let home = scratch.0.canonicalize().expect("home");
        std::fs::create_dir_all(home.join(".ssh")).expect("mkdir");
        for name in ["id_ed25519", "id_ed25519.pub", "known_hosts", "config"] {
            std::fs::write(home.join(".ssh").join(name), name).expect("write");
        }
        std::fs::create_dir_all(home.join("dotfiles/gnupg")).expect("mkdir");
        std::os::unix::fs::symlink(home.join("dotfiles/gnupg"), home.join(".gnupg")).expect("link");
        let list = resolve(&home, &[]);
        let found: Vec<PathBuf> = expand(&list, &[]).into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            found,
            [home.join(".ssh/id_ed25519"), home.join("dotfiles/gnupg")]
        );
        // A key added later is found by the next request.
        std::fs::write(home.join(".ssh/id_rsa"), "k").expect("write");
        assert_eq!(expand(&list, &[]).len(), 3);
        // Lifted, an entry denies nothing; one that holds the workspace is left out.
        let lifted = resolve(&home, &["~/.ssh/*"]);
        let found = expand(&lifted, &[home.join("dotfiles/gnupg/work")]);
        assert!(found.is_empty(), "{found:?}");
        // Which entry denied a path, and the sentence naming the key that lifts it.
        let key = home.join(".ssh/id_rsa");
        assert_eq!(denying(&list, &key).map(|b| b.entry), Some("~/.ssh/*"));
        assert_eq!(denying(&list, &home.join(".ssh/known_hosts")), None);
        assert_eq!(denying(&lifted, &key), None);
        let note = lift_note(&key, named("~/.ssh/*").expect("entry"));
        assert!(
            note.contains("kept unreadable by default")
                && note.contains("lift_deny_read = [\"~/.ssh/*\"]"),
            "{note}"
        );
    }
}
