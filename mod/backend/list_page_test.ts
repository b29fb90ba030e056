import { deepStrictEqual, ok, strictEqual } from "node:assert";
import { toListPage } from "./list_page.ts";

const ARGS = { project_id: 42, organization_id: 1, limit: 20, offset: 0 };
const ITEM = { _id: "42_f_1:2", name: "Landing Page" };

Deno.test("toListPage() passes the backend's totals and paging through", () => {
  const listed = toListPage(
    { total_count: 57, limit: 10, offset: 20, items: [ITEM] },
    { project_id: 42, limit: 50, offset: 20 },
    ["designs"],
  );
  deepStrictEqual(listed, {
    ok: true,
    page: {
      project_id: 42,
      organization_id: null,
      total_count: 57,
      returned_count: 1,
      limit: 10,
      offset: 20,
      items: [ITEM],
    },
  });
});

Deno.test("toListPage() accepts a bare array and resource-named arrays", () => {
  for (
    const data of [[ITEM, ITEM], { designs: [ITEM, ITEM] }, { results: [ITEM, ITEM], total: 2 }]
  ) {
    const listed = toListPage(data, ARGS, ["designs"]);
    ok(listed.ok);
    if (!listed.ok) continue;
    strictEqual(listed.page.total_count, 2);
    strictEqual(listed.page.returned_count, 2);
    strictEqual(listed.page.limit, 20);
    strictEqual(listed.page.offset, 0);
    strictEqual(listed.page.organization_id, 1);
  }
});

Deno.test("toListPage() makes an empty list a success with count 0", () => {
  deepStrictEqual(toListPage({ items: [], total_count: 0 }, ARGS, ["designs"]), {
    ok: true,
    page: {
      project_id: 42,
      organization_id: 1,
      total_count: 0,
      returned_count: 0,
      limit: 20,
      offset: 0,
      items: [],
    },
  });
});

Deno.test("toListPage() refuses payloads without an item array", () => {
  for (
    const [data, got] of [[null, "null"], [{ count: 3 }, "an object with keys count"], [
      "x",
      "string",
    ]] as const
  ) {
    const listed = toListPage(data, ARGS, ["designs"]);
    strictEqual(listed.ok, false);
    if (!listed.ok) ok(listed.message.endsWith(`got ${got}`), listed.message);
  }
});

Deno.test("toListPage() names at most ten keys of an unusable payload, each cut short", () => {
  const data = Object.fromEntries(
    Array.from({ length: 5_000 }, (_, i) => [`${"k".repeat(100)}${i}`, i]),
  );
  const listed = toListPage(data, { project_id: 1, limit: 20, offset: 0 }, ["designs"]);
  ok(!listed.ok);
  if (listed.ok) return;
  ok(listed.message.length < 1_000, `message of ${listed.message.length} characters`);
  ok(listed.message.endsWith("and 4990 more"), listed.message);
});
