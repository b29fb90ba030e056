import { deepStrictEqual, strictEqual } from "node:assert";
import { ToolError } from "../mcp/tool.ts";
import { CancelledError, classifyError, isOutOfMemory } from "./errors.ts";

Deno.test("isOutOfMemory: ORT allocator and V8 buffer failures, also as a cause", () => {
  strictEqual(
    isOutOfMemory(
      new Error(
        "unet: run failed: [ONNXRuntimeError] : 6 : Failed to allocate memory for requested buffer of size 1073741824",
      ),
    ),
    true,
  );
  strictEqual(isOutOfMemory(new RangeError("Array buffer allocation failed")), true);
  strictEqual(isOutOfMemory(new Error("outer", { cause: new Error("std::bad_alloc") })), true);
  strictEqual(isOutOfMemory(new Error("unet input `timestep`: expected float32")), false);
});

Deno.test("classifyError: cancelled, tool categories, out of memory, inference", () => {
  strictEqual(classifyError(new CancelledError()).category, "cancelled");
  deepStrictEqual(classifyError(new ToolError("configuration", "disabled")), {
    category: "configuration",
    message: "disabled",
  });
  strictEqual(
    classifyError(new RangeError("Array buffer allocation failed")).category,
    "out_of_memory",
  );
  deepStrictEqual(classifyError(new Error("boom")), {
    category: "inference",
    message: "inference failed: boom",
  });
});
