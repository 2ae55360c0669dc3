//! Where an MCP server reached over HTTP is ([`Endpoint`]: its URL and the headers every
//! request to it carries, checked once when the server is given), and how far a call may reach
//! it ([`Reach`]: what the call's network policy allows). Both come before any connection: a
//! server whose URL or headers cannot be used is not started, and one whose host a call may not
//! reach is not connected to.

use std::fmt;
use std::sync::Arc;

use confine_protocol::{Mode, Network, Policy};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};

use crate::http_client::{Target, TargetError};

/// The header of the server's session.
pub(super) const SESSION_ID: &str = "mcp-session-id";

/// The header of the protocol revision the server answered `initialize` with.
pub(super) const PROTOCOL_VERSION: &str = "mcp-protocol-version";

/// The headers agentd sets itself, which a server's own headers may not replace.
const RESERVED: [&str; 8] = [
    "host",
    "content-type",
    "content-length",
    "accept",
    "transfer-encoding",
    "connection",
    SESSION_ID,
    PROTOCOL_VERSION,
];

/// Where a server is: its URL, and the headers every request to it carries.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub(super) target: Target,
    pub(super) headers: HeaderMap,
}

impl fmt::Debug for Endpoint {
    /// Without the headers' values: one may be a credential.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.target.url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Why a server's URL or headers cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("{0}; put a credential in a header instead")]
    Credentials(TargetError),
    #[error("the URL {0}")]
    NotHttp(TargetError),
    #[error("the header name {0:?} is not one HTTP allows (letters, digits and !#$%&'*+-.^_`|~)")]
    HeaderName(String),
    #[error(
        "the value of the header {0} is not one HTTP allows (visible ASCII and spaces, no line \
         breaks)"
    )]
    HeaderValue(String),
    #[error("the header {0} is set by agentd itself; leave it out")]
    Reserved(String),
}

impl Endpoint {
    /// The server at `url` (`http://` or `https://`), reached with `headers`.
    pub fn new(url: &str, headers: &[(String, String)]) -> Result<Endpoint, EndpointError> {
        let target = Target::parse(url).map_err(|e| match e {
            TargetError::Credentials(_) => EndpointError::Credentials(e),
            TargetError::NotHttp(_) => EndpointError::NotHttp(e),
        })?;
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| EndpointError::HeaderName(name.clone()))?;
            if RESERVED.contains(&header.as_str()) {
                return Err(EndpointError::Reserved(name.clone()));
            }
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| EndpointError::HeaderValue(name.clone()))?;
            value.set_sensitive(true);
            map.append(header, value);
        }
        Ok(Endpoint {
            target,
            headers: map,
        })
    }

    pub fn url(&self) -> &str {
        &self.target.url
    }

    /// The names of its headers, in order.
    pub fn header_names(&self) -> Vec<String> {
        self.headers.keys().map(|k| k.as_str().to_owned()).collect()
    }
}

/// How far agentd may reach a server's host for a call: what the call's network policy allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// danger-full-access, or a confined mode with the network allowed: any host.
    Open,
    /// A confined mode under the allow-list: the hosts its policy allows.
    AllowList(Arc<crate::proxy::Policy>),
    /// A confined mode with the network denied: none.
    Denied,
}

impl Reach {
    /// The reach of a call confined by `policy`, whose commands go through `allow_list` when
    /// they have one ([`crate::tools::ToolEnv::proxy`]).
    pub fn of(policy: &Policy, allow_list: Option<&Arc<crate::proxy::Policy>>) -> Reach {
        if policy.mode == Mode::DangerFullAccess || policy.network == Network::Allow {
            return Reach::Open;
        }
        match allow_list {
            Some(allow_list) => Reach::AllowList(allow_list.clone()),
            None => Reach::Denied,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reach_follows_the_mode_the_network_and_the_allow_list() {
        let workspace = std::path::Path::new("/w");
        let profile = crate::profile::SandboxProfile::default();
        let allow_list = Arc::new(crate::proxy::Policy::default());
        let policy = |mode, network| profile.writes(mode, workspace, network);
        let cases = [
            (
                Mode::DangerFullAccess,
                Network::Deny,
                Some(&allow_list),
                Reach::Open,
            ),
            (Mode::WorkspaceWrite, Network::Allow, None, Reach::Open),
            (
                Mode::ReadOnly,
                Network::Deny,
                Some(&allow_list),
                Reach::AllowList(allow_list.clone()),
            ),
            (Mode::WorkspaceWrite, Network::Deny, None, Reach::Denied),
        ];
        for (mode, network, list, expected) in cases {
            assert_eq!(
                Reach::of(&policy(mode, network), list),
                expected,
                "{mode:?} {network:?}"
            );
        }
    }

    #[test]
    fn an_endpoint_refuses_what_http_cannot_carry_and_hides_its_header_values() {
        let endpoint = Endpoint::new(
            "https://mcp.example.com/mcp",
            &[("Authorization".into(), "Bearer s3cret".into())],
        )
        .expect("an endpoint");
        assert_eq!(endpoint.url(), "https://mcp.example.com/mcp");
        assert_eq!(endpoint.header_names(), ["authorization"]);
        assert!(!format!("{endpoint:?}").contains("s3cret"));
        let header = |name: &str, value: &str| {
            Endpoint::new("http://h/mcp", &[(name.to_owned(), value.to_owned())])
                .expect_err("refused")
                .to_string()
        };
        assert_eq!(
            header("Mcp-Session-Id", "x"),
            "the header Mcp-Session-Id is set by agentd itself; leave it out"
        );
        assert!(header("bad name", "x").starts_with("the header name \"bad name\""));
        assert!(header("X-A", "line\nbreak").starts_with("the value of the header X-A"));
    }
}
