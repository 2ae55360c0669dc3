//! Every key of `agentd.toml` in one table: its type, its default, the variable and the flag that
//! override it, and what it does. `agentd-docgen` writes `docs/contracts/agentd-toml.md` from it.
//!
//! The parser's structs (serde, `deny_unknown_fields`) and `config show` are the behaviour; this
//! table describes them, and its tests hold the three together: the keys of each table are
//! exactly the fields its struct accepts, the `AGENTD_*` variables are exactly those the layering
//! reads, each variable and flag shows as the source of its key in `config show`, and every key
//! `config show` prints is here with the default it prints. A key added to a struct without a
//! row here fails them.

/// One key of the configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigKey {
    /// Its dotted path: `sandbox.mode`. `NAME` stands for a name the file chooses
    /// (`models.NAME`, `agents.NAME.max_depth`); `mcp.servers` is an array of tables, and
    /// `mcp.servers.name` a key of each.
    pub path: &'static str,
    /// Its TOML type and the values it takes.
    pub kind: &'static str,
    /// What holds when nothing sets it, as `config show` prints it where it prints the key.
    pub default: &'static str,
    /// The environment variable that overrides the file.
    pub env: Option<&'static str>,
    /// The flag that overrides the file and the variable.
    pub flag: Option<&'static str>,
    pub doc: &'static str,
}

impl ConfigKey {
    const fn new(path: &'static str, kind: &'static str, default: &'static str) -> ConfigKey {
        ConfigKey {
            path,
            kind,
            default,
            env: None,
            flag: None,
            doc: "",
        }
    }

    const fn env(mut self, var: &'static str) -> ConfigKey {
        self.env = Some(var);
        self
    }

    const fn flag(mut self, flag: &'static str) -> ConfigKey {
        self.flag = Some(flag);
        self
    }

    const fn doc(mut self, doc: &'static str) -> ConfigKey {
        self.doc = doc;
        self
    }

    /// The table the key is in: its path without the last part (`""` at the top level).
    pub fn table(&self) -> &'static str {
        self.path.rsplit_once('.').map_or("", |(table, _)| table)
    }

    /// The key's own name: the last part of its path.
    pub fn name(&self) -> &'static str {
        self.path
            .rsplit_once('.')
            .map_or(self.path, |(_, name)| name)
    }
}

const MODE_WORDS: &str = "\"read-only\", \"workspace-write\" or \"danger-full-access\"";

/// Every key, table by table, in the order of the configuration's documentation.
pub const KEYS: &[ConfigKey] = &[
    ConfigKey::new(
        "default_model",
        "string: a name of [models.NAME]",
        "\"default\" (the [model] table)",
    )
    .doc("The default model when [model] sets nothing: a session starts with it selected."),
    ConfigKey::new(
        "model.provider",
        "string: \"openai\" or \"scripted\"",
        "\"openai\"",
    )
    .flag("--model-script FILE")
    .doc(
        "Who answers: an OpenAI-compatible chat-completions server, or turns replayed from \
              model.script. --model-script sets \"scripted\".",
    ),
    ConfigKey::new("model.base_url", "string: a URL", "unset")
        .env("AGENTD_BASE_URL")
        .doc("The endpoint, up to and excluding /chat/completions."),
    ConfigKey::new("model.model", "string", "unset")
        .env("AGENTD_MODEL")
        .doc("The model name the server knows."),
    ConfigKey::new("model.api_key_env", "string: a variable name", "unset")
        .env("AGENTD_API_KEY_ENV")
        .doc(
            "The name of the environment variable holding the API key, never the key itself; \
              unset for servers that need no key.",
        ),
    ConfigKey::new("model.max_tokens", "integer", "unset")
        .doc("The limit on generated tokens; none is sent when unset."),
    ConfigKey::new(
        "model.max_tokens_field",
        "string: \"auto\", \"max_completion_tokens\" or \"max_tokens\"",
        "\"auto\"",
    )
    .doc("Which request field carries max_tokens; auto follows the provider family."),
    ConfigKey::new(
        "model.send_reasoning",
        "string: \"auto\", \"never\", \"current_turn\", \"tool_turns\" or \"always\"",
        "\"auto\"",
    )
    .doc("Which earlier assistant messages go back to the server with their reasoning."),
    ConfigKey::new("model.temperature", "float", "unset")
        .doc("The sampling temperature; none is sent when unset."),
    ConfigKey::new("model.timeout_secs", "integer: seconds", "unset (120)")
        .doc("The longest silence tolerated while the answer starts or continues."),
    ConfigKey::new("model.max_retries", "integer", "unset (3)")
        .doc("How often a request that failed before any answer arrived is tried again."),
    ConfigKey::new("model.include_usage", "boolean", "unset (false)")
        .doc("Ask the server to report token usage (stream_options.include_usage)."),
    ConfigKey::new("model.script", "string: a path", "unset")
        .flag("--model-script FILE")
        .doc("The turns file of the scripted provider, relative to the file's directory."),
    ConfigKey::new(
        "model.context_window",
        "integer: tokens, at least 1",
        "unset",
    )
    .doc("The tokens the model reads at most; without it the history is never compacted."),
    ConfigKey::new("models.NAME", "table: the keys of [model]", "none")
        .doc("A named model a session may switch to and a persona may name."),
    ConfigKey::new("sandbox.mode", MODE_WORDS, "\"workspace-write\"")
        .env("AGENTD_SANDBOX_MODE")
        .flag("--sandbox-mode MODE")
        .doc(
            "The sandbox mode of new sessions (--sandbox-mode of agentd acp and agentd exec); \
              agentd run takes --mode and is read-only unless this is set.",
        ),
    ConfigKey::new(
        "sandbox.network",
        "string: \"deny\", \"allow\" or \"allow-list\"",
        "\"deny\"",
    )
    .doc(
        "Whether a confined command has the network; allow-list gives it a proxy that reaches \
          the hosts sandbox.allowed_domains names.",
    ),
    ConfigKey::new(
        "sandbox.allowed_domains",
        "array of strings: host names, *.NAME",
        "[]",
    )
    .doc("The hosts the allow-list proxy reaches; only with network = \"allow-list\"."),
    ConfigKey::new(
        "sandbox.denied_domains",
        "array of strings: host names, *.NAME",
        "[]",
    )
    .doc("Hosts refused even when allowed_domains matches them; only with the allow-list."),
    ConfigKey::new("sandbox.allow_local_addresses", "boolean", "false").doc(
        "Whether an allowed name (or a listed address) may lead to this machine itself: \
             loopback, any address of its interfaces, its link; only with the allow-list.",
    ),
    ConfigKey::new(
        "sandbox.backend",
        "string: \"auto\", \"bwrap\", \"landlock\", \"seatbelt\" or \"namespaces\"",
        "\"auto\"",
    )
    .doc("The confinement backend commands ask for."),
    ConfigKey::new(
        "sandbox.writable_roots",
        "array of strings: absolute or ~/ paths",
        "[]",
    )
    .doc("What workspace-write also writes besides the workspace."),
    ConfigKey::new(
        "sandbox.cache",
        "array of strings: \"pip\", \"npm\", \"cargo\" or \"go\"",
        "[]",
    )
    .doc("Tools whose caches workspace-write also writes, as each tool locates them."),
    ConfigKey::new(
        "sandbox.protected",
        "array of strings: relative paths",
        "[]",
    )
    .doc("Subpaths kept read-only inside every writable root, besides .git."),
    ConfigKey::new("sandbox.local_binding", "boolean", "false")
        .doc("Loopback sockets in the command's own, empty network namespace."),
    ConfigKey::new(
        "sandbox.deny_read",
        "array of strings: absolute or ~/ paths",
        "[]",
    )
    .doc("What no confined command may read, list or execute, besides the built-in set."),
    ConfigKey::new(
        "sandbox.lift_deny_read",
        "array of strings: built-in denied reads, as config show lists them",
        "[]",
    )
    .doc("Built-in denied reads (credential stores) that commands may read after all."),
    ConfigKey::new(
        "sandbox.unix_sockets",
        "array of strings: absolute or ~/ paths",
        "[]",
    )
    .doc("The only named Unix sockets a confined command may connect to."),
    ConfigKey::new("sandbox.env.pass", "array of strings: variable names", "[]")
        .doc("Variables every command gets from agentd's own environment."),
    ConfigKey::new("sandbox.env.set", "table of strings", "[]")
        .doc("Variables every command gets with these values; set beats pass for one name."),
    ConfigKey::new("approval.policy", "string: \"ask\" or \"never\"", "\"ask\"")
        .env("AGENTD_APPROVAL_POLICY")
        .doc("ask: permission requests reach the user; never: they are rejected."),
    ConfigKey::new("approval.ask_before", "array of strings: tool names", "[]").doc(
        "Tools that ask the user before every call; mcp__SERVER__TOOL or mcp__SERVER__* \
              for an MCP server's.",
    ),
    ConfigKey::new("helper.path", "string: a path", "unset (searched)")
        .env("AGENTD_HELPER")
        .flag("--helper PATH")
        .doc(
            "The confine-helper binary to start (embedded mode); unset: the one next to agentd, \
              else on PATH.",
        ),
    ConfigKey::new("helper.socket", "string: a path", "unset")
        .flag("--helper-socket PATH")
        .doc("The socket of a confine-helper serving on its own (service mode); not with path."),
    ConfigKey::new("helper.ceiling", "string: a path", "unset")
        .flag("--helper-ceiling PATH")
        .doc("A ceiling file for the helper agentd starts; not with socket."),
    ConfigKey::new("helper.file_io", "string: a path", "unset (searched)")
        .env("AGENTD_FILE_IO")
        .doc(
            "The confine-file-io binary the file tools run confined; unset: the one next to the \
              helper agentd starts, else next to agentd.",
        ),
    ConfigKey::new(
        "session.state_dir",
        "string: a path",
        "$XDG_STATE_HOME/agentd/sessions, else ~/.local/state/agentd/sessions",
    )
    .env("AGENTD_STATE_DIR")
    .flag("--state-dir DIR")
    .doc("Where session logs are kept."),
    ConfigKey::new("session.max_steps", "integer, at least 1", "50")
        .doc("Model requests per prompt before the turn ends with max_turn_requests."),
    ConfigKey::new(
        "compaction.threshold",
        "float: a share of the window",
        "0.8",
    )
    .doc("Compact a history whose estimate exceeds this share of model.context_window."),
    ConfigKey::new("compaction.compact_at", "integer: tokens", "unset")
        .doc("Compact above this many estimated tokens instead; not with threshold."),
    ConfigKey::new("compaction.keep_turns", "integer", "2")
        .doc("The latest turns that stay verbatim."),
    ConfigKey::new("checkpoints.enabled", "boolean", "true")
        .doc("Record the writable roots before and after every turn, for /undo and sessions undo."),
    ConfigKey::new(
        "checkpoints.max_bytes",
        "integer: bytes, at least 1",
        "536870912",
    )
    .doc("File content one checkpoint takes; larger files are left out, with a notice."),
    ConfigKey::new("checkpoints.max_age_days", "integer, at least 1", "30")
        .doc("Checkpoints older than this many days are pruned."),
    ConfigKey::new("checkpoints.max_per_session", "integer, at least 1", "100")
        .doc("Only the newest this many checkpoints of a session are kept."),
    ConfigKey::new("limits.command_timeout_ms", "integer, at least 1", "120000")
        .doc("The timeout of a command that does not ask for its own, in milliseconds."),
    ConfigKey::new("limits.max_processes", "integer, at least 1", "unset").doc(
        "The most tasks (processes and threads) a confined command's tree may have at \
             once; unset, confine-helper's 2048. Its ceiling may lower it.",
    ),
    ConfigKey::new(
        "limits.max_file_size",
        "integer: bytes, at least 1",
        "unset",
    )
    .doc("RLIMIT_FSIZE of every command."),
    ConfigKey::new(
        "limits.max_address_space",
        "integer: bytes, at least 1",
        "unset",
    )
    .doc("RLIMIT_AS of every command."),
    ConfigKey::new("limits.max_memory", "integer: bytes, at least 1", "unset").doc(
        "The most memory a confined command's tree may use at once, where confine-helper \
             can count it (run as root: a cgroup); unset, half of the machine's. Its ceiling \
             may lower it.",
    ),
    ConfigKey::new("agents.NAME.description", "string", "required")
        .doc("What the persona is for; the model reads it."),
    ConfigKey::new("agents.NAME.instructions", "string", "required")
        .doc("The child agent's instructions."),
    ConfigKey::new(
        "agents.NAME.model",
        "string: a name of [models.NAME], or a table with the keys of [model]",
        "unset (the session's model)",
    )
    .doc("The model the persona's children run with."),
    ConfigKey::new(
        "agents.NAME.tools",
        "table: allow, deny",
        "unset (its parent's tools)",
    )
    .doc("The tools a child of the persona has: allow, then deny."),
    ConfigKey::new(
        "agents.NAME.tools.allow",
        "array of strings: tool names",
        "unset",
    )
    .doc("Only these of its parent's tools."),
    ConfigKey::new(
        "agents.NAME.tools.deny",
        "array of strings: tool names",
        "unset",
    )
    .doc("None of these."),
    ConfigKey::new("agents.NAME.max_depth", "integer", "1")
        .doc("The deepest the persona may run (the top level is 0)."),
    ConfigKey::new("mcp.servers", "array of tables", "[]")
        .doc("The MCP servers every session starts, besides those its client gives."),
    ConfigKey::new("mcp.servers.name", "string", "required")
        .doc("Its tools are offered as mcp__NAME__TOOL."),
    ConfigKey::new("mcp.servers.command", "array of strings", "unset")
        .doc("The program and its arguments, run through confine-helper like a command."),
    ConfigKey::new("mcp.servers.env", "table of strings", "none")
        .doc("Variables set for the server only."),
    ConfigKey::new("mcp.servers.url", "string: a URL", "unset").doc(
        "A streamable HTTP server, instead of a command, reached when the network policy \
              allows its host.",
    ),
    ConfigKey::new("mcp.servers.headers", "table of strings", "none")
        .doc("Sent with every request to a url server; never printed."),
];

#[cfg(test)]
#[path = "keys_tests.rs"]
mod tests;
