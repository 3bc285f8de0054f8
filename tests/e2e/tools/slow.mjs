// A tool that takes its time, for the shutdown tests: it says when it started, then waits.
import { writeFileSync } from "node:fs";
import { z } from "zod";

export default {
  id: "sleep",
  description: "Touch the file `started` (so a test knows the call runs), wait `ms` milliseconds, return `ms`.",
  sideEffects: false,
  parameters: z.object({ ms: z.number().int().min(0).max(600000), started: z.string() }),
  execute: ({ ms, started }, ctx) =>
    new Promise((resolve, reject) => {
      writeFileSync(started, "");
      const timer = setTimeout(() => resolve(ms), ms);
      ctx.abort.addEventListener("abort", () => {
        clearTimeout(timer);
        reject(new Error("aborted"));
      });
    }),
};
