//! `agentd config show`'s lines for the sandbox profile.

use std::path::PathBuf;

use super::effective::Effective;
use super::show::{Lines, quoted, quoted_path};

impl Effective {
    /// The allow-list's lists, when `sandbox.network` is `allow-list`.
    pub(super) fn show_allow_list(&self, out: &mut Lines) {
        let Some(list) = &self.allow_list.value else {
            return;
        };
        let words = |w: &[String]| {
            format!(
                "[{}]",
                w.iter().map(|e| quoted(e)).collect::<Vec<_>>().join(", ")
            )
        };
        let source = &self.allow_list.source;
        out.value("sandbox.allowed_domains", words(&list.allowed), source);
        out.value("sandbox.denied_domains", words(&list.denied), source);
        out.value(
            "sandbox.allow_local_addresses",
            list.local_addresses.to_string(),
            source,
        );
    }

    /// Every denied read of a confined command, one a line, with where it comes from: the
    /// built-in credential stores (or, lifted, which line lifted them), then the file's own.
    fn show_denied_reads(&self, out: &mut Lines) {
        let file = self.file_for_messages();
        let Some(credentials) = &self.credentials else {
            out.raw(
                "  no built-in denied reads: no home directory is known (HOME is not absolute \
                 and the user has none)"
                    .to_owned(),
            );
            return self.show_configured_reads(out, &file);
        };
        for credential in credentials {
            let entry = credential.built_in.entry;
            let shown = quoted(&credential.shown());
            let lifted = self.lift_deny_read.value.iter().find(|l| l.value == entry);
            match lifted {
                Some(l) => out.raw(format!(
                    "  lifted: {shown} (built in: {entry}; lifted by {file}, line {})",
                    l.line
                )),
                None => out.raw(format!("  denied: {shown} (built in: {entry})")),
            }
        }
        self.show_configured_reads(out, &file);
    }

    fn show_configured_reads(&self, out: &mut Lines, file: &str) {
        for (denied, line) in self.deny_read.value.iter().zip(&self.deny_read_lines) {
            out.raw(format!(
                "  denied: {} ({file}, line {line})",
                quoted(&denied.shown())
            ));
        }
    }

    /// The sandbox profile's keys, each preset with the directories it resolved to and the rule
    /// that gave each.
    pub(super) fn show_profile(&self, out: &mut Lines) {
        let list = |items: Vec<String>| format!("[{}]", items.join(", "));
        let paths = |paths: &[PathBuf]| list(paths.iter().map(|p| quoted_path(p)).collect());
        out.value(
            "sandbox.writable_roots",
            paths(&self.writable_roots.value),
            &self.writable_roots.source,
        );
        let presets = self.cache.value.iter();
        out.value(
            "sandbox.cache",
            list(presets.map(|c| quoted(c.preset.as_str())).collect()),
            &self.cache.source,
        );
        for cache in &self.cache.value {
            let dirs: Vec<String> = cache
                .dirs
                .iter()
                .map(|dir| format!("{} ({})", quoted_path(&dir.path), dir.rule))
                .collect();
            let dirs = if dirs.is_empty() {
                "no directory".to_owned()
            } else {
                dirs.join(", ")
            };
            out.raw(format!("  {}: {dirs}", cache.preset.as_str()));
        }
        out.value(
            "sandbox.protected",
            paths(&self.protected.value),
            &self.protected.source,
        );
        out.value(
            "sandbox.local_binding",
            self.local_binding.value.to_string(),
            &self.local_binding.source,
        );
        let denied = self.deny_read.value.iter().map(|d| quoted(&d.shown()));
        out.value(
            "sandbox.deny_read",
            list(denied.collect()),
            &self.deny_read.source,
        );
        let lifted = self.lift_deny_read.value.iter().map(|l| quoted(&l.value));
        out.value(
            "sandbox.lift_deny_read",
            list(lifted.collect()),
            &self.lift_deny_read.source,
        );
        self.show_denied_reads(out);
        out.value(
            "sandbox.unix_sockets",
            paths(&self.unix_sockets.value),
            &self.unix_sockets.source,
        );
        let (env, list) = (&self.sandbox_env, |v: Vec<String>| {
            format!("[{}]", v.join(", "))
        });
        let pass = env.value.pass.iter().map(|n| quoted(n)).collect();
        out.value("sandbox.env.pass", list(pass), &env.source);
        // The names only: a value set here may be a credential.
        let set = env.value.set.iter().map(|(n, _)| quoted(n)).collect();
        out.value("sandbox.env.set", list(set), &env.source);
    }
}
