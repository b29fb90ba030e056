import { deepStrictEqual, match, strictEqual } from "node:assert";
import type { Scope } from "./tool.ts";
import { checkToolScope, toolsForScope } from "./tool_scope.ts";

const read: Scope = { keyPrefix: "pfxRead", projectId: 42, userId: 7, permission: "read" };
const write: Scope = { keyPrefix: "pfxWrite", projectId: 42, userId: 7, permission: "write" };

Deno.test("read keys may call only read-only tools; write keys and stdio every tool", () => {
  strictEqual(checkToolScope(read, true), null);
  match(
    checkToolScope(read, false) ?? "",
    /pfxRead has read permission.*needs a key with write permission/,
  );
  strictEqual(checkToolScope(write, true), null);
  strictEqual(checkToolScope(write, false), null);
  strictEqual(checkToolScope(undefined, false), null);
});

Deno.test("a read key is listed only the read-only tools; write keys and stdio all of them", () => {
  const tools = [
    { name: "make", annotations: { readOnlyHint: false } },
    { name: "look", annotations: { readOnlyHint: true } },
    { name: "stop", annotations: { readOnlyHint: false } },
    { name: "list", annotations: { readOnlyHint: true } },
  ];
  const names = (scope: Scope | undefined) => toolsForScope(scope, tools).map((t) => t.name);
  deepStrictEqual(names(read), ["look", "list"]);
  deepStrictEqual(names(write), ["make", "look", "stop", "list"]);
  deepStrictEqual(names(undefined), ["make", "look", "stop", "list"]);
});
