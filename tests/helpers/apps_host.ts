/**
 * The test's MCP Apps host: its two pages (the host page on
 * `http://127.0.0.1:<port>`, the sandbox proxy on `http://localhost:<port>`,
 * so they are two origins as a web host's must be) and its backend, which
 * holds a real SDK client connected to the server and forwards the pages'
 * MCP requests to it.
 *
 * @module
 */

import hostHtml from "./apps_host/host.html" with { type: "text" };
import sandboxHtml from "./apps_host/sandbox.html" with { type: "text" };
import type { Client } from "../../mod/mcp/client_sdk.ts";

/** A running test host. */
export interface AppsHost {
  /** The host page's URL. */
  url: string;
  /** Every MCP request the pages sent, in order (method and, for calls, the tool). */
  forwarded: Array<{ method: string; name?: string }>;
  close(): Promise<void>;
}

const html = (text: string) =>
  new Response(text, { headers: { "content-type": "text/html; charset=utf-8" } });

/** Starts the host in front of `client` (connected to the server under test). */
export function startAppsHost(client: Client): Promise<AppsHost> {
  const forwarded: AppsHost["forwarded"] = [];
  async function forward(method: string, params: Record<string, unknown>): Promise<unknown> {
    forwarded.push({ method, ...(typeof params.name === "string" ? { name: params.name } : {}) });
    switch (method) {
      case "tools/list":
        return await client.listTools();
      case "tools/call":
        return await client.callTool(
          params as { name: string; arguments?: Record<string, unknown> },
          undefined,
          { timeout: 180_000 },
        );
      case "resources/list":
        return await client.listResources();
      case "resources/read":
        return await client.readResource(params as { uri: string });
      default:
        throw Object.assign(new Error(`the test host does not forward ${method}`), {
          code: -32601,
        });
    }
  }
  return new Promise((resolve) => {
    const server = Deno.serve({
      hostname: "127.0.0.1",
      port: 0,
      onListen: () => {},
    }, async (request) => {
      const url = new URL(request.url);
      if (request.method === "GET" && url.pathname === "/host.html") return html(hostHtml);
      if (request.method === "GET" && url.pathname === "/sandbox.html") return html(sandboxHtml);
      if (request.method === "POST" && url.pathname === "/host/mcp") {
        const { method, params } = await request.json();
        try {
          return Response.json({ result: await forward(method, params ?? {}) });
        } catch (error) {
          const e = error as { code?: number; message?: string };
          return Response.json({
            error: { code: typeof e.code === "number" ? e.code : -32000, message: e.message },
          });
        }
      }
      return new Response("not found\n", { status: 404 });
    });
    const port = (server.addr as Deno.NetAddr).port;
    resolve({
      url: `http://127.0.0.1:${port}/host.html`,
      forwarded,
      close: () => server.shutdown(),
    });
  });
}
