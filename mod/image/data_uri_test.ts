import { strictEqual } from "node:assert";
import { splitImageString } from "./data_uri.ts";
import { throwsImage } from "./testing.ts";

Deno.test("raw base64 has no declared type and is the whole payload", () => {
  const split = splitImageString("input_image", "iVBORw0KGgo=");
  strictEqual(split.declared, null);
  strictEqual(split.payload, "iVBORw0KGgo=");
});

Deno.test("data:image/png, image/jpeg and image/jpg are accepted", () => {
  const cases: Array<[string, string]> = [
    ["data:image/png;base64,", "png"],
    ["data:image/jpeg;base64,", "jpeg"],
    ["data:image/jpg;base64,", "jpeg"],
  ];
  for (const [prefix, format] of cases) {
    const split = splitImageString("input_image", prefix + "QUJD");
    strictEqual(split.declared, format, prefix);
    strictEqual(split.payload, "QUJD");
  }
});

Deno.test("the data URI prefix is case-insensitive (RFC 2397 / RFC 2045)", () => {
  const split = splitImageString("mask_image", "DATA:Image/PNG;BASE64,QUJD");
  strictEqual(split.declared, "png");
  strictEqual(split.declaredType, "Image/PNG");
  strictEqual(split.payload, "QUJD");
});

Deno.test("other data URI media types are unsupported", () => {
  throwsImage(
    () => splitImageString("input_image", "data:image/gif;base64,R0lGODlh"),
    "input_image",
    '"image/gif" is not supported',
  );
  throwsImage(() => splitImageString("input_image", "data:text/plain;base64,QUJD"), "text/plain");
});

Deno.test("a data URI without ;base64 is rejected", () => {
  throwsImage(
    () => splitImageString("mask_image", "data:image/png,QUJD"),
    "mask_image",
    'missing ";base64"',
  );
});

Deno.test("a data URI with parameters or without a comma is rejected", () => {
  throwsImage(
    () => splitImageString("input_image", "data:image/png;charset=utf-8;base64,QUJD"),
    "parameters",
  );
  throwsImage(() => splitImageString("input_image", "data:image/png;base64QUJD"), 'no ","');
});

Deno.test("an empty value is rejected", () => {
  throwsImage(() => splitImageString("input_image", ""), "input_image: is empty");
});
