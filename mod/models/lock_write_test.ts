import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { type LockEntry, parseModelsLock } from "./lock.ts";
import { ADDED_MARK, entryToml, updateLockText } from "./lock_write.ts";

const sha = (c: string) => c.repeat(64);
const local = (path: string, c = "a"): LockEntry => ({
  component: "unet",
  path,
  size: 7,
  sha256: sha(c),
});

const SHIPPED = `# a header comment
# --- a group note

[[file]]
component = "unet"
path = "sd15/unet/model.onnx"
url = "https://huggingface.co/o/r/resolve/${"0".repeat(40)}/unet/model.onnx"
size = 1
sha256 = "${sha("b")}"
`;

Deno.test("entryToml: the five-key layout, no url line for a local file", () => {
  strictEqual(
    entryToml(local("x/unet/model.onnx")),
    `[[file]]\ncomponent = "unet"\npath = "x/unet/model.onnx"\nsize = 7\nsha256 = "${sha("a")}"\n`,
  );
});

Deno.test("updateLockText: appends without touching a byte of the old text", () => {
  const { text, replaced } = updateLockText(SHIPPED, [local("x/unet/model.onnx")], ["from x"]);
  strictEqual(replaced, 0);
  ok(text.startsWith(SHIPPED.trimEnd() + "\n\n"), text);
  ok(text.includes(`${ADDED_MARK}\n# from x\n\n[[file]]`), text);
  deepStrictEqual(parseModelsLock(text).map((e) => [e.path, e.url === undefined]), [
    ["sd15/unet/model.onnx", false],
    ["x/unet/model.onnx", true],
  ]);
});

Deno.test("updateLockText: locking a path again replaces its entry and drops the empty group", () => {
  const first = updateLockText(SHIPPED, [local("x/a"), local("x/b")], ["from x"]).text;
  const second = updateLockText(first, [local("x/a", "c"), local("x/b", "d")], ["from x again"]);
  strictEqual(second.replaced, 2);
  const entries = parseModelsLock(second.text);
  deepStrictEqual(entries.map((e) => [e.path, e.sha256[0]]), [
    ["sd15/unet/model.onnx", "b"],
    ["x/a", "c"],
    ["x/b", "d"],
  ]);
  strictEqual(second.text.split(ADDED_MARK).length, 2, second.text);
  ok(!second.text.includes("# from x\n"), "the old group comment went with its entries");
  // Replacing one shipped entry keeps the other lines around it.
  const over = updateLockText(SHIPPED, [local("sd15/unet/model.onnx")], ["own unet"]).text;
  ok(over.startsWith("# a header comment\n# --- a group note\n"), over);
  strictEqual(parseModelsLock(over).length, 1);
});

Deno.test("updateLockText: a new lock gets a header; a broken lock is refused", () => {
  const { text } = updateLockText("", [local("x/a")], []);
  ok(text.startsWith("# models.lock"), text);
  strictEqual(parseModelsLock(text).length, 1);
  throws(
    () => updateLockText("[[file]]\ncomponent = 3\n", [local("x/a")], []),
    /missing field "path"/,
  );
});
