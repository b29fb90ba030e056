import { strictEqual, throws } from "node:assert";
import { buildBackendUrl } from "./backend_url.ts";

Deno.test("buildBackendUrl() percent-encodes each path segment on its own", () => {
  // RFC 3986 reserved characters ":" and "/" become %3A and %2F inside a segment;
  // unreserved "_", "-" stay as they are.
  strictEqual(
    buildBackendUrl("http://backend:3000", ["internal", "des2code", "42_a-b_1:2"]),
    "http://backend:3000/internal/des2code/42_a-b_1%3A2",
  );
  strictEqual(
    buildBackendUrl("http://backend", ["internal", "code", "a/b?c#d"]),
    "http://backend/internal/code/a%2Fb%3Fc%23d",
  );
});

Deno.test("buildBackendUrl() keeps the base path prefix with or without a trailing slash", () => {
  strictEqual(
    buildBackendUrl("https://host/api", ["internal", "designs"]),
    "https://host/api/internal/designs",
  );
  strictEqual(
    buildBackendUrl("https://host/api//", ["internal", "designs"]),
    "https://host/api/internal/designs",
  );
});

Deno.test("buildBackendUrl() builds the query from defined values only, in order", () => {
  strictEqual(
    buildBackendUrl("http://h", ["internal", "code"], {
      project_id: 42,
      organization_id: undefined,
      limit: 20,
      offset: 0,
      extra: null,
    }),
    "http://h/internal/code?project_id=42&limit=20&offset=0",
  );
  strictEqual(buildBackendUrl("http://h", ["x"], { a: undefined }), "http://h/x");
  strictEqual(buildBackendUrl("http://h", ["x"], { q: "a b&c" }), "http://h/x?q=a+b%26c");
});

Deno.test("buildBackendUrl() refuses dot and empty segments, which URL parsing would resolve", () => {
  for (const segment of [".", "..", ""]) {
    throws(
      () => buildBackendUrl("http://h", ["internal", "code", segment]),
      (error: unknown) =>
        error instanceof TypeError && error.message.includes(JSON.stringify(segment)),
    );
  }
});
