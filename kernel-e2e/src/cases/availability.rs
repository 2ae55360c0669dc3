//! T00, availability: whether the backend is there at all. The suite judges each backend
//! without the helper (`tests/shared/available.rs`: bwrap run directly, as the cell's user,
//! with the namespaces the helper asks of it; the kernel's own Landlock version query; for the
//! helper's own namespaces, that query and `unshare` making them as the cell's user) and runs
//! every case of a backend that works. The helper's own verdict must agree: a helper that
//! called a working backend unusable would fail every case of it as a runner failure; this case
//! names the cause.

use std::process::{Command, Stdio};

use serde_json::Value;

use crate::case::{Case, Cx, Verdict, fail};
use crate::ensure;
use crate::matrix::READ_ONLY;

pub const CASES: &[Case] = &[Case {
    id: "T00",
    title: "the helper reports usable the backend this machine offers the user (judged without it)",
    modes: READ_ONLY,
    exclusive: false,
    body: the_helper_reports_the_backend_usable,
}];

/// `agentd probe --json`, asking the helper under test, run as the cell's user with agentd's
/// environment, must call the cell's backend usable: the suite found it working (the case
/// would be skipped otherwise).
fn the_helper_reports_the_backend_usable(cx: &mut Cx) -> Verdict {
    let backend = cx.cell.backend.as_str();
    let mut command = Command::new(&cx.launcher.binaries.agentd);
    command
        .args(["probe", "--json", "--helper"])
        .arg(&cx.launcher.binaries.helper)
        .env_clear()
        .envs(cx.launcher.base_env.iter().cloned())
        .current_dir(&cx.ws)
        .stdin(Stdio::null());
    cx.user().apply(&mut command);
    let out = command
        .output()
        .map_err(|e| fail(format!("cannot run agentd probe: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value =
        serde_json::from_str(stdout.lines().last().unwrap_or_default()).map_err(|e| {
            fail(format!(
                "agentd probe --json printed no JSON ({e}): {stdout}"
            ))
        })?;
    let verdict = report
        .get("backends")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|b| b["backend"] == backend)
        .ok_or_else(|| fail(format!("the helper's probe names no {backend}: {report}")))?;
    ensure!(
        verdict["usable"] == true,
        "{backend} works on this machine for {} (checked without the helper), but the helper \
         reports it unusable: {}",
        cx.user().name,
        verdict["detail"]
    );
    Ok(())
}
