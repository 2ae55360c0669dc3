//! `[sandbox] network = "allow-list"`: no network of its own for a command, but a proxy that
//! reaches the hosts `allowed_domains` names (RFC 0016).
//!
//! ```toml
//! [sandbox]
//! network = "allow-list"
//! allowed_domains = ["pypi.org", "*.pythonhosted.org"]
//! denied_domains = ["upload.pypi.org"]
//! allow_local_addresses = false   # true lets an allowed name lead to this machine itself
//! ```
//!
//! The lists are checked when the file loads (`proxy::Policy::new`); an entry that cannot be
//! used is an error naming the file, the line of the list and the entry. The lists without
//! `network = "allow-list"` are an error too: they would silently do nothing.

use std::path::Path;
use std::sync::Arc;

use toml::Spanned;

use super::ConfigError;
use super::checks::line_at;
use super::sandbox::RawList;
use crate::proxy::Policy;
use crate::proxy::policy::PolicyError;
use crate::words::allowed;
use confine_protocol::Network;
use confine_protocol::vocabulary::NETWORK_WORDS;

/// The word of `sandbox.network` that asks for the allow-list.
pub const ALLOW_LIST: &str = "allow-list";

/// The allow-list as configured: the entries as written, and the policy made of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowList {
    pub allowed: Vec<String>,
    pub denied: Vec<String>,
    pub local_addresses: bool,
    pub policy: Arc<Policy>,
}

/// The allow-list keys as the file writes them.
pub(super) struct RawAllowList {
    pub(super) allowed: RawList,
    pub(super) denied: RawList,
    pub(super) local_addresses: Option<bool>,
}

/// Takes `allow-list` out of `network` (leaving `deny` for the word check, which then holds
/// for the sandbox itself) and builds the proxy's policy; `None` when the file asks for none.
pub(super) fn parse(
    network: &mut Option<Spanned<String>>,
    raw: RawAllowList,
    path: &Path,
    text: &str,
) -> Result<Option<AllowList>, ConfigError> {
    if let Some(word) = network.as_ref() {
        let known = word.get_ref() == ALLOW_LIST || word.get_ref().parse::<Network>().is_ok();
        if !known {
            let mut words: Vec<&str> = NETWORK_WORDS.to_vec();
            words.push(ALLOW_LIST);
            return Err(ConfigError::NotAllowed {
                path: path.to_owned(),
                line: line_at(text, word.span().start),
                key: "sandbox.network",
                value: word.get_ref().clone(),
                allowed: allowed(&words),
            });
        }
    }
    let asked = network.as_ref().is_some_and(|n| n.get_ref() == ALLOW_LIST);
    if asked && let Some(word) = network.take() {
        *network = Some(Spanned::new(word.span(), "deny".to_owned()));
    }
    let line = |list: &RawList| list.as_ref().map(|l| line_at(text, l.span().start));
    let error = |line: usize, message: String| ConfigError::AllowList {
        path: path.to_owned(),
        line,
        message,
    };
    if !asked {
        let given = [
            ("allowed_domains", line(&raw.allowed)),
            ("denied_domains", line(&raw.denied)),
        ];
        if let Some((key, Some(at))) = given.into_iter().find(|(_, at)| at.is_some()) {
            return Err(error(
                at,
                format!("sandbox.{key} needs sandbox.network = \"{ALLOW_LIST}\" to mean anything"),
            ));
        }
        return Ok(None);
    }
    let at = line(&raw.allowed).or(line(&raw.denied)).unwrap_or(1);
    let names = |list: RawList| -> Vec<String> {
        list.map(|l| {
            l.into_inner()
                .into_iter()
                .map(Spanned::into_inner)
                .collect()
        })
        .unwrap_or_default()
    };
    let (allowed, denied) = (names(raw.allowed), names(raw.denied));
    let local_addresses = raw.local_addresses == Some(true);
    Ok(Some(AllowList {
        policy: Arc::new(
            policy(&allowed, &denied, local_addresses).map_err(|e| error(at, e.to_string()))?,
        ),
        allowed,
        denied,
        local_addresses,
    }))
}

/// The proxy's policy of the two lists; the error says which entry cannot be used.
pub fn policy(
    allowed: &[String],
    denied: &[String],
    local_addresses: bool,
) -> Result<Policy, PolicyError> {
    let policy = Policy::new(allowed, denied)?;
    Ok(if local_addresses {
        policy.allowing_local_addresses()
    } else {
        policy
    })
}
