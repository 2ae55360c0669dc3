//! Which hosts the proxy lets a command reach: `allowed_domains` and `denied_domains`, checked
//! once when the policy is made and then matched against every host a client names.
//!
//! A host is compared as a name, never as what it resolves to: a client may only reach what a
//! person wrote down. So an IP literal is refused unless that very address is listed, and so is
//! anything that is not a plain DNS name — in particular the numeric forms a resolver would take
//! for an address (`2130706433`, `0x7f.1`, `127.1`, `0177.0.0.1`), which a name check that only
//! knew dotted quads would let through as "names".

use std::fmt;
use std::net::IpAddr;

use super::local::LocalAddress;

/// The longest DNS name, in characters, without its trailing dot.
const MAX_NAME: usize = 253;

/// The longest label of a DNS name.
const MAX_LABEL: usize = 63;

/// The key an allowed entry comes from, as error messages and refusals name it.
pub const ALLOWED_KEY: &str = "allowed_domains";

/// The key a denied entry comes from.
pub const DENIED_KEY: &str = "denied_domains";

/// A host as a client named it, read once: a DNS name (lower case, without a trailing dot), an
/// IP address, or neither.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Name(String),
    Ip(IpAddr),
    /// Not a DNS name and not an IP address: refused whatever the lists say.
    Invalid,
}

impl Host {
    /// Reads a host as written in a request: `example.com`, `Example.COM.`, `127.0.0.1`, `::1`
    /// or `[::1]`.
    pub fn parse(raw: &str) -> Host {
        if let Some(inner) = raw.strip_prefix('[') {
            return match inner.strip_suffix(']').and_then(|v6| v6.parse().ok()) {
                Some(v6) => Host::Ip(IpAddr::V6(v6)),
                None => Host::Invalid,
            };
        }
        if let Ok(ip) = raw.parse::<IpAddr>() {
            return Host::Ip(ip);
        }
        match dns_name(raw) {
            Some(name) => Host::Name(name),
            None => Host::Invalid,
        }
    }
}

/// `raw` as a DNS name in lower case without its trailing dot, or `None` when it is not one:
/// labels of 1 to 63 letters, digits, `-` (not first or last) and `_`, at most 253 characters,
/// and a last label that is not a number — decimal, octal or `0x` hexadecimal — since a name
/// that ends in a number is what resolvers read as an IPv4 address. Non-ASCII is refused: an
/// internationalised name is written in its punycode (`xn--…`) form.
fn dns_name(raw: &str) -> Option<String> {
    let name = raw.strip_suffix('.').unwrap_or(raw).to_ascii_lowercase();
    if name.is_empty() || name.len() > MAX_NAME {
        return None;
    }
    let labels_ok = name.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= MAX_LABEL
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    });
    let last = name.rsplit('.').next().unwrap_or_default();
    (labels_ok && !is_number(last)).then_some(name)
}

/// Whether a label is a number as an IPv4 parser in a resolver reads one: digits (decimal, or
/// octal with a leading 0), or `0x` followed by hexadecimal digits (none at all included).
fn is_number(label: &str) -> bool {
    if let Some(hex) = label.strip_prefix("0x") {
        return hex.bytes().all(|b| b.is_ascii_hexdigit());
    }
    !label.is_empty() && label.bytes().all(|b| b.is_ascii_digit())
}

/// One entry of a list, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// Exactly this name.
    Exact(String),
    /// Every name below this one (`*.example.com` holds `example.com`), not the name itself.
    Below(String),
    /// Exactly this address.
    Ip(IpAddr),
}

impl Pattern {
    /// Checks an entry as written in a list.
    pub fn parse(entry: &str) -> Result<Pattern, EntryProblem> {
        if entry.is_empty() {
            return Err(EntryProblem::Empty);
        }
        if entry.chars().any(char::is_whitespace) {
            return Err(EntryProblem::Whitespace);
        }
        if entry.contains("://") {
            return Err(EntryProblem::Scheme);
        }
        if let Some(rest) = entry.strip_prefix("*.") {
            if rest.contains('*') {
                return Err(EntryProblem::MisplacedWildcard);
            }
            return match Host::parse(rest) {
                Host::Name(name) => Ok(Pattern::Below(name)),
                Host::Ip(_) | Host::Invalid => Err(EntryProblem::WildcardOfNonName),
            };
        }
        if entry.contains('*') {
            return Err(EntryProblem::MisplacedWildcard);
        }
        match Host::parse(entry) {
            Host::Name(name) => Ok(Pattern::Exact(name)),
            Host::Ip(ip) => Ok(Pattern::Ip(ip)),
            Host::Invalid if has_port(entry) => Err(EntryProblem::Port),
            Host::Invalid => Err(EntryProblem::NotAHost),
        }
    }

    fn matches(&self, host: &Host) -> bool {
        match (self, host) {
            (Pattern::Exact(entry), Host::Name(name)) => entry == name,
            (Pattern::Below(entry), Host::Name(name)) => name
                .strip_suffix(entry.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (Pattern::Ip(entry), Host::Ip(ip)) => entry == ip,
            _ => false,
        }
    }
}

/// Whether an entry that is no host looks like `host:port` or `[v6]:port`.
fn has_port(entry: &str) -> bool {
    let Some((host, port)) = entry.rsplit_once(':') else {
        return false;
    };
    !port.is_empty()
        && port.bytes().all(|b| b.is_ascii_digit())
        && !matches!(Host::parse(host), Host::Invalid)
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Exact(name) => f.write_str(name),
            Pattern::Below(name) => write!(f, "*.{name}"),
            Pattern::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// What is wrong with one entry of a list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EntryProblem {
    #[error("is empty; remove it")]
    Empty,
    #[error("contains white space; write the host name alone")]
    Whitespace,
    #[error("has a scheme; write the host name alone, such as \"example.com\"")]
    Scheme,
    #[error("has a port; an entry names a host only, and every port of an allowed host is allowed")]
    Port,
    #[error(
        "has a `*` that is not a leading `*.`; write \"*.example.com\" for every name below \
         example.com (and \"example.com\" for the name itself)"
    )]
    MisplacedWildcard,
    #[error("is a wildcard of something that is not a DNS name; write \"*.example.com\"")]
    WildcardOfNonName,
    #[error(
        "is neither a DNS name nor an IP address (a name has labels of letters, digits, `-` \
         and `_`, and does not end in a number; write an IPv4 address as a.b.c.d and an IPv6 \
         address as ::1 or [::1])"
    )]
    NotAHost,
}

/// An entry of one of the lists that cannot be used: building a [`Policy`] fails on the first.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key} entry {entry:?} {problem}")]
pub struct PolicyError {
    /// [`ALLOWED_KEY`] or [`DENIED_KEY`].
    pub key: &'static str,
    pub entry: String,
    pub problem: EntryProblem,
}

/// Why a host is allowed or refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// An entry of `allowed_domains` holds it and none of `denied_domains` does.
    Allowed(Pattern),
    /// An entry of `denied_domains` holds it (whatever `allowed_domains` says).
    Denied(Pattern),
    /// A name that no entry of `allowed_domains` holds.
    NotAllowed,
    /// An IP address that `allowed_domains` does not list.
    AddressNotListed,
    /// Neither a DNS name nor an IP address.
    NotAName,
    /// An allowed host whose every address is this machine's or its link's
    /// ([`super::local`]), each with why: a name's addresses as resolved, or a listed address.
    LocalAddresses(Vec<LocalAddress>),
}

impl Reason {
    /// Whether the host may be reached.
    pub fn allows(&self) -> bool {
        matches!(self, Reason::Allowed(_))
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Allowed(entry) => write!(f, "allowed by \"{entry}\" in {ALLOWED_KEY}"),
            Reason::Denied(entry) => write!(f, "denied by \"{entry}\" in {DENIED_KEY}"),
            Reason::NotAllowed => write!(f, "not in {ALLOWED_KEY}"),
            Reason::AddressNotListed => {
                write!(
                    f,
                    "an IP address not in {ALLOWED_KEY}; ask for the host by name"
                )
            }
            Reason::NotAName => write!(
                f,
                "not a DNS name, so not in {ALLOWED_KEY} (numeric host forms are refused)"
            ),
            Reason::LocalAddresses(addresses) => {
                f.write_str(
                    "leads only to this machine or its link, where an allowed host may not lead: ",
                )?;
                for (n, address) in addresses.iter().enumerate() {
                    if n > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{address}")?;
                }
                Ok(())
            }
        }
    }
}

/// The proxy's policy: the hosts a client may reach, on any port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    allowed: Vec<Pattern>,
    denied: Vec<Pattern>,
    local_addresses: bool,
}

impl Policy {
    /// Checks both lists; the first entry that cannot be used is the error. Empty lists are a
    /// policy that refuses everything.
    pub fn new<A, D>(allowed: A, denied: D) -> Result<Policy, PolicyError>
    where
        A: IntoIterator,
        A::Item: AsRef<str>,
        D: IntoIterator,
        D::Item: AsRef<str>,
    {
        Ok(Policy {
            allowed: patterns(ALLOWED_KEY, allowed)?,
            denied: patterns(DENIED_KEY, denied)?,
            local_addresses: false,
        })
    }

    /// The same policy, but an allowed host may lead to this machine or its link
    /// ([`super::local`]) and still be reached: for a name that is meant to be this machine,
    /// such as a development server's.
    pub fn allowing_local_addresses(self) -> Policy {
        Policy {
            local_addresses: true,
            ..self
        }
    }

    /// Whether an allowed host may lead to this machine or its link.
    pub fn local_addresses(&self) -> bool {
        self.local_addresses
    }

    /// The entries of `allowed_domains`, in order.
    pub fn allowed(&self) -> &[Pattern] {
        &self.allowed
    }

    /// The host a client named (as written) read once, and why it may or may not be reached.
    /// Denied entries are looked at first: a host that both lists hold is refused.
    pub fn decide(&self, raw: &str) -> (Host, Reason) {
        let host = Host::parse(raw);
        let reason = match host {
            Host::Invalid => Reason::NotAName,
            _ => match self.denied.iter().find(|p| p.matches(&host)) {
                Some(entry) => Reason::Denied(entry.clone()),
                None => match self.allowed.iter().find(|p| p.matches(&host)) {
                    Some(entry) => Reason::Allowed(entry.clone()),
                    None if matches!(host, Host::Ip(_)) => Reason::AddressNotListed,
                    None => Reason::NotAllowed,
                },
            },
        };
        (host, reason)
    }
}

fn patterns<L>(key: &'static str, list: L) -> Result<Vec<Pattern>, PolicyError>
where
    L: IntoIterator,
    L::Item: AsRef<str>,
{
    list.into_iter()
        .map(|entry| {
            let entry = entry.as_ref();
            Pattern::parse(entry).map_err(|problem| PolicyError {
                key,
                entry: entry.to_owned(),
                problem,
            })
        })
        .collect()
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
