# Generated from the code by `cargo run -p agentd-docgen`; do not edit by hand.
# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_agentd_global_optspecs
    string join \n h/help V/version
end

function __fish_agentd_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_agentd_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_agentd_using_subcommand
    set -l cmd (__fish_agentd_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c agentd -n "__fish_agentd_needs_command" -s h -l help -d 'Print help'
complete -c agentd -n "__fish_agentd_needs_command" -s V -l version -d 'Print version'
complete -c agentd -n "__fish_agentd_needs_command" -f -a "run" -d 'Run one command through confine-helper and exit with its status'
complete -c agentd -n "__fish_agentd_needs_command" -f -a "config" -d 'Show agentd\'s configuration'
complete -c agentd -n "__fish_agentd_needs_command" -f -a "sessions" -d 'List and show the sessions agentd has recorded'
complete -c agentd -n "__fish_agentd_needs_command" -f -a "acp" -d 'Serve the Agent Client Protocol (v1) on stdin/stdout, for an editor such as Zed or any ACP client. Logs go to stderr'
complete -c agentd -n "__fish_agentd_needs_command" -f -a "exec" -d 'Run one prompt headless, through the agent `agentd acp` serves, and exit'
complete -c agentd -n "__fish_agentd_needs_command" -f -a "demo" -d 'Run a short scripted session end to end and print what happened: a file read, a write inside the workspace, and a write outside it that the sandbox refuses. Exits 0 when everything happened as it should'
complete -c agentd -n "__fish_agentd_needs_command" -f -a "probe" -d 'Ask confine-helper which sandbox backends work on this machine, and why not: every backend\'s verdict (probed afresh), the Landlock ABI, the backend `auto` selects and the ceiling as the helper enforces it'
complete -c agentd -n "__fish_agentd_needs_command" -f -a "completions" -d 'Print the completion script for a shell (the one the Debian package installs)'
complete -c agentd -n "__fish_agentd_needs_command" -f -a "man" -d 'Print a manual page (roff), agentd\'s or a subcommand\'s, or write them all into a directory (the pages the Debian package installs)'
complete -c agentd -n "__fish_agentd_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agentd -n "__fish_agentd_using_subcommand run" -l mode -d 'How far the command may reach [default: sandbox.mode or AGENTD_SANDBOX_MODE when set, else read-only]' -r -f -a "read-only\t''
workspace-write\t''
danger-full-access\t''"
complete -c agentd -n "__fish_agentd_using_subcommand run" -l workspace -d 'The workspace root [default: the current directory]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand run" -l cwd -d 'Where the command runs [default: the current directory when it lies inside the workspace, else the workspace]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand run" -l network -d 'Whether the command may use the network [default: sandbox.network when set, else deny]' -r -f -a "deny\t''
allow\t''"
complete -c agentd -n "__fish_agentd_using_subcommand run" -l backend -d 'Which confinement backend to use [default: sandbox.backend when set, else auto]' -r -f -a "auto\t''
bwrap\t''
landlock\t''
seatbelt\t''
namespaces\t''"
complete -c agentd -n "__fish_agentd_using_subcommand run" -l timeout -d 'Terminate the command after this many seconds (exit status 124)' -r
complete -c agentd -n "__fish_agentd_using_subcommand run" -l writable-root -d 'Also let the command write DIR (workspace-write); repeatable' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand run" -l protect -d 'Keep SUBPATH read-only inside every writable root; repeatable' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand run" -l deny-read -d 'Deny reading PATH in every confined mode; repeatable' -r
complete -c agentd -n "__fish_agentd_using_subcommand run" -l unix-socket -d 'Let the command connect to the named Unix socket PATH; repeatable' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand run" -l allow-domain -d 'Let the command reach DOMAIN (`*.example.com`: its sub-domains) through the allow-list proxy, with no other network; repeatable. Replaces `[sandbox] allowed_domains`' -r
complete -c agentd -n "__fish_agentd_using_subcommand run" -l deny-domain -d 'Refuse DOMAIN even when --allow-domain allows it; repeatable' -r
complete -c agentd -n "__fish_agentd_using_subcommand run" -l max-processes -d 'Cap the tasks (processes and threads) the command\'s tree may have at once; confined modes only' -r
complete -c agentd -n "__fish_agentd_using_subcommand run" -l max-file-size -d 'Limit the size of any file the command writes, in bytes (RLIMIT_FSIZE)' -r
complete -c agentd -n "__fish_agentd_using_subcommand run" -l max-address-space -d 'Limit the command\'s virtual memory, in bytes (RLIMIT_AS)' -r
complete -c agentd -n "__fish_agentd_using_subcommand run" -l max-memory -d 'Cap the memory the command\'s tree may use at once, in bytes; confined modes only' -r
complete -c agentd -n "__fish_agentd_using_subcommand run" -l env -d 'Set a variable for the command; repeatable, a later one wins' -r
complete -c agentd -n "__fish_agentd_using_subcommand run" -l helper -d 'The confine-helper binary to start (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand run" -l helper-socket -d 'Connect to a confine-helper serving on this socket instead of starting one (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand run" -l helper-ceiling -d 'Start confine-helper with this ceiling file, which can only narrow what it allows' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand run" -l config -d 'The configuration file, which must exist [default: $XDG_CONFIG_HOME/agentd/agentd.toml, else ~/.config/agentd/agentd.toml, if present]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand run" -l local-binding -d 'Allow loopback sockets inside the sandbox\'s own network namespace (namespaces or bwrap only)'
complete -c agentd -n "__fish_agentd_using_subcommand run" -l allow-local-addresses -d 'Let an allowed domain (or a listed address) lead to this machine itself: loopback, any address of its interfaces, its link-local neighbours'
complete -c agentd -n "__fish_agentd_using_subcommand run" -l json -d 'Print the facts as one JSON object on the last line of stderr'
complete -c agentd -n "__fish_agentd_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agentd -n "__fish_agentd_using_subcommand config; and not __fish_seen_subcommand_from show help" -s h -l help -d 'Print help'
complete -c agentd -n "__fish_agentd_using_subcommand config; and not __fish_seen_subcommand_from show help" -f -a "show" -d 'Print every effective setting and where it comes from (default, file, environment or flag), one per line'
complete -c agentd -n "__fish_agentd_using_subcommand config; and not __fish_seen_subcommand_from show help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agentd -n "__fish_agentd_using_subcommand config; and __fish_seen_subcommand_from show" -l helper -d 'The confine-helper binary to start (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand config; and __fish_seen_subcommand_from show" -l helper-socket -d 'Connect to a confine-helper serving on this socket instead of starting one (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand config; and __fish_seen_subcommand_from show" -l helper-ceiling -d 'Start confine-helper with this ceiling file, which can only narrow what it allows' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand config; and __fish_seen_subcommand_from show" -l config -d 'The configuration file, which must exist [default: $XDG_CONFIG_HOME/agentd/agentd.toml, else ~/.config/agentd/agentd.toml, if present]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand config; and __fish_seen_subcommand_from show" -l state-dir -d 'Keep session logs in DIR (overrides AGENTD_STATE_DIR and session.state_dir) [default: $XDG_STATE_HOME/agentd/sessions]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand config; and __fish_seen_subcommand_from show" -l model-script -d 'Answer prompts with the turns scripted in FILE instead of asking a model server (model.provider = "scripted", model.script = FILE)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand config; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agentd -n "__fish_agentd_using_subcommand config; and __fish_seen_subcommand_from help" -f -a "show" -d 'Print every effective setting and where it comes from (default, file, environment or flag), one per line'
complete -c agentd -n "__fish_agentd_using_subcommand config; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and not __fish_seen_subcommand_from list show audit undo help" -s h -l help -d 'Print help'
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and not __fish_seen_subcommand_from list show audit undo help" -f -a "list" -d 'List the sessions in the state directory, one per line, most recently updated first: id, last update (UTC), turns, working directory, first prompt'
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and not __fish_seen_subcommand_from list show audit undo help" -f -a "show" -d 'Print the transcript of one session'
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and not __fish_seen_subcommand_from list show audit undo help" -f -a "audit" -d 'Print the audit trail of one session: every tool call in order (the child agents\' too) with its time (UTC), agent, tool, command or path, the mode it ran under and why, the approval asked and what decided it, the sandbox\'s backend, layers and enforcement, denials, how it ended and how long it took'
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and not __fish_seen_subcommand_from list show audit undo help" -f -a "undo" -d 'Restore the session\'s workspace (and its other writable roots) to how it was before a turn, from its checkpoints: prints the changes and their diff first, then restores them confined, as a workspace-write command would write. Exits non-zero when a path still differs afterwards'
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and not __fish_seen_subcommand_from list show audit undo help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from list" -l helper -d 'The confine-helper binary to start (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from list" -l helper-socket -d 'Connect to a confine-helper serving on this socket instead of starting one (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from list" -l helper-ceiling -d 'Start confine-helper with this ceiling file, which can only narrow what it allows' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from list" -l config -d 'The configuration file, which must exist [default: $XDG_CONFIG_HOME/agentd/agentd.toml, else ~/.config/agentd/agentd.toml, if present]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from list" -l state-dir -d 'Keep session logs in DIR (overrides AGENTD_STATE_DIR and session.state_dir) [default: $XDG_STATE_HOME/agentd/sessions]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from list" -l model-script -d 'Answer prompts with the turns scripted in FILE instead of asking a model server (model.provider = "scripted", model.script = FILE)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from show" -l helper -d 'The confine-helper binary to start (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from show" -l helper-socket -d 'Connect to a confine-helper serving on this socket instead of starting one (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from show" -l helper-ceiling -d 'Start confine-helper with this ceiling file, which can only narrow what it allows' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from show" -l config -d 'The configuration file, which must exist [default: $XDG_CONFIG_HOME/agentd/agentd.toml, else ~/.config/agentd/agentd.toml, if present]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from show" -l state-dir -d 'Keep session logs in DIR (overrides AGENTD_STATE_DIR and session.state_dir) [default: $XDG_STATE_HOME/agentd/sessions]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from show" -l model-script -d 'Answer prompts with the turns scripted in FILE instead of asking a model server (model.provider = "scripted", model.script = FILE)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from audit" -l helper -d 'The confine-helper binary to start (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from audit" -l helper-socket -d 'Connect to a confine-helper serving on this socket instead of starting one (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from audit" -l helper-ceiling -d 'Start confine-helper with this ceiling file, which can only narrow what it allows' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from audit" -l config -d 'The configuration file, which must exist [default: $XDG_CONFIG_HOME/agentd/agentd.toml, else ~/.config/agentd/agentd.toml, if present]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from audit" -l state-dir -d 'Keep session logs in DIR (overrides AGENTD_STATE_DIR and session.state_dir) [default: $XDG_STATE_HOME/agentd/sessions]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from audit" -l model-script -d 'Answer prompts with the turns scripted in FILE instead of asking a model server (model.provider = "scripted", model.script = FILE)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from audit" -l json -d 'Print one JSON document: an array of entries, each with its shape\'s version `v` (RFC 0019)'
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from audit" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from undo" -l turn -d 'Restore to before this turn (default: the last turn not yet undone that has a checkpoint)' -r
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from undo" -l helper -d 'The confine-helper binary to start (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from undo" -l helper-socket -d 'Connect to a confine-helper serving on this socket instead of starting one (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from undo" -l helper-ceiling -d 'Start confine-helper with this ceiling file, which can only narrow what it allows' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from undo" -l config -d 'The configuration file, which must exist [default: $XDG_CONFIG_HOME/agentd/agentd.toml, else ~/.config/agentd/agentd.toml, if present]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from undo" -l state-dir -d 'Keep session logs in DIR (overrides AGENTD_STATE_DIR and session.state_dir) [default: $XDG_STATE_HOME/agentd/sessions]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from undo" -l model-script -d 'Answer prompts with the turns scripted in FILE instead of asking a model server (model.provider = "scripted", model.script = FILE)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from undo" -l dry-run -d 'Print what would change, and change nothing'
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from undo" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the sessions in the state directory, one per line, most recently updated first: id, last update (UTC), turns, working directory, first prompt'
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from help" -f -a "show" -d 'Print the transcript of one session'
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from help" -f -a "audit" -d 'Print the audit trail of one session: every tool call in order (the child agents\' too) with its time (UTC), agent, tool, command or path, the mode it ran under and why, the approval asked and what decided it, the sandbox\'s backend, layers and enforcement, denials, how it ended and how long it took'
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from help" -f -a "undo" -d 'Restore the session\'s workspace (and its other writable roots) to how it was before a turn, from its checkpoints: prints the changes and their diff first, then restores them confined, as a workspace-write command would write. Exits non-zero when a path still differs afterwards'
complete -c agentd -n "__fish_agentd_using_subcommand sessions; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agentd -n "__fish_agentd_using_subcommand acp" -l helper -d 'The confine-helper binary to start (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand acp" -l helper-socket -d 'Connect to a confine-helper serving on this socket instead of starting one (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand acp" -l helper-ceiling -d 'Start confine-helper with this ceiling file, which can only narrow what it allows' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand acp" -l config -d 'The configuration file, which must exist [default: $XDG_CONFIG_HOME/agentd/agentd.toml, else ~/.config/agentd/agentd.toml, if present]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand acp" -l state-dir -d 'Keep session logs in DIR (overrides AGENTD_STATE_DIR and session.state_dir) [default: $XDG_STATE_HOME/agentd/sessions]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand acp" -l model-script -d 'Answer prompts with the turns scripted in FILE instead of asking a model server (model.provider = "scripted", model.script = FILE)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand acp" -l sandbox-mode -d 'The sandbox mode of new sessions (overrides AGENTD_SANDBOX_MODE and sandbox.mode)' -r -f -a "read-only\t''
workspace-write\t''
danger-full-access\t''"
complete -c agentd -n "__fish_agentd_using_subcommand acp" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agentd -n "__fish_agentd_using_subcommand exec" -l helper -d 'The confine-helper binary to start (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand exec" -l helper-socket -d 'Connect to a confine-helper serving on this socket instead of starting one (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand exec" -l helper-ceiling -d 'Start confine-helper with this ceiling file, which can only narrow what it allows' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand exec" -l config -d 'The configuration file, which must exist [default: $XDG_CONFIG_HOME/agentd/agentd.toml, else ~/.config/agentd/agentd.toml, if present]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand exec" -l state-dir -d 'Keep session logs in DIR (overrides AGENTD_STATE_DIR and session.state_dir) [default: $XDG_STATE_HOME/agentd/sessions]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand exec" -l model-script -d 'Answer prompts with the turns scripted in FILE instead of asking a model server (model.provider = "scripted", model.script = FILE)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand exec" -l sandbox-mode -d 'The sandbox mode of the session (overrides AGENTD_SANDBOX_MODE and sandbox.mode)' -r -f -a "read-only\t''
workspace-write\t''
danger-full-access\t''"
complete -c agentd -n "__fish_agentd_using_subcommand exec" -l cwd -d 'The session\'s working directory, its workspace [default: the current directory]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand exec" -l approve -d 'Which permission requests to allow, once: none; escalations (a command asking for a wider sandbox mode); all. The others are rejected' -r -f -a "none\t''
escalations\t''
all\t''"
complete -c agentd -n "__fish_agentd_using_subcommand exec" -l json -d 'Print NDJSON on stdout: the params of every session/update, each permission request with its answer, and last {"stopReason": ...} or {"error": ...}'
complete -c agentd -n "__fish_agentd_using_subcommand exec" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agentd -n "__fish_agentd_using_subcommand demo" -l helper -d 'The confine-helper binary to start (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand demo" -l helper-socket -d 'Connect to a confine-helper serving on this socket instead of starting one (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand demo" -l helper-ceiling -d 'Start confine-helper with this ceiling file, which can only narrow what it allows' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand demo" -l config -d 'The configuration file, which must exist [default: $XDG_CONFIG_HOME/agentd/agentd.toml, else ~/.config/agentd/agentd.toml, if present]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand demo" -l sandbox-mode -d 'The sandbox mode of the demo session' -r -f -a "read-only\t''
workspace-write\t''
danger-full-access\t''"
complete -c agentd -n "__fish_agentd_using_subcommand demo" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agentd -n "__fish_agentd_using_subcommand probe" -l helper -d 'The confine-helper binary to start (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand probe" -l helper-socket -d 'Connect to a confine-helper serving on this socket instead of starting one (overrides AGENTD_HELPER, helper.path and helper.socket)' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand probe" -l helper-ceiling -d 'Start confine-helper with this ceiling file, which can only narrow what it allows' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand probe" -l config -d 'The configuration file, which must exist [default: $XDG_CONFIG_HOME/agentd/agentd.toml, else ~/.config/agentd/agentd.toml, if present]' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand probe" -l json -d 'Print one JSON object instead of text'
complete -c agentd -n "__fish_agentd_using_subcommand probe" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agentd -n "__fish_agentd_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agentd -n "__fish_agentd_using_subcommand man" -l dir -d 'Write every page into DIR (made if missing) as agentd.1, agentd-run.1, ... instead: with DIR `~/.local/share/man/man1`, `man agentd-run` finds them' -r -F
complete -c agentd -n "__fish_agentd_using_subcommand man" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agentd -n "__fish_agentd_using_subcommand help; and not __fish_seen_subcommand_from run config sessions acp exec demo probe completions man help" -f -a "run" -d 'Run one command through confine-helper and exit with its status'
complete -c agentd -n "__fish_agentd_using_subcommand help; and not __fish_seen_subcommand_from run config sessions acp exec demo probe completions man help" -f -a "config" -d 'Show agentd\'s configuration'
complete -c agentd -n "__fish_agentd_using_subcommand help; and not __fish_seen_subcommand_from run config sessions acp exec demo probe completions man help" -f -a "sessions" -d 'List and show the sessions agentd has recorded'
complete -c agentd -n "__fish_agentd_using_subcommand help; and not __fish_seen_subcommand_from run config sessions acp exec demo probe completions man help" -f -a "acp" -d 'Serve the Agent Client Protocol (v1) on stdin/stdout, for an editor such as Zed or any ACP client. Logs go to stderr'
complete -c agentd -n "__fish_agentd_using_subcommand help; and not __fish_seen_subcommand_from run config sessions acp exec demo probe completions man help" -f -a "exec" -d 'Run one prompt headless, through the agent `agentd acp` serves, and exit'
complete -c agentd -n "__fish_agentd_using_subcommand help; and not __fish_seen_subcommand_from run config sessions acp exec demo probe completions man help" -f -a "demo" -d 'Run a short scripted session end to end and print what happened: a file read, a write inside the workspace, and a write outside it that the sandbox refuses. Exits 0 when everything happened as it should'
complete -c agentd -n "__fish_agentd_using_subcommand help; and not __fish_seen_subcommand_from run config sessions acp exec demo probe completions man help" -f -a "probe" -d 'Ask confine-helper which sandbox backends work on this machine, and why not: every backend\'s verdict (probed afresh), the Landlock ABI, the backend `auto` selects and the ceiling as the helper enforces it'
complete -c agentd -n "__fish_agentd_using_subcommand help; and not __fish_seen_subcommand_from run config sessions acp exec demo probe completions man help" -f -a "completions" -d 'Print the completion script for a shell (the one the Debian package installs)'
complete -c agentd -n "__fish_agentd_using_subcommand help; and not __fish_seen_subcommand_from run config sessions acp exec demo probe completions man help" -f -a "man" -d 'Print a manual page (roff), agentd\'s or a subcommand\'s, or write them all into a directory (the pages the Debian package installs)'
complete -c agentd -n "__fish_agentd_using_subcommand help; and not __fish_seen_subcommand_from run config sessions acp exec demo probe completions man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agentd -n "__fish_agentd_using_subcommand help; and __fish_seen_subcommand_from config" -f -a "show" -d 'Print every effective setting and where it comes from (default, file, environment or flag), one per line'
complete -c agentd -n "__fish_agentd_using_subcommand help; and __fish_seen_subcommand_from sessions" -f -a "list" -d 'List the sessions in the state directory, one per line, most recently updated first: id, last update (UTC), turns, working directory, first prompt'
complete -c agentd -n "__fish_agentd_using_subcommand help; and __fish_seen_subcommand_from sessions" -f -a "show" -d 'Print the transcript of one session'
complete -c agentd -n "__fish_agentd_using_subcommand help; and __fish_seen_subcommand_from sessions" -f -a "audit" -d 'Print the audit trail of one session: every tool call in order (the child agents\' too) with its time (UTC), agent, tool, command or path, the mode it ran under and why, the approval asked and what decided it, the sandbox\'s backend, layers and enforcement, denials, how it ended and how long it took'
complete -c agentd -n "__fish_agentd_using_subcommand help; and __fish_seen_subcommand_from sessions" -f -a "undo" -d 'Restore the session\'s workspace (and its other writable roots) to how it was before a turn, from its checkpoints: prints the changes and their diff first, then restores them confined, as a workspace-write command would write. Exits non-zero when a path still differs afterwards'
