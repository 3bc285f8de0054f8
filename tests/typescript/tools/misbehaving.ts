// Tools that misbehave on purpose, for tests/typescript: each failure must stay with its own call.
import { z } from "zod";

export const toolkit = "BadTs";

const aborted: string[] = []; // call ids whose AbortSignal fired

const none = z.object({});

export const tools = [
  {
    id: "pid",
    description: "The sidecar's process id.",
    parameters: none,
    execute: async () => process.pid,
  },
  {
    id: "echo",
    description: "Echo the text and the call context.",
    parameters: z.object({ text: z.string(), times: z.number().int().min(1).default(1) }),
    execute: async ({ text, times }: { text: string; times: number }, ctx: { sessionId: string | null; messageId: string | null; callId: string | null; timeout: number | null }) => {
      console.log("echo called"); // must not disturb the protocol
      return { text: text.repeat(times), sessionId: ctx.sessionId, messageId: ctx.messageId, callId: ctx.callId, hasTimeout: typeof ctx.timeout === "number" };
    },
  },
  {
    id: "throws",
    description: "Throw an error carrying gateway fields.",
    parameters: none,
    execute: async () => {
      const error = new Error("the tool refused") as Error & Record<string, unknown>;
      error.canRetry = true;
      error.retryAfterMs = 250;
      error.additionalPromptContent = "Try again later.";
      throw error;
    },
  },
  {
    id: "hangs",
    description: "Never resolve; remember when the AbortSignal fires.",
    parameters: none,
    execute: ({}, ctx: { abort: AbortSignal; callId: string }) => {
      ctx.abort.addEventListener("abort", () => aborted.push(ctx.callId));
      return new Promise(() => {});
    },
  },
  {
    id: "aborted",
    description: "The call ids whose AbortSignal fired in this sidecar.",
    parameters: none,
    execute: async () => aborted,
  },
  {
    id: "spin",
    description: "Block the event loop forever.",
    parameters: none,
    execute: () => {
      for (;;) {}
    },
  },
  {
    id: "exit",
    description: "End the sidecar process.",
    parameters: none,
    execute: () => process.exit(3),
  },
  {
    id: "not-json",
    description: "Return something that is not JSON.",
    parameters: z.object({ what: z.enum(["function", "bigint", "map", "nan", "cycle"]) }),
    execute: async ({ what }: { what: string }) => {
      if (what === "function") return { callback: () => 1 };
      if (what === "bigint") return { big: 10n };
      if (what === "map") return new Map([["a", 1]]);
      if (what === "nan") return [1, Number.NaN];
      const cycle: Record<string, unknown> = {};
      cycle.self = cycle;
      return cycle;
    },
  },
  {
    id: "half",
    description: "Halve an even number (the evenness check exists only in zod, not in the JSON Schema).",
    parameters: z.object({ n: z.number().int().refine((n) => n % 2 === 0, "must be even") }),
    execute: async ({ n }: { n: number }) => n / 2,
  },
  {
    id: "broken-check",
    description: "A parameter check that itself throws.",
    parameters: z.object({
      n: z.number().refine(() => {
        throw new Error("the check crashed");
      }),
    }),
    execute: async () => 0,
  },
  {
    id: "wrong-result",
    description: "Return a value that does not match the declared result schema.",
    parameters: none,
    returns: z.object({ n: z.number() }),
    execute: async () => ({ n: "one" }),
  },
];
