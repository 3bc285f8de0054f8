// Loading tool modules: find the tools they export, convert each zod schema
// to JSON Schema once (zod's own z.toJSONSchema) and keep the result.

import { basename, extname } from "node:path";
import { pathToFileURL } from "node:url";
import { z } from "zod";

const VERSION = /^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$/;

function isTool(value) {
  return value !== null && typeof value === "object" && typeof value.id === "string" && typeof value.execute === "function";
}

function exportedTools(mod) {
  const found = [];
  const add = (value) => {
    if (isTool(value) && !found.includes(value)) found.push(value);
  };
  for (const value of [mod.default, ...Object.values(mod)]) {
    if (Array.isArray(value)) value.forEach(add);
    else add(value);
  }
  return found;
}

function isZod(value) {
  return value instanceof z.ZodType || (value !== null && typeof value === "object" && "_zod" in value);
}

function jsonSchemaOf(schema, io) {
  const converted = z.toJSONSchema(schema, { io, unrepresentable: "throw" });
  delete converted.$schema;
  return converted;
}

// One loaded tool: what Python needs to describe it, and what the sidecar needs to run it.
function prepare(tool, mod, file) {
  if (!isZod(tool.parameters)) {
    throw new Error("`parameters` must be a zod schema, for example z.object({ url: z.string() })");
  }
  const parameters = jsonSchemaOf(tool.parameters, "input");
  if (parameters.type !== "object") throw new Error("`parameters` must be a z.object(...)");
  if (tool.returns !== undefined && !isZod(tool.returns)) throw new Error("`returns`, when given, must be a zod schema");
  const version = tool.version ?? mod.version ?? "1.0.0";
  if (typeof version !== "string" || !VERSION.test(version)) throw new Error(`version ${JSON.stringify(version)} is not x.y.z`);
  if (tool.timeoutMs !== undefined && !(Number.isFinite(tool.timeoutMs) && tool.timeoutMs > 0)) {
    throw new Error("`timeoutMs`, when given, must be a positive number of milliseconds");
  }
  return {
    key: `${file}#${tool.id}`,
    tool,
    info: {
      key: `${file}#${tool.id}`,
      id: tool.id,
      module: file,
      toolkit: typeof mod.toolkit === "string" ? mod.toolkit : null,
      moduleStem: basename(file, extname(file)),
      description: typeof tool.description === "string" ? tool.description : "",
      version,
      parameters,
      returns: tool.returns === undefined ? null : jsonSchemaOf(tool.returns, "output"),
      sideEffects: tool.sideEffects !== false,
      timeoutMs: tool.timeoutMs ?? null,
    },
  };
}

// Every module in `files` -> { tools: Map(key -> prepared tool), problems: [string] }.
export async function loadTools(files) {
  const tools = new Map();
  const problems = [];
  for (const file of files) {
    let mod;
    try {
      mod = await import(pathToFileURL(file).href);
    } catch (error) {
      problems.push(`${file}: cannot be loaded: ${error?.message ?? error}`);
      continue;
    }
    const found = exportedTools(mod);
    if (found.length === 0) {
      problems.push(`${file}: exports no tool (an object with id, description, parameters and execute)`);
    }
    for (const tool of found) {
      try {
        const prepared = prepare(tool, mod, file);
        if (tools.has(prepared.key)) throw new Error("another tool in this module has the same id");
        tools.set(prepared.key, prepared);
      } catch (error) {
        problems.push(`${file}: tool ${JSON.stringify(tool.id)}: ${error?.message ?? error}`);
      }
    }
  }
  return { tools, problems };
}
