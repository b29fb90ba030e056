/**
 * Tests that cannot run on every machine (no PostgreSQL server, no tmpfs, no
 * container runtime, not root) are ignored with their reason in their name,
 * so `deno task test`'s list of ignored tests says why each one did not run.
 *
 * @module
 */

/** The `name` and `ignore` of a `Deno.test` (or `t.step`) definition. */
export interface IgnorableTest {
  /** The test's name; when ignored, followed by ` [ignored: <reason>]`. */
  name: string;
  /** Whether the test is ignored. */
  ignore: boolean;
}

/**
 * `{ name, ignore }` for a test that runs only where `reason` is undefined.
 *
 * @param reason Why the test cannot run here, e.g. "DATABASE_URL is unset"; undefined when it can.
 * @param name The test's name.
 */
export function ignoredFor(reason: string | undefined, name: string): IgnorableTest {
  return reason === undefined
    ? { name, ignore: false }
    : { name: `${name} [ignored: ${reason}]`, ignore: true };
}
