// The TypeScript sidecar: loads tool modules and serves them as JSON-RPC 2.0
// over stdio, one JSON document per line (the gateway's Python side starts a
// pool of these; see adapters/typescript/backend.py).
//
//   node sidecar.mjs /abs/path/tools.ts [...]
//
// Methods: tool.list -> {tools, problems}; tool.execute {tool, parameters,
// context: {callId, sessionId, messageId, timeout}} -> {value}; notification
// tool.cancel {id} aborts that call's AbortSignal. Errors use the seed's codes:
// -32700 parse, -32600 invalid request, -32601 unknown method or tool,
// -32602 invalid parameters, -32000 the tool threw, -32001 aborted (deadline or
// cancellation), -32603 internal.

import { register } from "node:module";
import { createInterface } from "node:readline";

// stdout carries the protocol only: whatever tools print goes to stderr (the gateway's log).
const writeProtocol = process.stdout.write.bind(process.stdout);
process.stdout.write = process.stderr.write.bind(process.stderr);

const files = process.argv.slice(2);
const problems = [];
const nodeMajor = Number(process.versions.node.split(".")[0]);
if (nodeMajor < 20) problems.push(`Node.js ${process.versions.node} is too old; the sidecar needs Node 20 or newer`);

if (files.some((file) => /\.[cm]?tsx?$/.test(file))) {
  const { register: registerTypeScript } = await import("tsx/esm/api");
  registerTypeScript();
}
register("./hooks.mjs", import.meta.url, { data: { fallbackParent: import.meta.url } });

const { loadTools } = await import("./lib/tools.mjs");
const { toJson, NotJsonError } = await import("./lib/json.mjs");

class BadResultError extends Error {}

const loaded = await loadTools(files);
problems.push(...loaded.problems);
const tools = loaded.tools;
const running = new Map(); // request id -> AbortController
const BACKSTOP_MS = 500;

function send(message) {
  writeProtocol(`${JSON.stringify({ jsonrpc: "2.0", ...message })}\n`);
}

function fail(id, code, message, data) {
  send({ id, error: data === undefined ? { code, message } : { code, message, data } });
}

function parameterErrors(issues) {
  const out = {};
  for (const issue of issues) {
    const where = issue.path.length ? issue.path.join(".") : "(parameters)";
    out[where] = out[where] ? `${out[where]}; ${issue.message}` : issue.message;
  }
  return out;
}

function aborted(signal) {
  return new Promise((_resolve, reject) => {
    const stop = () => reject(signal.reason ?? new Error("aborted"));
    if (signal.aborted) stop();
    else signal.addEventListener("abort", stop, { once: true });
  });
}

async function execute(id, params) {
  const prepared = tools.get(params?.tool);
  const data = { tool: params?.tool, language: "typescript" };
  if (!prepared) return fail(id, -32601, `No tool ${JSON.stringify(params?.tool)} is loaded in this sidecar`, data);
  const { tool } = prepared;
  data.tool = tool.id;
  const parsed = tool.parameters.safeParse(params.parameters ?? {});
  if (!parsed.success) {
    const errors = parameterErrors(parsed.error.issues);
    const listed = Object.entries(errors).map(([k, v]) => `${k}: ${v}`).join("; ");
    return fail(id, -32602, `Invalid parameters: ${listed}`, { ...data, parameter_errors: errors });
  }
  const context = params.context ?? {};
  const controller = new AbortController();
  const signals = [controller.signal];
  if (Number.isFinite(context.timeout) && context.timeout > 0) {
    // A backstop: the gateway cancels at the deadline itself; this fires only if that message is lost.
    signals.push(AbortSignal.timeout(context.timeout + BACKSTOP_MS));
  }
  const signal = AbortSignal.any(signals);
  running.set(id, controller);
  const toolContext = {
    sessionId: context.sessionId ?? null,
    messageId: context.messageId ?? null,
    callId: context.callId ?? null,
    userId: context.userId ?? null,
    abort: signal,
    timeout: context.timeout ?? null,
    metadata: new Map(),
  };
  try {
    const value = await Promise.race([Promise.resolve().then(() => tool.execute(parsed.data, toolContext)), aborted(signal)]);
    let result = toJson(value);
    if (tool.returns !== undefined) {
      const checked = tool.returns.safeParse(result);
      if (!checked.success) {
        const errors = Object.entries(parameterErrors(checked.error.issues)).map(([k, v]) => `${k}: ${v}`);
        throw new BadResultError(`a result that does not match its \`returns\` schema: ${errors.join("; ")}`);
      }
      result = toJson(checked.data);
    }
    send({ id, result: { value: result } });
  } catch (error) {
    if (signal.aborted) {
      const why = controller.signal.aborted ? "cancelled by the gateway" : `its deadline (${context.timeout} ms) passed`;
      return fail(id, -32001, `Tool ${tool.id} was aborted: ${why}`, { ...data, details: why });
    }
    if (error instanceof NotJsonError || error instanceof BadResultError) {
      const problem = error instanceof NotJsonError ? `something that is not JSON: ${error.message}` : error.message;
      return fail(id, -32000, `Tool ${tool.id} returned ${problem}`, { ...data, details: problem, badResult: problem });
    }
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`tool ${tool.id} threw: ${error instanceof Error ? error.stack : message}\n`);
    fail(id, -32000, message || `Tool ${tool.id} threw ${error?.name ?? "an error"}`, {
      ...data,
      details: `${error?.name ?? typeof error}: ${message}`,
      developerMessage: typeof error?.developerMessage === "string" ? error.developerMessage : null,
      canRetry: error?.canRetry === true,
      retryAfterMs: Number.isFinite(error?.retryAfterMs) ? error.retryAfterMs : null,
      additionalPromptContent: typeof error?.additionalPromptContent === "string" ? error.additionalPromptContent : null,
    });
  } finally {
    running.delete(id);
  }
}

function handle(line) {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return fail(null, -32700, "Parse error: a line that is not JSON");
  }
  if (message === null || typeof message !== "object" || message.jsonrpc !== "2.0" || typeof message.method !== "string") {
    return fail(message?.id ?? null, -32600, "Invalid request");
  }
  const { id, method, params } = message;
  if (method === "tool.cancel") {
    running.get(params?.id)?.abort(new Error("cancelled by the gateway"));
    return undefined;
  }
  if (method === "tool.list") {
    return send({ id, result: { tools: [...tools.values()].map((t) => t.info), problems, pid: process.pid } });
  }
  if (method === "tool.execute") {
    // Whatever escapes execute() (a zod refinement that throws, say) still gets an answer.
    return execute(id, params).catch((error) => {
      process.stderr.write(`internal error in tool.execute: ${error?.stack ?? error}\n`);
      fail(id, -32603, `Internal error in the sidecar: ${error?.message ?? error}`, { tool: params?.tool, language: "typescript" });
    });
  }
  if (id === undefined) return undefined; // an unknown notification: nothing to answer
  return fail(id, -32601, `Unknown method ${JSON.stringify(method)}`);
}

process.on("unhandledRejection", (reason) => {
  // A tool's stray promise: log it, keep serving the other calls.
  process.stderr.write(`unhandled rejection in a tool: ${reason instanceof Error ? reason.stack : reason}\n`);
});
process.on("uncaughtException", (error) => {
  // The process state is unknown now: stop; the gateway starts a fresh sidecar.
  process.stderr.write(`uncaught exception in a tool, the sidecar stops: ${error?.stack ?? error}\n`);
  process.exit(70);
});

const input = createInterface({ input: process.stdin, crlfDelay: Number.POSITIVE_INFINITY });
input.on("line", (line) => {
  if (line.trim()) handle(line);
});
input.on("close", () => process.exit(0));
