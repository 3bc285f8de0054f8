// A plain JavaScript tool module: no TypeScript needed.
import { z } from "zod";

export default {
  id: "add",
  version: "2.1.0",
  description: "Add two numbers.",
  sideEffects: false,
  parameters: z.object({ a: z.number(), b: z.number() }),
  execute: async ({ a, b }) => a + b,
};
