"""An ACP client built on the Python SDK (PyPI agent-client-protocol 0.12.1, `import acp`).

    python3 py_client.py [--steps JSON] [--cwd DIR] -- <agent command...>

Starts the agent, runs initialize and session/new, then a list of steps, and prints what
happened as JSON lines on stdout. --steps is a JSON array, run in order (default: one prompt
"hello", answered allow):

    {"set": ID, "value": V}        session/set_config_option
    {"prompt": TEXT, "permission": "allow"|"reject"|"cancel", "cancelOn": KIND, "cancelWhen": FILE}
                                   session/prompt; each session/request_permission of this prompt
                                   is answered with the option of kind allow_once (allow) or
                                   reject_once (reject), else cancelled; with cancelOn,
                                   session/cancel is sent after the first session/update of that
                                   kind (e.g. "tool_call"), and with cancelWhen only once FILE
                                   exists in the session's directory (a marker the command writes
                                   when it runs; looked for until it appears, an error if it has
                                   not within 30 s)
    {"checkpoint": NAME}           prints a checkpoint event and waits for a line on this client's
                                   stdin (or its end), so that a caller can look at the machine
                                   between two steps
    {"reload": true}               closes the agent's stdin, waits for it to exit, starts the
                                   same command again, initializes it and sends session/load
                                   for the same session

A prompt without "permission" answers every permission request cancelled.

Events, each with the index of its step ("step", null before the first): initialize (per agent
process), session, config, update (each session/update, replayed ones included), permission
(each request and the answer given), cancel, checkpoint, done (a prompt's stop reason), load (the
session/load answer), agent-exit (how each agent process ended). A failure prints
{"event": "error", ...} and exits 1. The same steps and events as ts-client.mjs.
"""

import argparse
import asyncio
import ctypes
import ctypes.util
import json
import os
import sys

import acp
from acp.schema import AllowedOutcome, DeniedOutcome

# The index of the running step, stamped on every event.
CURRENT = {"step": None}


def emit(event):
    event["step"] = CURRENT["step"]
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


# How long a cancelWhen marker may take to appear before the step fails: a liveness bound.
MARKER_LIMIT = 30.0
# inotify(7), through libc: the standard library has no file watch. Flags from sys/inotify.h.
LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
IN_ATTRIB = 0x4
IN_MOVED_TO = 0x80
IN_CREATE = 0x100


async def appears(path):
    """Returns once `path` exists; raises if it has not appeared within MARKER_LIMIT seconds.

    Its directory is watched (inotify) before `path` is looked for, and looked for again at
    each change in it: no appearance is missed, and nothing waits on a timer but the bound."""
    fd = LIBC.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1")
    loop = asyncio.get_running_loop()
    changed = asyncio.Event()

    def readable():
        try:
            os.read(fd, 64 * 1024)
        except BlockingIOError:
            pass
        changed.set()

    try:
        mask = IN_CREATE | IN_MOVED_TO | IN_ATTRIB
        if LIBC.inotify_add_watch(fd, os.fsencode(os.path.dirname(path)), mask) < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {os.path.dirname(path)}")
        loop.add_reader(fd, readable)
        deadline = loop.time() + MARKER_LIMIT
        while not os.path.exists(path):
            changed.clear()
            left = deadline - loop.time()
            try:
                await asyncio.wait_for(changed.wait(), max(left, 0))
            except asyncio.TimeoutError:
                if not os.path.exists(path):
                    raise TimeoutError(f"{path} did not appear within {MARKER_LIMIT} s")
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Client:
    """Answers the agent's requests for the prompt step that is running."""

    def __init__(self, cwd):
        self.cwd = cwd
        self.step = None
        self.conn = None
        self.session_id = None
        self.cancel_armed = False
        self.cancel_task = None

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        permission = (self.step or {}).get("permission", "cancel")
        kind = {"allow": "allow_once", "reject": "reject_once"}.get(permission)
        chosen = next((o for o in options if kind is not None and o.kind == kind), None)
        if chosen is None:
            outcome = DeniedOutcome(outcome="cancelled")
        else:
            outcome = AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        emit(
            {
                "event": "permission",
                "toolCall": dump(tool_call),
                "options": [dump(o) for o in options],
                "answered": dump(outcome),
            }
        )
        return acp.RequestPermissionResponse(outcome=outcome)

    async def session_update(self, session_id, update, **kwargs):
        emit({"event": "update", "sessionId": session_id, "update": dump(update)})
        kind = dump(update).get("sessionUpdate")
        if self.cancel_armed and kind == self.step.get("cancelOn"):
            self.cancel_armed = False
            self.cancel_task = asyncio.create_task(self.cancel_when(self.step.get("cancelWhen")))

    async def cancel_when(self, marker):
        if marker is not None:
            try:
                await appears(os.path.join(self.cwd, marker))
            except TimeoutError as error:
                emit({"event": "error", "type": type(error).__name__, "message": str(error)})
                os._exit(1)
        emit({"event": "cancel"})
        await self.conn.cancel(session_id=self.session_id)


async def run_steps(client, conn, steps, first):
    """Runs steps from `first` on one agent; returns the index of the reload step that ends it."""
    for index in range(first, len(steps)):
        CURRENT["step"] = index
        step = steps[index]
        if step.get("reload"):
            return index
        if "set" in step:
            answer = await conn.set_config_option(config_id=step["set"], session_id=client.session_id, value=step["value"])
            emit({"event": "config", "configOptions": [dump(o) for o in answer.config_options]})
            continue
        if "checkpoint" in step:
            emit({"event": "checkpoint", "name": step["checkpoint"]})
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            continue
        client.step = step
        client.cancel_armed = "cancelOn" in step
        try:
            answer = await conn.prompt(session_id=client.session_id, prompt=[acp.text_block(step["prompt"])])
            emit({"event": "done", "stopReason": answer.stop_reason})
        finally:
            if client.cancel_task is not None:
                client.cancel_task.cancel()
                client.cancel_task = None
            client.step = None
            client.cancel_armed = False
    return len(steps)


async def with_agent(args, client, agent, body):
    """Starts the agent, initializes it and runs `body(conn)`; reports how the agent ended."""
    command, *command_args = args.agent
    process = None
    try:
        async with acp.spawn_agent_process(
            client,
            command,
            *command_args,
            env=dict(os.environ),
            cwd=args.cwd,
            transport_kwargs={"stderr": None, "shutdown_timeout": 5.0},
        ) as (conn, process):
            client.conn = conn
            init = await conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_info=acp.schema.Implementation(name="py-client", version="1"),
            )
            emit({"event": "initialize", "agent": agent, "result": dump(init)})
            return await body(conn)
    finally:
        if process is not None:
            code = process.returncode
            emit(
                {
                    "event": "agent-exit",
                    "agent": agent,
                    "code": code if code is not None and code >= 0 else None,
                    "signal": -code if code is not None and code < 0 else None,
                }
            )


async def run(args):
    client = Client(args.cwd)

    async def first(conn):
        session = await conn.new_session(cwd=args.cwd, mcp_servers=[])
        client.session_id = session.session_id
        options = [dump(o) for o in session.config_options] if session.config_options else None
        emit({"event": "session", "sessionId": session.session_id, "configOptions": options})
        return await run_steps(client, conn, args.steps, 0)

    following = await with_agent(args, client, 0, first)
    agent = 1
    while following < len(args.steps):
        reload = following

        async def again(conn, reload=reload):
            CURRENT["step"] = reload
            loaded = await conn.load_session(cwd=args.cwd, session_id=client.session_id, mcp_servers=[])
            options = [dump(o) for o in loaded.config_options] if loaded and loaded.config_options else None
            emit({"event": "load", "sessionId": client.session_id, "configOptions": options})
            return await run_steps(client, conn, args.steps, reload + 1)

        following = await with_agent(args, client, agent, again)
        agent += 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", default='[{"prompt": "hello", "permission": "allow"}]')
    parser.add_argument("--cwd", default=os.getcwd())
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    if len(rest) < 1:
        parser.error("missing -- <agent command...>")
    args.agent = rest
    try:
        args.steps = json.loads(args.steps)
    except ValueError as error:
        parser.error(f"--steps is not JSON: {error}")
    if not isinstance(args.steps, list):
        parser.error("--steps must be a JSON array")
    for step in args.steps:
        if not ("set" in step or "prompt" in step or "checkpoint" in step or step.get("reload") is True):
            parser.error(f"unknown step {json.dumps(step)}")
        if "prompt" in step and step.get("permission", "cancel") not in ("allow", "reject", "cancel"):
            parser.error(f"bad permission in {json.dumps(step)}")
    try:
        asyncio.run(run(args))
    except Exception as error:  # noqa: BLE001 - every failure becomes one event line
        emit({"event": "error", "type": type(error).__name__, "message": str(error)})
        sys.exit(1)


if __name__ == "__main__":
    main()
