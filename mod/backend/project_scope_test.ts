import { strictEqual } from "node:assert";
import type { Scope } from "../mcp/tool.ts";
import {
  designProjectNumber,
  designScopeRefusal,
  projectScopeRefusal,
  recordScopeRefusal,
} from "./project_scope.ts";

function scope(projectId: number | null): Scope {
  return { keyPrefix: "abc", projectId, userId: 7, permission: "read" };
}

const DESIGN_ID = "42_hDDA9BNori9OTXSClduXqR_40002029:37033";

Deno.test("designProjectNumber() reads the digits before the first underscore", () => {
  strictEqual(designProjectNumber(DESIGN_ID), "42");
  strictEqual(designProjectNumber("7_file_1:2"), "7");
  strictEqual(designProjectNumber("042_file"), "042");
  strictEqual(designProjectNumber("hDDA_42_x"), undefined);
  strictEqual(designProjectNumber("42"), undefined);
  strictEqual(designProjectNumber("42a_x"), undefined);
});

Deno.test("projectScopeRefusal() allows no scope, unbound keys and the key's own project", () => {
  strictEqual(projectScopeRefusal(undefined, 7), undefined);
  strictEqual(projectScopeRefusal(scope(null), 7), undefined);
  strictEqual(projectScopeRefusal(scope(42), 42), undefined);
  strictEqual(
    projectScopeRefusal(scope(42), 7),
    "project_id 7 is outside this API key's scope: the key is bound to project 42",
  );
});

Deno.test("designScopeRefusal() refuses other projects' and unnumbered design ids", () => {
  strictEqual(designScopeRefusal(undefined, "7_x"), undefined);
  strictEqual(designScopeRefusal(scope(null), "7_x"), undefined);
  strictEqual(designScopeRefusal(scope(42), DESIGN_ID), undefined);
  strictEqual(
    designScopeRefusal(scope(42), "7_hDDA9BNori9OTXSClduXqR_1:2"),
    'design_id "7_hDDA9BNori9OTXSClduXqR_1:2" belongs to project 7, outside this API key\'s ' +
      "scope: the key is bound to project 42",
  );
  // "420_" and "4_" share a prefix with 42 but are other projects.
  strictEqual(typeof designScopeRefusal(scope(42), "420_f_1"), "string");
  strictEqual(typeof designScopeRefusal(scope(42), "4_f_1"), "string");
  strictEqual(typeof designScopeRefusal(scope(42), "042_f_1"), "string");
  strictEqual(
    designScopeRefusal(scope(42), "landing"),
    'design_id "landing" does not start with a project number ("<project_id>_…"), so it ' +
      "cannot be checked against this API key's project 42",
  );
});

Deno.test("recordScopeRefusal() withholds a record of another project", () => {
  strictEqual(recordScopeRefusal(scope(42), { project_id: 42 }, "code"), undefined);
  strictEqual(recordScopeRefusal(scope(42), { name: "no project" }, "code"), undefined);
  strictEqual(recordScopeRefusal(scope(null), { project_id: 7 }, "code"), undefined);
  strictEqual(recordScopeRefusal(undefined, { project_id: 7 }, "code"), undefined);
  strictEqual(
    recordScopeRefusal(scope(42), { project_id: 7 }, "code"),
    "Scope validation failed: the backend returned a code of project 7, outside this API " +
      "key's scope (project 42)",
  );
});
