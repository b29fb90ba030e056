/**
 * Prompts through the MCP server on the test-sized models: under the default
 * `[prompt] syntax = "a1111"` a long prompt is read whole (no truncation
 * note) and the PNG names how the prompt was read; under "plain" it is cut
 * at 77 tokens and the result says so.
 */

import assert from "node:assert/strict";
import { readPngText } from "../mod/image/mod.ts";
import { pngs, texts } from "./helpers/results.ts";
import { connectStdio } from "./helpers/stdio_server.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";

const LONG = Array.from({ length: 150 }, (_, i) => ["red", "house", "tree", "river", "cat"][i % 5])
  .join(" ");

async function generate(config: string, prompt: string, negative?: string) {
  const temp = await writeTinyConfig(config);
  try {
    const stdio = await connectStdio(["--config", temp.path]);
    try {
      const result = await stdio.client.callTool({
        name: "generate_image",
        arguments: {
          positive_prompt: prompt,
          size: "square_512",
          ...(negative !== undefined ? { negative_prompt: negative } : {}),
        },
      });
      return {
        text: texts(result),
        png: pngs(result)[0],
        instructions: stdio.client.getInstructions() ?? "",
      };
    } finally {
      await stdio.close();
    }
  } finally {
    await temp.remove();
  }
}

Deno.test("a1111 (the default): 150 tokens read whole; the PNG keeps the prompt as given and names the reading", async () => {
  const prompt = `${LONG}, (masterpiece:1.2) BREAK 日本の庭`;
  const { text, png, instructions } = await generate(
    `[generation]\nseed = 5\nsteps = 2\n[prompt]\nnegative = "lowres"\n`,
    prompt,
    "[blurry]",
  );
  assert.doesNotMatch(text, /truncated/);
  assert.match(instructions, /\(word:1\.3\).*BREAK.*never cut below the 10,000-character limit/);
  const meta = readPngText(png);
  assert.equal(meta.prompt, prompt);
  assert.equal(meta.negative_prompt, "lowres\n[blurry]");
  assert.equal(meta.prompt_syntax, "a1111");
  assert.equal(meta.clip_skip, "1");
  assert.equal(meta.ti_hashes, undefined);
});

Deno.test("plain: the long prompt is cut at 77 tokens and the result says so", async () => {
  const { text, png, instructions } = await generate(
    `[generation]\nseed = 5\nsteps = 2\n[prompt]\nsyntax = "plain"\n`,
    LONG,
  );
  assert.match(instructions, /plain text and cut at 77 CLIP tokens/);
  assert.match(text, /positive prompt was truncated to 77 CLIP tokens \(152 given\)/);
  const meta = readPngText(png);
  assert.equal(meta.prompt, LONG);
  assert.equal(meta.prompt_syntax, "plain");
});
