import { deepStrictEqual } from "node:assert";
import { promptMetadata } from "./service.ts";

Deno.test("promptMetadata: the prompts as read, the syntax, clip skip, and AUTOMATIC1111's TI hashes", () => {
  deepStrictEqual(
    promptMetadata(
      { positive: "best", negative: "", syntax: "a1111", clipSkip: 2 },
      { positive: "best, a (cat:1.2)", negative: "EasyNegative, bad:hands" },
      [{ name: "EasyNegative", hash: "c74b4e810b03" }, { name: "bad:hands", hash: "0123456789ab" }],
    ),
    {
      prompt: "best, a (cat:1.2)",
      negative_prompt: "EasyNegative, bad:hands",
      prompt_syntax: "a1111",
      clip_skip: "2",
      embeddings: "EasyNegative, bad:hands",
      ti_hashes: "EasyNegative: c74b4e810b03, badhands: 0123456789ab",
    },
  );
  // No negative prompt, no embeddings, no reading settings: only the prompt.
  deepStrictEqual(
    promptMetadata({ positive: "", negative: "" }, { positive: "a", negative: "" }, []),
    {
      prompt: "a",
    },
  );
});
