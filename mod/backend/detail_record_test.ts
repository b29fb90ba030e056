import { deepStrictEqual, strictEqual } from "node:assert";
import { toDetailRecord } from "./detail_record.ts";

Deno.test("toDetailRecord() accepts the record itself or already wrapped", () => {
  const design = { _id: "42_f_1:2", name: "Landing Page", project_id: 42 };
  deepStrictEqual(toDetailRecord(design, "design"), { ok: true, record: design });
  deepStrictEqual(toDetailRecord({ design }, "design"), { ok: true, record: design });
  // A record that merely has a "code" field among others is not a wrapper.
  const code = { code: { nested: true }, name: "Button" };
  deepStrictEqual(toDetailRecord(code, "code"), { ok: true, record: code });
});

Deno.test("toDetailRecord() drops embedding fields", () => {
  deepStrictEqual(
    toDetailRecord(
      { name: "Button", embedding: [0.1], visual_embedding: [0.2], text: "x" },
      "code",
    ),
    { ok: true, record: { name: "Button", text: "x" } },
  );
});

Deno.test("toDetailRecord() refuses non-object payloads", () => {
  for (const [data, got] of [[null, "null"], [[1], "an array"], [3, "number"]] as const) {
    const detail = toDetailRecord(data, "design");
    strictEqual(detail.ok, false);
    if (!detail.ok) {
      strictEqual(detail.message, `Invalid backend response: expected a design object, got ${got}`);
    }
  }
});
