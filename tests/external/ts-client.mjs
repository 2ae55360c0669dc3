// An ACP client built on the TypeScript SDK: starts an agent, opens a session, sends one prompt
// and prints what happened as NDJSON on stdout, one event a line.
//
//   node ts-client.mjs [--permission allow|reject|cancel] [--set id=value]... [--cancel-after MS]
//                      [--cwd DIR] -- <agent command...> <prompt>
//
// Events: initialize (the agent's answer), session, config (after each --set), update (each
// session/update), permission (each request and the answer given), done (the stop reason).
// A failure prints {"event":"error",...} and exits 1. At the end the agent's stdin is closed and
// the agent gets a few seconds to exit on its own before it is killed ("agent-exit" tells which).
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

function usage(message) {
  process.stderr.write(`ts-client: ${message}\n`);
  process.stderr.write(
    "usage: node ts-client.mjs [--permission allow|reject|cancel] [--set id=value]... [--cancel-after MS] [--cwd DIR] -- <agent command...> <prompt>\n",
  );
  process.exit(2);
}

const argv = process.argv.slice(2);
let permission = "allow";
let cancelAfter = null;
let cwd = process.cwd();
const sets = [];
while (argv.length > 0 && argv[0] !== "--") {
  const flag = argv.shift();
  const value = argv.shift();
  if (value === undefined) usage(`${flag} needs a value`);
  if (flag === "--permission") {
    if (!["allow", "reject", "cancel"].includes(value)) usage(`bad --permission ${value}`);
    permission = value;
  } else if (flag === "--set") {
    const eq = value.indexOf("=");
    if (eq < 1) usage(`--set wants id=value, got ${value}`);
    sets.push([value.slice(0, eq), value.slice(eq + 1)]);
  } else if (flag === "--cancel-after") {
    cancelAfter = Number(value);
    if (!Number.isFinite(cancelAfter) || cancelAfter < 0) usage(`bad --cancel-after ${value}`);
  } else if (flag === "--cwd") {
    cwd = value;
  } else {
    usage(`unknown option ${flag}`);
  }
}
if (argv.shift() !== "--" || argv.length < 2) usage("missing -- <agent command...> <prompt>");
const promptText = argv.pop();
const [cmd, ...cmdArgs] = argv;

const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);

const child = spawn(cmd, cmdArgs, { cwd, stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
child.on("error", (error) => {
  emit({ event: "error", message: `cannot start the agent: ${error.message}` });
  process.exit(1);
});

const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const app = acp
  .client({ name: "ts-client" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    emit({ event: "update", sessionId: params.sessionId, update: params.update });
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    const kinds = permission === "allow" ? ["allow_once", "allow_always"] : ["reject_once", "reject_always"];
    const option =
      permission === "cancel"
        ? undefined
        : kinds.map((kind) => params.options.find((o) => o.kind === kind)).find(Boolean);
    const outcome = option ? { outcome: "selected", optionId: option.optionId } : { outcome: "cancelled" };
    emit({ event: "permission", toolCall: params.toolCall, options: params.options, answered: outcome });
    return { outcome };
  });

async function finish(code) {
  child.stdin.end();
  const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
  const { code: exitCode, signal } = await exited;
  clearTimeout(timer);
  emit({ event: "agent-exit", code: exitCode, signal });
  process.exit(code);
}

let cancelTimer;
try {
  const result = await app.connectWith(stream, async (ctx) => {
    const init = await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
      clientInfo: { name: "ts-client", version: "1" },
    });
    emit({ event: "initialize", result: init });
    const session = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
    emit({ event: "session", sessionId: session.sessionId, configOptions: session.configOptions ?? null });
    for (const [configId, value] of sets) {
      const answer = await ctx.request(acp.methods.agent.session.setConfigOption, {
        sessionId: session.sessionId,
        configId,
        value,
      });
      emit({ event: "config", configOptions: answer.configOptions });
    }
    if (cancelAfter !== null) {
      cancelTimer = setTimeout(() => {
        emit({ event: "cancel" });
        ctx.notify(acp.methods.agent.session.cancel, { sessionId: session.sessionId });
      }, cancelAfter);
    }
    try {
      return await ctx.request(acp.methods.agent.session.prompt, {
        sessionId: session.sessionId,
        prompt: [{ type: "text", text: promptText }],
      });
    } finally {
      clearTimeout(cancelTimer);
    }
  });
  emit({ event: "done", stopReason: result.stopReason });
  await finish(0);
} catch (error) {
  emit({ event: "error", message: String(error?.message ?? error), code: error?.code ?? null, data: error?.data ?? null });
  await finish(1);
}
