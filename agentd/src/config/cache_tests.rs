use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use super::*;

/// The directories of `preset` in an environment holding exactly `vars`.
fn dirs(
    preset: CachePreset,
    vars: &[(&str, &str)],
) -> Result<Vec<(PathBuf, &'static str)>, CacheError> {
    let map: BTreeMap<String, OsString> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
        .collect();
    let env = move |name: &str| map.get(name).cloned();
    resolve(preset, &env).map(|dirs| dirs.into_iter().map(|d| (d.path, d.rule)).collect())
}

fn one(path: &str, rule: &'static str) -> Vec<(PathBuf, &'static str)> {
    vec![(PathBuf::from(path), rule)]
}

const HOME: (&str, &str) = ("HOME", "/home/u");

#[test]
fn every_preset_has_its_word() {
    assert_eq!(CACHE_PRESET_WORDS, ["pip", "npm", "cargo", "go"]);
    assert_eq!("cargo".parse::<CachePreset>(), Ok(CachePreset::Cargo));
    let unknown = "maven".parse::<CachePreset>().expect_err("unknown");
    assert_eq!(unknown.expected, CACHE_PRESET_WORDS);
}

#[test]
fn pip_follows_pip_cache_dir_then_xdg_cache_home_then_the_home_default() {
    assert_eq!(
        dirs(
            CachePreset::Pip,
            &[
                HOME,
                ("PIP_CACHE_DIR", "/data/pip"),
                ("XDG_CACHE_HOME", "/xdg")
            ]
        ),
        Ok(one("/data/pip", "$PIP_CACHE_DIR"))
    );
    assert_eq!(
        dirs(CachePreset::Pip, &[HOME, ("XDG_CACHE_HOME", "/xdg")]),
        Ok(one("/xdg/pip", "$XDG_CACHE_HOME/pip"))
    );
    assert_eq!(
        dirs(CachePreset::Pip, &[HOME]),
        Ok(one("/home/u/.cache/pip", "~/.cache/pip"))
    );
    // pip expands `~/` itself; an empty variable is unset; a relative XDG_CACHE_HOME is ignored.
    assert_eq!(
        dirs(CachePreset::Pip, &[HOME, ("PIP_CACHE_DIR", "~/pipcache")]),
        Ok(one("/home/u/pipcache", "$PIP_CACHE_DIR"))
    );
    assert_eq!(
        dirs(
            CachePreset::Pip,
            &[HOME, ("PIP_CACHE_DIR", ""), ("XDG_CACHE_HOME", "rel")]
        ),
        Ok(one("/home/u/.cache/pip", "~/.cache/pip"))
    );
    assert_eq!(
        dirs(CachePreset::Pip, &[HOME, ("PIP_CACHE_DIR", "cache")]),
        Err(CacheError::Relative {
            var: "PIP_CACHE_DIR",
            value: "cache".into()
        })
    );
}

#[test]
fn npm_follows_its_config_variable_in_either_spelling_then_the_home_default() {
    assert_eq!(
        dirs(
            CachePreset::Npm,
            &[
                HOME,
                ("npm_config_cache", "/n1"),
                ("NPM_CONFIG_CACHE", "/n2")
            ]
        ),
        Ok(one("/n1", "$npm_config_cache"))
    );
    assert_eq!(
        dirs(CachePreset::Npm, &[HOME, ("NPM_CONFIG_CACHE", "~/n2")]),
        Ok(one("/home/u/n2", "$NPM_CONFIG_CACHE"))
    );
    assert_eq!(
        dirs(CachePreset::Npm, &[HOME]),
        Ok(one("/home/u/.npm", "~/.npm"))
    );
}

#[test]
fn cargo_gets_its_registry_and_git_caches_never_its_home_or_bin() {
    let home = dirs(CachePreset::Cargo, &[HOME]).expect("resolves");
    assert_eq!(
        home,
        [
            (
                PathBuf::from("/home/u/.cargo/registry"),
                "~/.cargo/registry"
            ),
            (PathBuf::from("/home/u/.cargo/git"), "~/.cargo/git"),
        ]
    );
    let set = dirs(CachePreset::Cargo, &[HOME, ("CARGO_HOME", "/opt/cargo")]).expect("resolves");
    assert_eq!(
        set,
        [
            (PathBuf::from("/opt/cargo/registry"), "$CARGO_HOME/registry"),
            (PathBuf::from("/opt/cargo/git"), "$CARGO_HOME/git"),
        ]
    );
    for (dir, _) in home.iter().chain(&set) {
        assert!(
            dir != &PathBuf::from("/home/u/.cargo") && !dir.ends_with("bin"),
            "{dir:?}"
        );
    }
    assert!(matches!(
        dirs(CachePreset::Cargo, &[HOME, ("CARGO_HOME", ".cargo")]),
        Err(CacheError::Relative {
            var: "CARGO_HOME",
            ..
        })
    ));
}

#[test]
fn go_gets_its_module_cache_and_its_build_cache() {
    assert_eq!(
        dirs(CachePreset::Go, &[HOME]).expect("resolves"),
        [
            (PathBuf::from("/home/u/go/pkg/mod"), "~/go/pkg/mod"),
            (
                PathBuf::from("/home/u/.cache/go-build"),
                "~/.cache/go-build"
            ),
        ]
    );
    assert_eq!(
        dirs(
            CachePreset::Go,
            &[HOME, ("GOPATH", "/g1:/g2"), ("XDG_CACHE_HOME", "/xdg")]
        )
        .expect("resolves"),
        [
            (PathBuf::from("/g1/pkg/mod"), "$GOPATH/pkg/mod"),
            (PathBuf::from("/xdg/go-build"), "$XDG_CACHE_HOME/go-build"),
        ]
    );
    assert_eq!(
        dirs(
            CachePreset::Go,
            &[("GOMODCACHE", "/m"), ("GOPATH", "/g"), ("GOCACHE", "/b")]
        )
        .expect("resolves"),
        [
            (PathBuf::from("/m"), "$GOMODCACHE"),
            (PathBuf::from("/b"), "$GOCACHE"),
        ]
    );
    // GOCACHE=off: no build cache.
    assert_eq!(
        dirs(CachePreset::Go, &[("GOMODCACHE", "/m"), ("GOCACHE", "off")]),
        Ok(one("/m", "$GOMODCACHE"))
    );
    assert!(matches!(
        dirs(CachePreset::Go, &[HOME, ("GOPATH", "go")]),
        Err(CacheError::Relative { var: "GOPATH", .. })
    ));
}

#[test]
fn a_default_in_the_home_directory_needs_home() {
    let error = dirs(CachePreset::Pip, &[("HOME", "relative")]).expect_err("no home");
    assert_eq!(
        error.to_string(),
        "its directory would be ~/.cache/pip, but HOME is not set to an absolute path; set \
         HOME, or set PIP_CACHE_DIR or XDG_CACHE_HOME"
    );
    assert!(matches!(
        dirs(CachePreset::Go, &[("GOMODCACHE", "/m")]),
        Err(CacheError::NoHome {
            default: "~/.cache/go-build",
            ..
        })
    ));
    assert_eq!(
        dirs(CachePreset::Npm, &[("npm_config_cache", "~/x")]),
        Err(CacheError::Relative {
            var: "npm_config_cache",
            value: "~/x".into()
        })
    );
}
