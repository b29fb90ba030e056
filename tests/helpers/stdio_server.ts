/**
 * Spawns the real server (`deno run -P=serve main.ts`) and connects the SDK
 * client to it over real stdio.
 *
 * @module
 */

import { Client, StdioClientTransport } from "../../mod/mcp/client_sdk.ts";
import { teeChildLog } from "./log_secrets.ts";
import { ROOT } from "./paths.ts";

/** A connected client and what the server wrote to stderr. */
export interface StdioSession {
  client: Client;
  stderr: () => string;
  close(): Promise<void>;
}

/** Starts the server with `args` and connects a client advertising `capabilities` (none by default). */
export async function connectStdio(
  args: string[],
  env: Record<string, string> = {},
  capabilities: Record<string, unknown> = {},
): Promise<StdioSession> {
  const transport = new StdioClientTransport({
    command: Deno.execPath(),
    args: ["run", "-P=serve", "--quiet", "main.ts", ...args],
    cwd: ROOT,
    env: { ...Deno.env.toObject(), NO_COLOR: "1", ...env },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Uint8Array) => stderr += new TextDecoder().decode(chunk));
  const client = new Client({ name: "e2e-test", version: "1.0.0" }, { capabilities });
  await client.connect(transport);
  return {
    client,
    stderr: () => stderr,
    async close() {
      await client.close();
      // The server's whole stderr joins the run's logs, and fails the test now if it holds a secret.
      teeChildLog(`stdio server ${args.join(" ")}`.slice(0, 60), stderr);
    },
  };
}
