//! What other crates use of agentd, and nothing else: the `agentd` executable, the benchmark,
//! the documentation generator, the fuzz targets and the scenarios. Every other module of
//! agentd is private to the crate; an item appears here because one of those uses it, under the
//! name of the module that defines it.

/// The ACP agent: serving a connection, its options, the line limits of its input and the
/// budget of what it sends.
pub mod acp {
    pub use crate::acp::{
        AcpOptions, MAX_ERROR_LINE, MAX_LINE, OUTGOING_BUDGET, serve_on, stop_reason_after,
    };
}

/// One cancellation signal per prompt turn.
pub mod cancel {
    pub use crate::cancel::{Cancel, Canceller, pair};
}

/// Checkpoints of a session's writable roots, and restoring them.
pub mod checkpoint {
    pub use crate::checkpoint::{ChangeKind, Scope, Store, restore};
}

/// The command line the `agentd` executable parses, and `agentd run`'s job.
pub mod cli {
    pub use crate::cli::run::{RunArgs, run_job};
    pub use crate::cli::{Cli, Command, EXIT_DID_NOT_RUN, execute};
}

/// What the helper grants.
pub mod composition {
    pub use crate::composition::Composition;
}

/// The configuration file: its keys and the effective settings.
pub mod config {
    pub use crate::config::{ConfigKey, DEFAULT_SANDBOX_MODE, Effective, Flags, KEYS};
}

/// Which environment variables a command gets.
pub mod environment {
    pub use crate::environment::command_environment;
}

/// agentd's side of the confine-helper protocol.
pub mod helper_client {
    pub use crate::helper_client::{
        ClientError, FailedAt, HelperClient, HelperEndpoint, Outcome, SpawnSpec, WorkspaceRefusal,
        WriteSpec,
    };
}

/// The model provider: its requests and answers, the OpenAI-compatible provider and the
/// scripted one.
pub mod model {
    pub use crate::model::{
        AssistantTurn, ChatRequest, Delta, Deltas, MaxTokensField, Message, ModelError, Provider,
        Reasoning, ReasoningField, SendReasoning, ToolCall, ToolSpec,
    };

    /// The OpenAI-compatible provider.
    pub mod openai {
        pub use crate::model::openai::{OpenAiProvider, OpenAiSettings};
    }
}

/// What a session's commands may write besides the workspace.
pub mod profile {
    pub use crate::profile::SandboxProfile;
}

/// A session's log and its events.
pub mod session {
    pub use crate::session::log::new_id;
    pub use crate::session::{
        Before, Event, EventLog, LoggedDiff, LoggedToolCall, Omission, ToolStatus,
    };
}

/// A session's own temp directory.
pub mod session_temp {
    pub use crate::session_temp::SessionTemp;
}

/// The tools: what is offered, how a call is described and run.
pub mod tools {
    pub use crate::tools::{
        CallContext, NAMES, NarrowingMark, SpecOptions, TASK, ToolEnv, ToolResult, ToolScope,
        UPDATE_PLAN, describe, offered, offered_confined, run,
    };
}
