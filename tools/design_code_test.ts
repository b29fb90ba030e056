/**
 * The six design-code tools against a real HTTP server on loopback playing
 * the backend internal API (`mod/backend/testing.ts`). Handlers are called
 * directly with a constructed ToolContext; the MCP layer is the server's e2e.
 *
 * Expected requests and results are written from the design-code HTTP I/O contract
 * (tables "MCP から Backend Internal API", "MCP 出力", "Error response" and the
 * scenario table), not from the implementation's output.
 */

import { deepStrictEqual, ok, strictEqual } from "node:assert";
import type { z } from "zod";
import type { Scope, ToolContext, ToolDefinition, ToolResult } from "../mod/mcp/tool.ts";
import { createBackendClient } from "../mod/backend/mod.ts";
import { closedPortUrl, type FakeBackend, startFakeBackend } from "../mod/backend/testing.ts";
import {
  createDesignCodeTools,
  createDesignCodeToolsIfConfigured,
  DESIGN_CODE_TOOL_NAMES,
  designCodeToolsEnabled,
} from "./design_code.ts";
import { registerSecret } from "../tests/helpers/log_secrets.ts";
import { DESIGN_CODE_TOOL_NAMES as CONTRACT_DESIGN_CODE_TOOL_NAMES } from "../tests/helpers/tool_names.ts";

const DESIGN_ID = "42_hDDA9BNori9OTXSClduXqR_40002029:37033";
/** encodeURIComponent(":") is "%3A" (RFC 3986 reserved character). */
const DESIGN_PATH = "42_hDDA9BNori9OTXSClduXqR_40002029%3A37033";
const CODE_ID = "0192a3b4-c5d6-4e8f-9a0b-1c2d3e4f5a6b";
const OTHER_DESIGN_ID = "7_hDDA9BNori9OTXSClduXqR_40002029:37033";
const NOW = "2026-06-28T00:00:00.000Z";
const API_KEY = "backend-internal-key";
registerSecret(API_KEY);

/** The contract's `get-des2code` success payload ("MCP 出力"). */
const DES2CODE_RESULT = {
  design_id: DESIGN_ID,
  status: "success",
  matched_code_count: 1,
  matched_codes: [
    {
      code_id: CODE_ID,
      name: "Button Primary",
      semantic_value: ["button", "primary", "cta"],
      similarity: 0.92,
      visual_similarity: 0.95,
      semantic_similarity: 0.89,
    },
  ],
  artifact: {
    bucket: "dev-guinness-backend",
    key:
      "1/42/des2code/42_hDDA9BNori9OTXSClduXqR_40002029%3A37033-20260628T000000000000Z-result.json",
    content_type: "application/json",
    expires_at: "2026-07-28T00:00:00.000Z",
  },
  error: null,
  processed_at: 1782604800000,
};

/** The contract's list item ("`list-designs` / `list-code` 成功"). */
const DESIGN_ITEM = {
  _id: DESIGN_ID,
  name: "Landing Page",
  project_id: 42,
  organization_id: 1,
  file_id: "hDDA9BNori9OTXSClduXqR",
  page_id: "page",
  node_id: "40002029:37033",
  component_id: null,
};

/** A code source as in the contract's `code-import` payload. */
const CODE_SOURCE = {
  _id: CODE_ID,
  organization_id: 1,
  project_id: 42,
  name: "Button Primary",
  type: 1,
  based_on: 0,
  source_code: "export function ButtonPrimary() { ... }",
  css_code: ".buttonPrimary { ... }",
  img_url: `s3://bucket/code/${CODE_ID}.png`,
};

function scope(projectId: number | null, permission: "read" | "write" = "write"): Scope {
  return { keyPrefix: "abc123", projectId, userId: 9, permission };
}

function context(
  scopeValue: Scope | undefined,
  signal = new AbortController().signal,
): ToolContext {
  return { signal, scope: scopeValue, progress: () => Promise.resolve() };
}

/** The six tools on a client of `url`, with the contract's example clock. */
function toolsFor(url: string, timeoutMs = 2000): Map<string, ToolDefinition> {
  const client = createBackendClient({ baseUrl: url, apiKey: API_KEY, timeoutMs });
  const tools = createDesignCodeTools(client, { now: () => new Date(NOW) });
  return new Map(tools.map((tool) => [tool.name, tool]));
}

/** Validates `args` the way the MCP server does, then runs the handler. */
async function call(
  tools: Map<string, ToolDefinition>,
  name: string,
  args: unknown,
  ctx: ToolContext = context(scope(42)),
): Promise<ToolResult> {
  const tool = tools.get(name);
  ok(tool, `no tool ${name}`);
  return await tool.handle(tool.validate.parse(args), ctx);
}

/** Runs `body` with a fresh fake backend and the tools on it. */
async function withBackend(
  reply: Parameters<typeof startFakeBackend>[0],
  body: (backend: FakeBackend, tools: Map<string, ToolDefinition>) => void | Promise<void>,
): Promise<void> {
  const backend = await startFakeBackend(reply);
  try {
    await body(backend, toolsFor(backend.url));
  } finally {
    await backend.close();
  }
}

function text(result: ToolResult, index = 0): string {
  const item = result.content[index];
  ok(item && item.type === "text", `content[${index}] is not text`);
  return item.text;
}

/** Asserts the contract's error shape with the exact text and error message. */
function assertError(result: ToolResult, action: string, error: string): void {
  deepStrictEqual(result, {
    content: [{ type: "text", text: `${action}: ${error}` }],
    structuredContent: { error, timestamp: NOW },
    isError: true,
  });
}

/** The headers every backend request must carry for a project-42 key. */
function assertContractHeaders(headers: Record<string, string>, projectId: string | undefined) {
  strictEqual(headers["accept"], "application/json");
  strictEqual(headers["content-type"], "application/json");
  strictEqual(headers["x-api-key"], API_KEY);
  strictEqual(headers["x-mcp-project-id"], projectId);
}

// ---------------------------------------------------------------------------
// Listing and schemas

Deno.test("createDesignCodeTools() lists the six contract tools with their schemas", async (t) => {
  const tools = createDesignCodeTools(
    createBackendClient({ baseUrl: "http://backend.invalid", timeoutMs: 1000 }),
  );
  // The contract's list (the tests' own copy), and the product's constant.
  deepStrictEqual(tools.map((tool) => tool.name), [...CONTRACT_DESIGN_CODE_TOOL_NAMES]);
  deepStrictEqual(tools.map((tool) => tool.name), [...DESIGN_CODE_TOOL_NAMES]);
  await t.assertSnapshot(
    tools.map(({ name, title, description, inputSchema, annotations }) => ({
      name,
      title,
      description,
      inputSchema,
      annotations,
    })),
    { serializer: (value) => JSON.stringify(value, null, 2) },
  );
});

Deno.test("design-code JSON Schemas match the contract's field tables", () => {
  const tools = toolsFor("http://backend.invalid");
  const idField = { type: "string", minLength: 1, maxLength: 255, pattern: "^[a-zA-Z0-9_:-]+$" };
  const positive = { type: "integer", minimum: 1 };
  const expected: Record<string, { properties: Record<string, object>; required: string[] }> = {
    "trigger-des2code": {
      properties: { design_id: idField, project_id: positive, organization_id: positive },
      required: ["design_id", "project_id", "organization_id"],
    },
    "get-des2code": { properties: { design_id: idField }, required: ["design_id"] },
    "list-designs": {
      properties: {
        project_id: positive,
        organization_id: positive,
        limit: { type: "integer", minimum: 1, maximum: 100, default: 20 },
        offset: { type: "integer", minimum: 0, default: 0 },
      },
      required: ["project_id"],
    },
    "get-design-detail": { properties: { design_id: idField }, required: ["design_id"] },
    "get-code-detail": { properties: { code_id: idField }, required: ["code_id"] },
  };
  expected["list-code"] = expected["list-designs"];
  for (const [name, want] of Object.entries(expected)) {
    const schema = tools.get(name)!.inputSchema as {
      type: string;
      properties: Record<string, Record<string, unknown>>;
      required: string[];
      additionalProperties: boolean;
    };
    strictEqual(schema.type, "object", name);
    strictEqual(schema.additionalProperties, false, name);
    deepStrictEqual(schema.required, want.required, name);
    deepStrictEqual(Object.keys(schema.properties), Object.keys(want.properties), name);
    for (const [field, constraints] of Object.entries(want.properties)) {
      const { description, ...rest } = schema.properties[field];
      deepStrictEqual(rest, constraints, `${name}.${field}`);
      ok(typeof description === "string" && description.length > 10, `${name}.${field}`);
    }
  }
});

Deno.test("design-code zod schemas accept and refuse what the JSON Schemas say", () => {
  const tools = toolsFor("http://backend.invalid");
  for (const tool of tools.values()) {
    const schema = tool.inputSchema as {
      properties: Record<string, unknown>;
      required: string[];
    };
    const shape = (tool.validate as z.ZodObject).shape;
    deepStrictEqual(Object.keys(shape), Object.keys(schema.properties), tool.name);
    for (const key of Object.keys(shape)) {
      // A key is required in JSON Schema exactly when zod refuses it missing.
      strictEqual(
        shape[key].safeParse(undefined).success,
        !schema.required.includes(key),
        `${tool.name}.${key}`,
      );
    }
  }
});

Deno.test("design-code annotations: only trigger-des2code writes; all call the backend", () => {
  for (const tool of toolsFor("http://backend.invalid").values()) {
    const isTrigger = tool.name === "trigger-des2code";
    strictEqual(tool.annotations.readOnlyHint, !isTrigger, tool.name);
    strictEqual(tool.annotations.destructiveHint, false, tool.name);
    strictEqual(tool.annotations.idempotentHint, !isTrigger, tool.name);
    strictEqual(tool.annotations.openWorldHint, true, tool.name);
  }
});

Deno.test("createDesignCodeToolsIfConfigured() lists no tools without BACKEND_INTERNAL_URL", () => {
  deepStrictEqual(createDesignCodeToolsIfConfigured({ baseUrl: undefined, timeoutMs: 1000 }), []);
  deepStrictEqual(createDesignCodeToolsIfConfigured({ baseUrl: "  ", timeoutMs: 1000 }), []);
  strictEqual(designCodeToolsEnabled(undefined), false);
  strictEqual(designCodeToolsEnabled(""), false);
  strictEqual(designCodeToolsEnabled("http://backend:3000"), true);
  deepStrictEqual(
    createDesignCodeToolsIfConfigured({ baseUrl: "http://backend:3000", timeoutMs: 1000 })
      .map((tool) => tool.name),
    [...DESIGN_CODE_TOOL_NAMES],
  );
});

// ---------------------------------------------------------------------------
// Requests and success results, with a key bound to project 42

Deno.test("trigger-des2code POSTs /internal/des2code and returns the contract result", async () => {
  await withBackend(
    () => ({ status: 202, json: { ok: true, data: { queued: true } } }),
    async (backend, tools) => {
      const result = await call(tools, "trigger-des2code", {
        design_id: DESIGN_ID,
        project_id: 42,
        organization_id: 1,
      });
      deepStrictEqual(result, {
        content: [{
          type: "text",
          text: `Successfully triggered des2code matching for design ID: ${DESIGN_ID}`,
        }],
        structuredContent: {
          success: true,
          design_id: DESIGN_ID,
          project_id: 42,
          organization_id: 1,
          timestamp: NOW,
        },
      });
      strictEqual(backend.requests.length, 1);
      const [request] = backend.requests;
      strictEqual(request.method, "POST");
      strictEqual(request.path, "/internal/des2code");
      strictEqual(request.query, "");
      assertContractHeaders(request.headers, "42");
      deepStrictEqual(JSON.parse(request.body), {
        design_id: DESIGN_ID,
        project_id: 42,
        organization_id: 1,
      });
    },
  );
});

Deno.test("get-des2code GETs /internal/des2code/{design_id} and returns the result object", async () => {
  for (const envelope of [true, false]) {
    await withBackend(
      () => ({
        json: envelope ? { ok: true, data: DES2CODE_RESULT, error: null } : DES2CODE_RESULT,
      }),
      async (backend, tools) => {
        const result = await call(tools, "get-des2code", { design_id: DESIGN_ID });
        strictEqual(result.isError, undefined);
        deepStrictEqual(result.structuredContent, DES2CODE_RESULT);
        strictEqual(
          text(result),
          `Des2Code result for design ID ${DESIGN_ID}: status success, 1 matched code`,
        );
        deepStrictEqual(JSON.parse(text(result, 1)), DES2CODE_RESULT);
        const [request] = backend.requests;
        strictEqual(request.method, "GET");
        strictEqual(request.path, `/internal/des2code/${DESIGN_PATH}`);
        strictEqual(request.query, "");
        strictEqual(request.body, "");
        assertContractHeaders(request.headers, "42");
      },
    );
  }
});

Deno.test("get-des2code treats an empty match list as success with count 0", async () => {
  const empty = { ...DES2CODE_RESULT, matched_code_count: 0, matched_codes: [] };
  await withBackend(() => ({ json: { ok: true, data: empty } }), async (_backend, tools) => {
    const result = await call(tools, "get-des2code", { design_id: DESIGN_ID });
    strictEqual(result.isError, undefined);
    deepStrictEqual(result.structuredContent, empty);
    strictEqual(
      text(result),
      `Des2Code result for design ID ${DESIGN_ID}: status success, 0 matched codes`,
    );
  });
});

Deno.test("list-designs GETs /internal/designs with the query and returns the contract page", async () => {
  await withBackend(
    () => ({ json: { ok: true, data: { total_count: 2, items: [DESIGN_ITEM, DESIGN_ITEM] } } }),
    async (backend, tools) => {
      const result = await call(tools, "list-designs", { project_id: 42, organization_id: 1 });
      deepStrictEqual(result.structuredContent, {
        project_id: 42,
        organization_id: 1,
        total_count: 2,
        returned_count: 2,
        limit: 20,
        offset: 0,
        items: [DESIGN_ITEM, DESIGN_ITEM],
      });
      strictEqual(
        text(result),
        "Found 2 designs in project 42; returned 2 (offset 0, limit 20)",
      );
      deepStrictEqual(JSON.parse(text(result, 1)), result.structuredContent);
      const [request] = backend.requests;
      strictEqual(request.method, "GET");
      strictEqual(request.path, "/internal/designs");
      strictEqual(request.query, "project_id=42&organization_id=1&limit=20&offset=0");
      strictEqual(request.body, "");
      assertContractHeaders(request.headers, "42");
    },
  );
});

Deno.test("list-code GETs /internal/code; organization_id is left out when not given", async () => {
  const items = [{ _id: CODE_ID, name: "Button Primary", project_id: 42, organization_id: 1 }];
  await withBackend(() => ({ json: items }), async (backend, tools) => {
    const result = await call(tools, "list-code", { project_id: 42, limit: 5, offset: 10 });
    deepStrictEqual(result.structuredContent, {
      project_id: 42,
      organization_id: null,
      total_count: 1,
      returned_count: 1,
      limit: 5,
      offset: 10,
      items,
    });
    strictEqual(text(result), "Found 1 code source in project 42; returned 1 (offset 10, limit 5)");
    const [request] = backend.requests;
    strictEqual(request.method, "GET");
    strictEqual(request.path, "/internal/code");
    strictEqual(request.query, "project_id=42&limit=5&offset=10");
    assertContractHeaders(request.headers, "42");
  });
});

Deno.test("list tools return an empty page as a success with count 0", async () => {
  await withBackend(
    () => ({ json: { ok: true, data: { items: [], total_count: 0 } } }),
    async (_b, tools) => {
      for (const name of ["list-designs", "list-code"]) {
        const result = await call(tools, name, { project_id: 42 });
        strictEqual(result.isError, undefined, name);
        deepStrictEqual(result.structuredContent, {
          project_id: 42,
          organization_id: null,
          total_count: 0,
          returned_count: 0,
          limit: 20,
          offset: 0,
          items: [],
        });
      }
    },
  );
});

Deno.test("get-design-detail GETs /internal/designs/{design_id} and returns { design }", async () => {
  const design = { ...DESIGN_ITEM, img_url: "s3://bucket/designs/x.png" };
  await withBackend(
    () => ({ json: { ok: true, data: { ...design, embedding: [0.1, 0.2] } } }),
    async (backend, tools) => {
      const result = await call(tools, "get-design-detail", { design_id: DESIGN_ID });
      deepStrictEqual(result.structuredContent, { design });
      strictEqual(text(result), `Design detail for design ID ${DESIGN_ID} (Landing Page)`);
      const [request] = backend.requests;
      strictEqual(request.method, "GET");
      strictEqual(request.path, `/internal/designs/${DESIGN_PATH}`);
      strictEqual(request.query, "");
      assertContractHeaders(request.headers, "42");
    },
  );
});

Deno.test("get-code-detail GETs /internal/code/{code_id} and returns { code }", async () => {
  await withBackend(() => ({ json: { code: CODE_SOURCE } }), async (backend, tools) => {
    const result = await call(tools, "get-code-detail", { code_id: CODE_ID });
    deepStrictEqual(result.structuredContent, { code: CODE_SOURCE });
    strictEqual(text(result), `Code detail for code ID ${CODE_ID} (Button Primary)`);
    const [request] = backend.requests;
    strictEqual(request.method, "GET");
    strictEqual(request.path, `/internal/code/${CODE_ID}`);
    strictEqual(request.query, "");
    assertContractHeaders(request.headers, "42");
  });
});

Deno.test("without a project scope (stdio, unbound key) X-MCP-Project-ID is omitted", async () => {
  await withBackend(() => ({ json: [] }), async (backend, tools) => {
    await call(tools, "list-designs", { project_id: 7 }, context(undefined));
    await call(tools, "list-designs", { project_id: 7 }, context(scope(null, "read")));
    strictEqual(backend.requests.length, 2);
    for (const request of backend.requests) {
      assertContractHeaders(request.headers, undefined);
      strictEqual(request.query, "project_id=7&limit=20&offset=0");
    }
  });
});

// ---------------------------------------------------------------------------
// Scenario table of the design-code HTTP I/O contract. Rows 1-3 (missing
// X-MCP-Token, malformed key, unknown/revoked/expired/deleted key → HTTP 401)
// belong to the HTTP transport and are tested there.

Deno.test("scenario: project/user scope mismatch → isError and the backend is not called", async () => {
  await withBackend(() => ({ json: {} }), async (backend, tools) => {
    const cases: Array<[string, Record<string, unknown>, string, string]> = [
      [
        "trigger-des2code",
        { design_id: DESIGN_ID, project_id: 7, organization_id: 1 },
        "Failed to trigger des2code matching",
        "project_id 7 is outside this API key's scope: the key is bound to project 42",
      ],
      [
        "trigger-des2code",
        { design_id: OTHER_DESIGN_ID, project_id: 42, organization_id: 1 },
        "Failed to trigger des2code matching",
        `design_id "${OTHER_DESIGN_ID}" belongs to project 7, outside this API key's scope: ` +
        "the key is bound to project 42",
      ],
      [
        "get-des2code",
        { design_id: OTHER_DESIGN_ID },
        "Failed to retrieve des2code result",
        `design_id "${OTHER_DESIGN_ID}" belongs to project 7, outside this API key's scope: ` +
        "the key is bound to project 42",
      ],
      [
        "list-designs",
        { project_id: 7 },
        "Failed to list designs",
        "project_id 7 is outside this API key's scope: the key is bound to project 42",
      ],
      [
        "list-code",
        { project_id: 43, organization_id: 1 },
        "Failed to list code",
        "project_id 43 is outside this API key's scope: the key is bound to project 42",
      ],
      [
        "get-design-detail",
        { design_id: "420_hDDA9BNori9OTXSClduXqR_1:2" },
        "Failed to retrieve design detail",
        'design_id "420_hDDA9BNori9OTXSClduXqR_1:2" belongs to project 420, outside this API ' +
        "key's scope: the key is bound to project 42",
      ],
      [
        "get-design-detail",
        { design_id: "Landing" },
        "Failed to retrieve design detail",
        'design_id "Landing" does not start with a project number ("<project_id>_…"), so it ' +
        "cannot be checked against this API key's project 42",
      ],
    ];
    for (const [name, args, action, error] of cases) {
      assertError(await call(tools, name, args), action, error);
    }
    strictEqual(backend.requests.length, 0);
  });
});

Deno.test("scenario: invalid tool arguments → field-level messages and the backend is not called", async () => {
  await withBackend(() => ({ json: {} }), (backend, tools) => {
    const issues = (name: string, args: unknown) => {
      const parsed = tools.get(name)!.validate.safeParse(args);
      ok(!parsed.success, `${name} accepted ${JSON.stringify(args)}`);
      return parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`);
    };
    deepStrictEqual(issues("trigger-des2code", { design_id: "a b", project_id: 0 }), [
      'design_id: must contain only letters, digits, "_", ":" and "-" (^[a-zA-Z0-9_:-]+$), ' +
      'got "a b"',
      "project_id: must be an integer greater than 0, got 0",
      "organization_id: is required",
    ]);
    deepStrictEqual(issues("list-designs", { project_id: 42, limit: 500 }), [
      "limit: must be an integer from 1 to 100, got 500",
    ]);
    deepStrictEqual(issues("list-code", { project_id: 42, offset: -5 }), [
      "offset: must be an integer of at least 0, got -5",
    ]);
    deepStrictEqual(issues("get-code-detail", { code_id: "" }), ["code_id: must not be empty"]);
    deepStrictEqual(issues("get-design-detail", { design_id: DESIGN_ID, extra: 1 }), [
      ': unknown argument "extra"; allowed: design_id',
    ]);
    strictEqual(backend.requests.length, 0);
  });
});

Deno.test("scenario: backend refuses the scope → mapped validation message", async () => {
  const replies = [
    {
      status: 403,
      json: {
        ok: false,
        data: null,
        error: { code: "FORBIDDEN", message: "Organization 2 does not own project 42" },
      },
    },
    { status: 422, json: { message: ["organization_id must match the project"] } },
    {
      status: 400,
      json: {
        ok: false,
        error: { code: "VALIDATION_ERROR", message: "Design is not in project 42" },
      },
    },
  ];
  const expected = [
    "Scope validation failed: Organization 2 does not own project 42",
    "Validation failed: organization_id must match the project",
    "Validation failed: Design is not in project 42",
  ];
  for (const [index, reply] of replies.entries()) {
    await withBackend(() => reply, async (backend, tools) => {
      const result = await call(tools, "trigger-des2code", {
        design_id: DESIGN_ID,
        project_id: 42,
        organization_id: 2,
      });
      assertError(result, "Failed to trigger des2code matching", expected[index]);
      strictEqual(backend.requests.length, 1);
    });
  }
});

Deno.test("scenario: backend SQS dispatch failure → isError", async () => {
  await withBackend(
    () => ({
      status: 502,
      json: {
        ok: false,
        data: null,
        error: { code: "SQS_DISPATCH_FAILED", message: "Failed to send des2code message" },
      },
    }),
    async (_backend, tools) => {
      const result = await call(tools, "trigger-des2code", {
        design_id: DESIGN_ID,
        project_id: 42,
        organization_id: 1,
      });
      assertError(
        result,
        "Failed to trigger des2code matching",
        "Backend service unavailable (HTTP 502): Failed to send des2code message",
      );
    },
  );
  await withBackend(
    () => ({ status: 500, json: { message: "SQS send failed" } }),
    async (_b, tools) => {
      const result = await call(tools, "trigger-des2code", {
        design_id: DESIGN_ID,
        project_id: 42,
        organization_id: 1,
      });
      assertError(
        result,
        "Failed to trigger des2code matching",
        "Backend error (HTTP 500): SQS send failed",
      );
    },
  );
});

Deno.test("scenario: backend result API returns not found → mapped not-found message", async () => {
  // The contract's own "Error response" example, end to end.
  await withBackend(
    () => ({
      status: 404,
      json: {
        ok: false,
        data: null,
        error: { code: "NOT_FOUND", message: "Des2Code result not found for this design" },
      },
    }),
    async (_backend, tools) => {
      deepStrictEqual(await call(tools, "get-des2code", { design_id: DESIGN_ID }), {
        content: [{
          type: "text",
          text: "Failed to retrieve des2code result: Des2Code result not found for this design",
        }],
        structuredContent: {
          error: "Des2Code result not found for this design",
          timestamp: NOW,
        },
        isError: true,
      });
    },
  );
  await withBackend(() => ({ status: 404, text: "Not Found" }), async (_backend, tools) => {
    assertError(
      await call(tools, "get-design-detail", { design_id: DESIGN_ID }),
      "Failed to retrieve design detail",
      `Design not found: ${DESIGN_ID}`,
    );
    assertError(
      await call(tools, "get-code-detail", { code_id: CODE_ID }),
      "Failed to retrieve code detail",
      `Code not found: ${CODE_ID}`,
    );
    assertError(
      await call(tools, "list-designs", { project_id: 42 }),
      "Failed to list designs",
      "Project not found: 42",
    );
  });
});

Deno.test("scenario: backend internal API unreachable → service-unavailable text", async () => {
  const tools = toolsFor(closedPortUrl());
  assertError(
    await call(tools, "list-code", { project_id: 42 }),
    "Failed to list code",
    "Backend service unavailable: the backend internal API could not be reached",
  );
  assertError(
    await call(tools, "trigger-des2code", {
      design_id: DESIGN_ID,
      project_id: 42,
      organization_id: 1,
    }),
    "Failed to trigger des2code matching",
    "Backend service unavailable: the backend internal API could not be reached",
  );
});

Deno.test("scenario: backend internal API times out → service-unavailable text", async () => {
  const backend = await startFakeBackend(() => ({ hang: true }));
  try {
    const tools = toolsFor(backend.url, 200);
    assertError(
      await call(tools, "get-des2code", { design_id: DESIGN_ID }),
      "Failed to retrieve des2code result",
      "Backend service unavailable: the backend internal API did not answer within 200 ms",
    );
    strictEqual(backend.requests.length, 1);
  } finally {
    await backend.close();
  }
});

Deno.test("scenario: downstream AI-v2 read returns ok:false → isError", async () => {
  const aiError = {
    ok: false,
    data: null,
    error: { code: "AI_READ_FAILED", message: "AI-v2 read failed" },
  };
  // The backend may pass the failure on with an error status or inside a 200 envelope.
  await withBackend(() => ({ status: 502, json: aiError }), async (_backend, tools) => {
    assertError(
      await call(tools, "list-designs", { project_id: 42 }),
      "Failed to list designs",
      "Backend service unavailable (HTTP 502): AI-v2 read failed",
    );
  });
  await withBackend(() => ({ status: 200, json: aiError }), async (_backend, tools) => {
    assertError(
      await call(tools, "get-design-detail", { design_id: DESIGN_ID }),
      "Failed to retrieve design detail",
      "Backend error (AI_READ_FAILED): AI-v2 read failed",
    );
  });
  await withBackend(
    () => ({
      status: 200,
      json: { ok: false, data: null, error: { code: "NOT_FOUND", message: "Code not found" } },
    }),
    async (_backend, tools) => {
      assertError(
        await call(tools, "get-code-detail", { code_id: CODE_ID }),
        "Failed to retrieve code detail",
        `Code not found: ${CODE_ID} (Code not found)`,
      );
    },
  );
});

// ---------------------------------------------------------------------------
// Other failures

Deno.test("design-code tools report invalid JSON and unusable payloads as tool errors", async () => {
  await withBackend(() => ({ text: "<<not json>>" }), async (_backend, tools) => {
    assertError(
      await call(tools, "list-designs", { project_id: 42 }),
      "Failed to list designs",
      'Invalid backend response: the backend returned a body that is not valid JSON (HTTP 200): "<<not json>>"',
    );
  });
  await withBackend(() => ({ json: { ok: true, data: [1, 2] } }), async (_backend, tools) => {
    assertError(
      await call(tools, "get-des2code", { design_id: DESIGN_ID }),
      "Failed to retrieve des2code result",
      "Invalid backend response: expected a des2code result object, got an array",
    );
    assertError(
      await call(tools, "get-code-detail", { code_id: CODE_ID }),
      "Failed to retrieve code detail",
      "Invalid backend response: expected a code object, got an array",
    );
  });
  await withBackend(() => ({ json: { count: 3 } }), async (_backend, tools) => {
    assertError(
      await call(tools, "list-code", { project_id: 42 }),
      "Failed to list code",
      'Invalid backend response: expected a list, or an object with an array in "items", ' +
        '"code", "codes", "results", got an object with keys count',
    );
  });
});

Deno.test("get-code-detail withholds a record of another project", async () => {
  await withBackend(
    () => ({ json: { ...CODE_SOURCE, project_id: 7 } }),
    async (_backend, tools) => {
      assertError(
        await call(tools, "get-code-detail", { code_id: CODE_ID }),
        "Failed to retrieve code detail",
        "Scope validation failed: the backend returned a code of project 7, outside this API " +
          "key's scope (project 42)",
      );
    },
  );
});

Deno.test("design-code tools stop when the client cancels", async () => {
  const controller = new AbortController();
  await withBackend(() => {
    controller.abort();
    return { hang: true };
  }, async (backend, tools) => {
    assertError(
      await call(tools, "list-designs", { project_id: 42 }, context(scope(42), controller.signal)),
      "Failed to list designs",
      "Request cancelled: the request was cancelled",
    );
    strictEqual(backend.requests.length, 1);
  });
});
