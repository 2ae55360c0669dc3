//! The namespace backend's plan (RFC 0023, step 5): the namespaces and mounts of bwrap's
//! backend, gathered by the same code (`linux::gather`), made by the command's shim, which is
//! born in them (`sys::sandbox`); the Landlock ruleset and the seccomp filter applied by the
//! command itself, as under Landlock.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use confine_protocol::{Backend, Stage};

use super::linux::{
    Gathered, Mounts, Start, TMP, file_io_by_descriptor, filter, filter_variant, gather,
    inner_ruleset, own_network_connects,
};
use super::not_run::{NotRun, fail};
use super::plan::{Confinement, Plan, enforcement_of};
use super::request::environment;
use crate::sys::{Bind, Cover};

/// A sandbox's binds and covers, in order.
type Mounted = (Vec<Bind>, Vec<(CString, Cover)>);

/// A descriptor's place among the passed ones, from its number as bwrap's command sees it.
fn index_of(number: i32) -> Result<usize, NotRun> {
    usize::try_from(number - crate::sys::COMMAND_FIRST_PASSED_FD)
        .or_else(|e| fail(Stage::Prepare, format!("descriptor number: {e}")))
}

/// The number a passed descriptor has in the namespace backend's shim and command.
fn in_shim(number: i32) -> i32 {
    number - crate::sys::COMMAND_FIRST_PASSED_FD + crate::sys::FD_FIRST_PASSED
}

/// A C string of a path, which cannot hold a NUL (every path here was opened).
fn c_path(path: &Path) -> Result<CString, NotRun> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes())
        .or_else(|e| fail(Stage::Prepare, format!("a path with a NUL byte: {e}")))
}

/// The binds and covers of the namespace backend's sandbox, in the order of bwrap's arguments.
fn sandbox_mounts(mounts: &Mounts, masked: &[PathBuf]) -> Result<Mounted, NotRun> {
    let mut binds = Vec::new();
    let bind =
        |(fd, path): &crate::bwrap::FdBind, to: &Path, writable: bool| -> Result<Bind, NotRun> {
            Ok(Bind {
                source: index_of(*fd)?,
                from: c_path(path)?,
                to: c_path(to)?,
                writable,
            })
        };
    if let Some(tmp) = &mounts.tmp {
        binds.push(bind(tmp, Path::new(TMP), true)?);
    }
    for shown in &mounts.shown {
        binds.push(bind(shown, &shown.1, false)?);
    }
    for writable in mounts.writable.iter().chain(&mounts.pinned) {
        binds.push(bind(writable, &writable.1, true)?);
    }
    for read_only in &mounts.read_only {
        binds.push(bind(read_only, &read_only.1, false)?);
    }
    let mut covers = Vec::new();
    for path in masked {
        covers.push((c_path(path)?, Cover::Tmpfs { read_only: false }));
    }
    for path in &mounts.denied_dirs {
        covers.push((c_path(path)?, Cover::Tmpfs { read_only: true }));
    }
    for path in &mounts.denied_files {
        covers.push((c_path(path)?, Cover::EmptyFile));
    }
    Ok((binds, covers))
}

/// The namespace backend's plan: the same namespaces and mounts as bwrap's, made by the
/// command's shim, which is born in them (`sys::sandbox`); the Landlock ruleset and the seccomp
/// filter applied by the command itself, as under Landlock.
pub(super) fn plan(mut start: Start<'_>) -> Result<Plan, NotRun> {
    let (spawn, ctx) = (start.spawn, start.ctx);
    let filter = filter(ctx, filter_variant(Backend::Namespaces, &start))?;
    let Gathered {
        missing,
        cleanup,
        mut passed,
        root_fd,
        mounts,
        layer_writable,
        tmpdir,
    } = gather(&start)?;
    let ruleset = inner_ruleset(ctx, &layer_writable)?;
    let bridge = match start.proxy.take() {
        Some(fd) => Some(crate::sys::Bridge {
            control: index_of(passed.add(fd)?)?,
            serve: crate::bridge::serve_here,
        }),
        None => None,
    };
    let argv = file_io_by_descriptor(&spawn.argv, ctx, &mut passed, in_shim)?;
    let (binds, covers) = sandbox_mounts(&mounts, &ctx.masked)?;
    let sandbox = crate::sys::Sandbox {
        own_network: !start.network_allowed,
        user: crate::sys::UserNamespace::new(start.caps.in_user_namespace()),
        binds,
        covers,
        bridge,
        host_root: index_of(root_fd)?,
        ahead: None,
    };
    Ok(Plan {
        backend: Backend::Namespaces,
        enforcement: Some(enforcement_of(missing)),
        layers: start.layers,
        argv,
        env: environment(spawn, ctx, tmpdir.as_deref()),
        confinement: Confinement::Namespaces {
            ruleset: ruleset.fd,
            filter,
            passed: passed.0,
            sandbox,
        },
        rlimits: start.rlimits,
        caps: start.caps,
        cleanup,
        connects: own_network_connects(start.listed)?,
    })
}

/// Lends `ahead`, the user and network namespaces made ahead, to `plan` when it is the
/// namespace backend's with a network namespace of its own; whether it is.
pub(crate) fn lend(plan: &mut Plan, ahead: &mut Option<crate::sys::Ahead>) -> bool {
    match &mut plan.confinement {
        Confinement::Namespaces { sandbox, .. } if sandbox.own_network => {
            sandbox.ahead = ahead.take();
            true
        }
        _ => false,
    }
}
