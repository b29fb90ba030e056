/**
 * Connects the SDK client to a server over real streamable HTTP.
 *
 * @module
 */

import { Client, StreamableHTTPClientTransport } from "../../mod/mcp/client_sdk.ts";

/**
 * Connects a client to `http://127.0.0.1:<port>/mcp` sending `headers` on
 * every request, advertising `capabilities` (none by default).
 */
export async function connectHttp(
  port: number,
  headers: Record<string, string>,
  capabilities: Record<string, unknown> = {},
): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(
    new URL(`http://127.0.0.1:${port}/mcp`),
    { requestInit: { headers } },
  );
  const client = new Client({ name: "e2e-http", version: "1.0.0" }, { capabilities });
  await client.connect(transport);
  return client;
}
