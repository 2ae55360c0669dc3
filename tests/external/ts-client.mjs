// An ACP client built on the TypeScript SDK (@agentclientprotocol/sdk 2.4.0): starts an agent,
// opens a session, runs a list of steps and prints what happened as NDJSON on stdout, one event
// a line.
//
//   node ts-client.mjs [--steps JSON] [--cwd DIR] -- <agent command...>
//
// --steps is a JSON array, run in order (default: one prompt "hello", answered allow):
//   {"set": ID, "value": V}            session/set_config_option
//   {"prompt": TEXT, "permission": "allow"|"reject"|"cancel",
//    "cancelOn": KIND, "cancelWhen": FILE}
//                                      session/prompt; each session/request_permission of this
//                                      prompt is answered with the option of kind allow_once
//                                      (allow) or reject_once (reject), else cancelled; with
//                                      cancelOn, session/cancel is sent after the first
//                                      session/update of that kind (e.g. "tool_call"), and with
//                                      cancelWhen only once FILE exists in the session's
//                                      directory (a marker the command writes when it runs;
//                                      watched, never waited for by time: an error if it has
//                                      not appeared within 30 s)
//   {"checkpoint": NAME}               prints a checkpoint event and waits for a line on this
//                                      client's stdin (or its end), so that a caller can look at
//                                      the machine between two steps
//   {"reload": true}                   closes the agent's stdin, waits for it to exit, starts
//                                      the same command again, initializes it and sends
//                                      session/load for the same session
// A prompt without "permission" answers every permission request cancelled.
//
// Events, each with the index of its step ("step", null before the first): initialize (the
// agent's answer, per agent process), session, config (after each set), update (each
// session/update, replayed ones included), permission (each request and the answer given),
// cancel (when session/cancel is sent), checkpoint, done (a prompt's stop reason), load (the
// session/load answer), agent-exit (how each agent process ended: it gets a few seconds to
// exit on its own once its stdin is closed, then is killed). A failure prints
// {"event":"error",...} and exits 1.
import { spawn } from "node:child_process";
import { existsSync, watch } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

function usage(message) {
  process.stderr.write(`ts-client: ${message}\n`);
  process.stderr.write("usage: node ts-client.mjs [--steps JSON] [--cwd DIR] -- <agent command...>\n");
  process.exit(2);
}

const argv = process.argv.slice(2);
let cwd = process.cwd();
let steps = [{ prompt: "hello", permission: "allow" }];
while (argv.length > 0 && argv[0] !== "--") {
  const flag = argv.shift();
  const value = argv.shift();
  if (value === undefined) usage(`${flag} needs a value`);
  if (flag === "--steps") {
    try {
      steps = JSON.parse(value);
    } catch (error) {
      usage(`--steps is not JSON: ${error.message}`);
    }
    if (!Array.isArray(steps)) usage("--steps must be a JSON array");
  } else if (flag === "--cwd") {
    cwd = value;
  } else {
    usage(`unknown option ${flag}`);
  }
}
if (argv.shift() !== "--" || argv.length < 1) usage("missing -- <agent command...>");
const [cmd, ...cmdArgs] = argv;
for (const step of steps) {
  const known = "set" in step || "prompt" in step || "checkpoint" in step || step.reload === true;
  if (!known) usage(`unknown step ${JSON.stringify(step)}`);
  if ("prompt" in step && !["allow", "reject", "cancel", undefined].includes(step.permission)) {
    usage(`bad permission in ${JSON.stringify(step)}`);
  }
}

let current = null; // the index of the running step
const emit = (event) => process.stdout.write(`${JSON.stringify({ ...event, step: current })}\n`);

/// The prompt step running now, whose answers and cancel trigger apply.
let promptStep = null;
let onUpdate = () => {};

function answer(params) {
  const permission = promptStep?.permission ?? "cancel";
  const kind = { allow: "allow_once", reject: "reject_once" }[permission];
  const option = kind ? params.options.find((o) => o.kind === kind) : undefined;
  const outcome = option ? { outcome: "selected", optionId: option.optionId } : { outcome: "cancelled" };
  emit({ event: "permission", toolCall: params.toolCall, options: params.options, answered: outcome });
  return { outcome };
}

let agentCount = 0;

let stdinLines;
/// The next line on stdin; resolves at its end too.
async function stdinLine() {
  stdinLines ??= createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  await stdinLines.next();
}

/// Starts the agent and connects to it; `body(ctx)` runs on the connection. Resolves with
/// body's result once the agent has exited.
async function withAgent(body) {
  const agent = agentCount++;
  const child = spawn(cmd, cmdArgs, { cwd, stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const started = new Promise((resolve, reject) => {
    child.on("spawn", resolve);
    child.on("error", (error) => reject(new Error(`cannot start the agent: ${error.message}`)));
  });
  await started;
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const app = acp
    .client({ name: "ts-client" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      emit({ event: "update", sessionId: params.sessionId, update: params.update });
      onUpdate(params.update);
    })
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => answer(params));
  let result;
  try {
    result = await app.connectWith(stream, async (ctx) => {
      const init = await ctx.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: {},
        clientInfo: { name: "ts-client", version: "1" },
      });
      emit({ event: "initialize", agent, result: init });
      return body(ctx);
    });
  } finally {
    child.stdin.end();
    const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
    const { code, signal } = await exited;
    clearTimeout(timer);
    emit({ event: "agent-exit", agent, code, signal });
  }
  return result;
}

// How long a cancelWhen marker may take to appear before the step fails: a liveness bound.
const MARKER_LIMIT_MS = 30000;

// Resolves once `path` exists, watching its directory; rejects if it has not appeared within
// MARKER_LIMIT_MS. `stop()` gives up at once (the prompt ended first).
function appears(path) {
  let stop;
  const found = new Promise((resolve, reject) => {
    let watcher;
    let timer;
    const end = (error) => {
      clearTimeout(timer);
      watcher?.close();
      if (error) reject(error);
      else resolve();
    };
    stop = () => end();
    timer = setTimeout(() => end(new Error(`${path} did not appear within ${MARKER_LIMIT_MS} ms`)), MARKER_LIMIT_MS);
    watcher = watch(join(path, ".."), () => {
      if (existsSync(path)) end();
    });
    if (existsSync(path)) end();
  });
  return { found, stop: () => stop() };
}

async function prompt(ctx, sessionId, step) {
  promptStep = step;
  let marker;
  let cancelled = Promise.resolve();
  let cancelArmed = step.cancelOn !== undefined;
  onUpdate = (update) => {
    if (cancelArmed && update.sessionUpdate === step.cancelOn) {
      cancelArmed = false;
      marker = step.cancelWhen === undefined ? null : appears(join(cwd, step.cancelWhen));
      cancelled = (marker ? marker.found : Promise.resolve()).then(
        () => {
          if (promptStep !== step) return;
          emit({ event: "cancel" });
          ctx.notify(acp.methods.agent.session.cancel, { sessionId });
        },
        (error) => {
          emit({ event: "error", message: String(error?.message ?? error), code: null, data: null });
          process.exit(1);
        },
      );
    }
  };
  try {
    const result = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text: step.prompt }],
    });
    emit({ event: "done", stopReason: result.stopReason });
  } finally {
    marker?.stop();
    onUpdate = () => {};
    promptStep = null;
  }
  await cancelled;
}

/// Runs steps from `first` on one agent; returns the index of the reload step that ends it,
/// or steps.length.
async function runSteps(ctx, sessionId, first) {
  for (let i = first; i < steps.length; i++) {
    current = i;
    const step = steps[i];
    if (step.reload) return i;
    if ("set" in step) {
      const answer = await ctx.request(acp.methods.agent.session.setConfigOption, {
        sessionId,
        configId: step.set,
        value: step.value,
      });
      emit({ event: "config", configOptions: answer.configOptions });
    } else if ("checkpoint" in step) {
      emit({ event: "checkpoint", name: step.checkpoint });
      await stdinLine();
    } else {
      await prompt(ctx, sessionId, step);
    }
  }
  return steps.length;
}

try {
  let sessionId;
  let next = await withAgent(async (ctx) => {
    const session = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
    sessionId = session.sessionId;
    emit({ event: "session", sessionId, configOptions: session.configOptions ?? null });
    return runSteps(ctx, sessionId, 0);
  });
  while (next < steps.length) {
    const reload = next;
    next = await withAgent(async (ctx) => {
      current = reload;
      const loaded = await ctx.request(acp.methods.agent.session.load, { sessionId, cwd, mcpServers: [] });
      emit({ event: "load", sessionId, configOptions: loaded?.configOptions ?? null });
      return runSteps(ctx, sessionId, reload + 1);
    });
  }
  process.exit(0);
} catch (error) {
  emit({ event: "error", message: String(error?.message ?? error), code: error?.code ?? null, data: error?.data ?? null });
  process.exit(1);
}
