import { ok, strictEqual, throws } from "node:assert";
import { parse } from "smol-toml";
import { ConfigEditError, editConfigText } from "./edit.ts";

const REPO_CONFIG = new URL("../../config.toml", import.meta.url).pathname;

Deno.test("editConfigText: a value is replaced in place, its comment kept", async () => {
  const text = await Deno.readTextFile(REPO_CONFIG);
  const out = editConfigText(text, [
    { section: "models", key: "base", value: '"my-sd15"' },
    { section: "controlnet.depth", key: "model", value: '"cn/my-depth.onnx"' },
    { section: "lora", key: "files", value: '[{ path = "lora/a.safetensors", weight = 1.0 }]' },
  ]);
  const before = text.split("\n");
  const after = out.split("\n");
  strictEqual(after.length, before.length, "no line added or removed");
  const changed = after.filter((l, i) => l !== before[i]);
  strictEqual(changed.length, 3, changed.join("\n"));
  ok(changed[0].startsWith('base = "my-sd15"') && changed[0].includes("# SD 1.5 ONNX folder"));
  const doc = parse(out) as Record<string, Record<string, Record<string, unknown>>>;
  strictEqual(doc.models.base, "my-sd15");
  strictEqual((doc.controlnet.depth as Record<string, unknown>).model, "cn/my-depth.onnx");
});

Deno.test("editConfigText: a missing key joins its section, a missing section is appended", () => {
  const out = editConfigText('[models]\nroot = "m"\n\n[runtime]\nintra_op_threads = 1\n', [
    { section: "models", key: "base", value: '"x"' },
    { section: "controlnet.inpaint", key: "model", value: '"cn/i.onnx"' },
  ]);
  strictEqual(
    out,
    '[models]\nroot = "m"\nbase = "x"\n\n[runtime]\nintra_op_threads = 1\n\n' +
      '[controlnet.inpaint]\nmodel = "cn/i.onnx"\n',
  );
  strictEqual(
    editConfigText("", [{ section: "models", key: "base", value: '"x"' }]),
    '[models]\nbase = "x"\n',
  );
});

Deno.test("editConfigText: what it cannot edit safely is refused, not broken", () => {
  throws(
    () =>
      editConfigText('[lora]\nfiles = [\n  { path = "lora/a.safetensors" },\n]\n', [
        { section: "lora", key: "files", value: "[]" },
      ]),
    ConfigEditError,
  );
  throws(
    () => editConfigText('models.base = "x"\n', [{ section: "models", key: "base", value: '"y"' }]),
    ConfigEditError,
  );
  throws(() => editConfigText("[models\n", []), /not valid TOML/);
});
