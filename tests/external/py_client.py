"""An ACP client built on the Python SDK (PyPI agent-client-protocol 0.12.1, `import acp`).

    python3 py_client.py [--permission allow|reject|cancel] [--cwd DIR] -- <agent command...> <prompt>

Starts the agent, runs initialize, session/new and one session/prompt, and prints JSON lines:
initialize, session, update (each session/update), permission (each request and the answer),
done (the stop reason). A failure prints {"event": "error", ...} and exits 1.
"""

import argparse
import asyncio
import json
import os
import sys

import acp
from acp.schema import AllowedOutcome, DeniedOutcome


def emit(event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Client:
    def __init__(self, permission):
        self.permission = permission

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        kinds = ["allow_once", "allow_always"] if self.permission == "allow" else ["reject_once", "reject_always"]
        chosen = None
        if self.permission != "cancel":
            chosen = next((o for kind in kinds for o in options if o.kind == kind), None)
        if chosen is None:
            outcome = DeniedOutcome(outcome="cancelled")
        else:
            outcome = AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        emit({"event": "permission", "toolCall": dump(tool_call), "answered": dump(outcome)})
        return acp.RequestPermissionResponse(outcome=outcome)

    async def session_update(self, session_id, update, **kwargs):
        emit({"event": "update", "sessionId": session_id, "update": dump(update)})


async def run(args):
    command, *command_args = args.agent
    async with acp.spawn_agent_process(
        Client(args.permission),
        command,
        *command_args,
        env=dict(os.environ),
        cwd=args.cwd,
        transport_kwargs={"stderr": None},
    ) as (conn, _process):
        init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        emit({"event": "initialize", "result": dump(init)})
        session = await conn.new_session(cwd=args.cwd, mcp_servers=[])
        emit({"event": "session", "sessionId": session.session_id})
        answer = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block(args.prompt)])
        emit({"event": "done", "stopReason": answer.stop_reason})


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--permission", choices=["allow", "reject", "cancel"], default="allow")
    parser.add_argument("--cwd", default=os.getcwd())
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    if len(rest) < 2:
        parser.error("missing -- <agent command...> <prompt>")
    args.agent, args.prompt = rest[:-1], rest[-1]
    try:
        asyncio.run(run(args))
    except Exception as error:  # noqa: BLE001 - every failure becomes one event line
        emit({"event": "error", "type": type(error).__name__, "message": str(error)})
        sys.exit(1)


if __name__ == "__main__":
    main()
