/**
 * Test Worker: the real engine behind the real host, except that a request
 * whose positive prompt is "__crash__" crashes the Worker (an uncaught
 * error) and "__oom__" fails the way ONNX Runtime reports an exhausted
 * allocator.
 *
 * @module
 */

import { createEngine } from "./engine.ts";
import { serveEngine } from "./worker_host.ts";

serveEngine(async (config) => {
  const engine = await createEngine(config);
  return {
    get info() {
      return engine.info;
    },
    release: () => engine.release(),
    generate(request, options) {
      if (request.positive === "__crash__") {
        setTimeout(() => {
          throw new Error("deliberate test crash");
        }, 0);
      }
      if (request.positive === "__oom__") {
        return Promise.reject(
          new Error(
            "unet: run failed: [ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Failed to allocate " +
              "memory for requested buffer of size 4294967296",
          ),
        );
      }
      return engine.generate(request, options);
    },
  };
});
