/**
 * One image-tool call over a real client, read back for the preset tests:
 * the PNG's text, the item types, the result text and the highest progress.
 *
 * @module
 */

import assert from "node:assert/strict";
import { readPngText } from "../../mod/image/mod.ts";
import type { Client } from "../../mod/mcp/client_sdk.ts";
import { contents, pngs, texts } from "./results.ts";

type Result = Awaited<ReturnType<Client["callTool"]>>;

/** Calls tool `name` (5 minutes at most); fails unless the result holds an image. */
export async function callImage(client: Client, name: string, args: Record<string, unknown>) {
  const progress: number[] = [];
  const result = await client.callTool({ name, arguments: args }, undefined, {
    timeout: 300_000,
    onprogress: (p) => progress.push(p.progress),
  }) as Result;
  assert.equal(result.isError, undefined, texts(result));
  const [png] = pngs(result);
  assert.ok(png, `${name}: no image in ${JSON.stringify(contents(result)).slice(0, 500)}`);
  return {
    meta: readPngText(png),
    items: contents(result).map((c) => c.type),
    text: texts(result),
    steps: Math.max(...progress),
  };
}
