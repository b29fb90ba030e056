/**
 * `deno task prompt [--json] [--config PATH] [--tokenizer DIR] TEXT|-`: shows how the server
 * reads a prompt (AUTOMATIC1111's syntax, see read.ts): its chunks with the words in each, the
 * token ids and weights, the token count as AUTOMATIC1111 counts it, and the embeddings used.
 *
 * It reads the configured tokenizer (`<[models] base>/tokenizer`, or `--tokenizer DIR`) and the
 * configured embeddings (`[prompt] embeddings`), the files the server reads. Exit status: 0 read,
 * 1 the prompt cannot be read (a weight that is not a number), 2 a usage, config, tokenizer or
 * embedding problem.
 *
 * @module
 */

import { join } from "node:path";
import { parseArgs } from "node:util";
import { type Help, printHelp, usageText } from "../cli/mod.ts";
import { defaultConfigPath, loadConfig } from "../config/mod.ts";
import { log } from "../log/mod.ts";
import { ClipTokenizer } from "../tokenizer/mod.ts";
import { PromptSyntaxError } from "./attention.ts";
import { EmbeddingFileError } from "./embedding_file.ts";
import { type LoadedEmbeddings, loadEmbeddings } from "./embedding_set.ts";
import { PROMPT_CHUNK_SIZE, PromptEmbeddingIndex, type ReadPrompt, readPrompt } from "./read.ts";

const HELP: Help = {
  usage: ["deno task prompt [--json] [--config PATH] [--tokenizer DIR] TEXT|-"],
  summary: "Shows how the server reads a prompt, as AUTOMATIC1111 does: (word) and [word] " +
    "weights, (word:1.3), BREAK, 75-token chunks with the comma back-off, and the textual-" +
    "inversion embeddings of [prompt] embeddings called by their word. Prints each chunk's words, " +
    "token ids and weights, the token count and the embeddings used.",
  options: [
    ["TEXT", "the prompt (several words are joined with spaces); - reads it from standard input"],
    [
      "--json",
      'print {"token_count": N, "chunks": [{"tokens": [77 ids], "multipliers": [77 weights], ' +
      '"embeddings": [{"offset", "name"}], "text"}], "embeddings_used": [{"name", "hash", ' +
      '"vectors"}]}',
    ],
    [
      "--config PATH",
      "the config to read (default: $SD_MCP_CONFIG, else ./config.toml, else the defaults); its " +
      "<name>.local.toml is read over it",
    ],
    [
      "--tokenizer DIR",
      "a CLIP tokenizer folder instead of the configured <[models] base>/tokenizer",
    ],
    ["-h, --help", "print this help and exit"],
  ],
  notes: [
    "Exit status: 0 read, 1 the prompt cannot be read (a weight that is not a number), 2 a " +
    "usage, config, tokenizer or embedding file problem.",
  ],
};

const encoder = new TextEncoder();

/** The command's report goes to stdout; problems go to stderr through the logger. */
function out(text: string): void {
  Deno.stdout.writeSync(encoder.encode(text));
}

/** Runs the command with `args` (standard input is `stdin` for `-`); returns the exit status. */
export async function main(
  args: string[],
  stdin: ReadableStream<Uint8Array> = Deno.stdin.readable,
): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      options: {
        json: { type: "boolean" },
        config: { type: "string" },
        tokenizer: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: true,
      allowNegative: false,
    });
  } catch (e) {
    log("error", "prompt", `${(e as Error).message}\n${usageText(HELP)}`);
    return 2;
  }
  const v = parsed.values;
  if (v.help) return printHelp(HELP);
  const words = parsed.positionals;
  if (words.length === 0) {
    log(
      "error",
      "prompt",
      `no prompt given: pass TEXT, or - to read it from standard input\n${usageText(HELP)}`,
    );
    return 2;
  }
  if (words.includes("-") && words.length > 1) {
    log("error", "prompt", `- (read standard input) stands alone, got ${words.length} arguments`);
    return 2;
  }
  const text = words[0] === "-" ? await new Response(stdin).text() : words.join(" ");

  let tokenizer: ClipTokenizer;
  let loaded: LoadedEmbeddings;
  try {
    const configPath = v.config ?? await defaultConfigPath();
    // stdio and no environment: the HTTP secrets and the backend play no part in reading a
    // prompt (and the task needs no permission to read them).
    const config = await loadConfig({
      path: configPath,
      env: {},
      overrides: { transport: "stdio" },
    });
    const dir = v.tokenizer ?? join(config.models.base, "tokenizer");
    try {
      tokenizer = await ClipTokenizer.load(dir);
    } catch (e) {
      throw new Error(
        `${(e as Error).message}${
          v.tokenizer === undefined
            ? ` (the tokenizer of [models] base = ${config.models.base}): run \`deno task models\` ` +
              "to fetch the model files, or name a tokenizer folder with --tokenizer DIR"
            : ""
        }`,
      );
    }
    loaded = await loadEmbeddings(config.prompt.embeddings, tokenizer.vocabSize);
  } catch (e) {
    const message = e instanceof EmbeddingFileError
      ? `[prompt] embeddings: ${e.message}`
      : (e as Error).message;
    log("error", "prompt", message);
    return 2;
  }
  let index: PromptEmbeddingIndex;
  try {
    index = new PromptEmbeddingIndex(tokenizer, loaded.embeddings);
  } catch (e) {
    log("error", "prompt", `[prompt] embeddings: ${(e as Error).message}`);
    return 2;
  }

  let read: ReadPrompt;
  try {
    read = readPrompt(text, tokenizer, index);
  } catch (e) {
    if (!(e instanceof PromptSyntaxError)) throw e;
    log("error", "prompt", e.message);
    return 1;
  }
  out(v.json ? jsonReport(read, tokenizer, loaded) : textReport(read, tokenizer, loaded));
  return 0;
}

/** The words of one chunk: the tokens decoded, each embedding as `<name>`. */
function chunkText(
  tokens: readonly number[],
  embeddings: ReadonlyArray<{ offset: number; name: string }>,
  tokenizer: ClipTokenizer,
  loaded: LoadedEmbeddings,
): string {
  const parts: string[] = [];
  let run: number[] = [];
  const flush = () => {
    if (run.length > 0) parts.push(tokenizer.decode(run));
    run = [];
  };
  for (let i = 1; i < tokens.length - 1; i++) {
    const fix = embeddings.find((e) => e.offset === i);
    if (fix !== undefined) {
      flush();
      parts.push(`<${fix.name}>`);
      i += rowsOf(fix.name, loaded) - 1;
      continue;
    }
    if (tokens[i] === tokenizer.eosId) break;
    run.push(tokens[i]);
  }
  flush();
  return parts.filter((p) => p !== "").join(" ");
}

function rowsOf(name: string, loaded: LoadedEmbeddings): number {
  return loaded.embeddings.find((e) => e.name === name)!.rowIds.length;
}

/** Content positions of a chunk: up to its first EOS that no embedding covers. */
function contentLength(tokens: readonly number[], eosId: number): number {
  const end = tokens.indexOf(eosId, 1);
  return (end === -1 ? tokens.length - 1 : end) - 1;
}

function usedList(read: ReadPrompt, loaded: LoadedEmbeddings) {
  return read.embeddingsUsed.map((name) => {
    const e = loaded.embeddings.find((x) => x.name === name)!;
    return { name, hash: e.hash ?? null, vectors: e.rowIds.length };
  });
}

function jsonReport(read: ReadPrompt, tokenizer: ClipTokenizer, loaded: LoadedEmbeddings): string {
  return JSON.stringify({
    token_count: read.tokenCount,
    chunks: read.chunks.map((c) => ({
      tokens: c.tokens,
      multipliers: c.multipliers,
      embeddings: c.embeddings,
      text: chunkText(c.tokens, c.embeddings, tokenizer, loaded),
    })),
    embeddings_used: usedList(read, loaded),
  }) + "\n";
}

/** A weight as people read it: at most 4 decimals. */
function weightText(w: number): string {
  return String(Number(w.toFixed(4)));
}

function textReport(read: ReadPrompt, tokenizer: ClipTokenizer, loaded: LoadedEmbeddings): string {
  const n = read.chunks.length;
  const lines = [
    `token count: ${read.tokenCount} (${n} chunk${n === 1 ? "" : "s"} of ${PROMPT_CHUNK_SIZE} ` +
    `positions: ${n * PROMPT_CHUNK_SIZE} for the text encoder)`,
  ];
  const used = usedList(read, loaded);
  lines.push(
    used.length === 0
      ? `embeddings used: none (${loaded.embeddings.length} configured)`
      : `embeddings used: ${
        used.map((u) => `${u.name} (${u.vectors} vectors, TI hash ${u.hash})`).join(", ")
      }`,
  );
  read.chunks.forEach((c, k) => {
    // Embedding rows may sit where EOS would be looked for: count through them.
    let length = contentLength(c.tokens, tokenizer.eosId);
    for (const e of c.embeddings) length = Math.max(length, e.offset - 1 + rowsOf(e.name, loaded));
    lines.push(
      "",
      `chunk ${k + 1} of ${n}: ${length} token${length === 1 ? "" : "s"}, then EOS and padding ` +
        `to ${PROMPT_CHUNK_SIZE}`,
      `  words: ${chunkText(c.tokens, c.embeddings, tokenizer, loaded)}`,
      "  pos  id     weight  token",
    );
    for (let i = 0; i <= length + 1; i++) {
      const fix = c.embeddings.find((e) => i >= e.offset && i < e.offset + rowsOf(e.name, loaded));
      const token = fix !== undefined
        ? `<${fix.name} ${i - fix.offset + 1}/${rowsOf(fix.name, loaded)}>`
        : tokenizer.tokenText(c.tokens[i]) ?? "?";
      lines.push(
        `  ${String(i).padStart(3)}  ${String(c.tokens[i]).padEnd(5)}  ${
          weightText(c.multipliers[i]).padEnd(6)
        }  ${token}`,
      );
    }
  });
  return lines.join("\n") + "\n";
}

if (import.meta.main) Deno.exit(await main(Deno.args));
