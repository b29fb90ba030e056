import assert from "node:assert/strict";
import { JOB_ID_PATTERN, newJobId } from "./job_id.ts";

Deno.test("job ids are URL-safe, 128 random bits, and never repeat", () => {
  const ids = new Set<string>();
  for (let i = 0; i < 1000; i++) {
    const id = newJobId();
    assert.match(id, JOB_ID_PATTERN);
    assert.equal(encodeURIComponent(id), id);
    const bits = Uint8Array.fromBase64(id.slice(4), { alphabet: "base64url" }).length * 8;
    assert.equal(bits, 128);
    ids.add(id);
  }
  assert.equal(ids.size, 1000);
});
