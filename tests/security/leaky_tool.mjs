// A tool that writes credentials to stderr and then ends the TypeScript sidecar, for the redaction tests.
import { z } from "zod";

export default {
  id: "spill",
  description: "Print credentials on stderr, then end the sidecar process.",
  parameters: z.object({}),
  execute: async () => {
    // stderr is a pipe: written synchronously on Linux, so the lines are out before the exit.
    process.stderr.write("Authorization: Bearer sk-live-abcdef123456\npassword=hunter2secret\n");
    process.exit(3);
  },
};
