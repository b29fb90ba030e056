/**
 * Building the standalone binary (`deno task compile`, run by `cli.ts`):
 * where the embedded Deno runtime comes from, and the `deno compile`
 * command line.
 *
 * @module
 */

export {
  cachedZipPath,
  denortZipName,
  downloadUrl,
  howToProvide,
  locateRuntime,
  type RuntimeLookup,
  RuntimeMissing,
  type RuntimeSource,
} from "./runtime.ts";
export {
  BINARY_PATH,
  binaryPathFor,
  compileArgs,
  foreignNativePackages,
  type NodePlatform,
  nodePlatformOf,
  WORKER_MODULE,
} from "./plan.ts";
