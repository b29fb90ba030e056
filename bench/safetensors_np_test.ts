import { deepStrictEqual, strictEqual } from "node:assert";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { encodeSafetensors } from "../tests/fixtures/builder/lora.ts";
import { parseSafetensors } from "../mod/lora/safetensors.ts";
import { ignoredFor } from "../tests/helpers/ignore.ts";

/** Debian's Python with numpy (the peers scenario's), when it is installed. */
const PYTHON = Deno.env.get("SD15_TEST_PYTHON") ?? "/usr/bin/python3";
const numpyThere = await new Deno.Command(PYTHON, { args: ["-c", "import numpy"] })
  .output().then((o) => o.success, () => false);
const noNumpy = numpyThere ? undefined : `no numpy for ${PYTHON} (Debian: python3-numpy)`;
const BENCH = fileURLToPath(new URL(".", import.meta.url));

async function python(code: string): Promise<string> {
  const out = await new Deno.Command(PYTHON, { args: ["-c", code], cwd: BENCH }).output();
  const text = new TextDecoder().decode(out.stdout);
  strictEqual(out.code, 0, new TextDecoder().decode(out.stderr));
  return text;
}

Deno.test(
  ignoredFor(noNumpy, "safetensors_np reads what the project writes and writes what it reads"),
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "sd15-safetensors-np-" });
    try {
      // A LoRA-like file as the project's builder writes it: fp16 matrices, a scalar alpha.
      const theirs = join(dir, "lora.safetensors");
      await Deno.writeFile(
        theirs,
        encodeSafetensors([
          {
            name: "m.lora_down.weight",
            dtype: "F16",
            shape: [2, 3],
            data: Float32Array.of(1, -2, 0.5, 3, 0.25, -1),
          },
          { name: "m.alpha", dtype: "F16", shape: [], data: Float32Array.of(4) },
          { name: "w", dtype: "F32", shape: [2], data: Float32Array.of(1.5, -7) },
        ], { ss_network_module: "networks.lora" }),
      );
      const read = JSON.parse(
        await python(
          `import json, safetensors_np as s; t = s.read(${JSON.stringify(theirs)}); ` +
            `print(json.dumps({k: [str(v.dtype), list(v.shape), v.ravel().astype(float).tolist()] for k, v in t.items()}))`,
        ),
      );
      deepStrictEqual(read, {
        "m.lora_down.weight": ["float16", [2, 3], [1, -2, 0.5, 3, 0.25, -1]],
        "m.alpha": ["float16", [], [4]],
        w: ["float32", [2], [1.5, -7]],
      });
      // And the other way: numpy arrays written, read back by the project's parser.
      const mine = join(dir, "written.safetensors");
      await python(
        `import numpy as np, safetensors_np as s; s.write(${JSON.stringify(mine)}, ` +
          `{"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([0.5, -1], np.float16)}, {"format": "pt"})`,
      );
      const parsed = parseSafetensors(await Deno.readFile(mine), mine);
      deepStrictEqual([...parsed.keys()], ["a", "b"]);
      deepStrictEqual(parsed.get("a")!.shape, [2, 3]);
      deepStrictEqual([...parsed.get("a")!.data], [0, 1, 2, 3, 4, 5]);
      deepStrictEqual([parsed.get("b")!.dtype, ...parsed.get("b")!.data], ["F16", 0.5, -1]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);
