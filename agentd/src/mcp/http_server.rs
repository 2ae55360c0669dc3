//! One MCP server reached over streamable HTTP ([`super::http`]): nothing runs, there is a URL
//! to reach. Started means initialized under a [`Reach`] — how far the network policy of the
//! call (or of the session's start) it serves lets agentd connect; stopped means agentd sends
//! it nothing more. A call under another reach starts it again, deciding again whether its host
//! may be reached at all (RFC 0015).

use std::time::Duration;

use confine_protocol::Mode;

use super::endpoint::{Endpoint, Reach};
use super::http::HttpClient;
use super::protocol::{self, Initialized};
use super::rpc::{HttpFailure, RpcError};
use super::server::StartError;

/// A server over HTTP that answered `initialize`.
#[derive(Debug)]
pub struct HttpServer {
    client: HttpClient,
    initialized: Initialized,
    /// The mode of the call it was started for: a narrowing below it stops it.
    mode: Mode,
}

impl HttpServer {
    /// Initializes the server at `endpoint`, reached as far as `reach` allows, for a call under
    /// `mode`; each request waited for at most `timeout`. The error says why, naming the host
    /// and the setting that would allow it when the network policy refuses it.
    pub async fn start(
        endpoint: Endpoint,
        reach: Reach,
        mode: Mode,
        timeout: Duration,
    ) -> Result<HttpServer, StartError> {
        let client = HttpClient::new(endpoint, reach)?;
        match protocol::initialize(&client, timeout).await {
            Ok(initialized) => Ok(HttpServer {
                client,
                initialized,
                mode,
            }),
            Err(e) => Err(StartError::Answer(explain(&e))),
        }
    }

    pub fn rpc(&self) -> &HttpClient {
        &self.client
    }

    pub fn reach(&self) -> &Reach {
        self.client.reach()
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn initialized(&self) -> &Initialized {
        &self.initialized
    }

    /// Whether it was stopped, or ended its session.
    pub fn has_ended(&self) -> bool {
        self.client.has_ended()
    }

    /// Ends its requests at once; nothing is sent to it from now on.
    pub fn stop(&self) {
        self.client.stop();
    }

    /// What the allow-list decided for it since this was last asked; `None` without one.
    pub fn take_decisions(&self) -> Option<crate::proxy::Decisions> {
        self.client.take_decisions()
    }
}

/// `error` of a request to a server over HTTP, for a person or the model: a refusal of the
/// network policy on its own, since it is about the host and not about one request.
pub fn explain(error: &RpcError) -> String {
    match error {
        RpcError::Http {
            why: why @ (HttpFailure::NetworkDenied { .. } | HttpFailure::Refused { .. }),
            ..
        } => why.to_string(),
        other => other.to_string(),
    }
}
