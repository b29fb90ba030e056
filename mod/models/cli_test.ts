import { deepStrictEqual, strictEqual } from "node:assert";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { main } from "./cli.ts";
import { startFixtureServer } from "./fixture_server.ts";

Deno.test("cli: downloads what the lock lists, then finds it present", async () => {
  const content = new TextEncoder().encode("scheduler config bytes");
  const sha = createHash("sha256").update(content).digest("hex");
  const dir = await Deno.makeTempDir({ prefix: "models_cli_" });
  const server = await startFixtureServer(content);
  try {
    const lock = join(dir, "models.lock");
    await Deno.writeTextFile(
      lock,
      `[[file]]\ncomponent = "scheduler"\npath = "sd15/scheduler/scheduler_config.json"\n` +
        `url = "${server.url}"\nsize = ${content.length}\nsha256 = "${sha}"\n\n` +
        `[[file]]\ncomponent = "depth"\npath = "annotators/depth.onnx"\n` +
        `url = "${server.url}"\nsize = 1\nsha256 = "${"0".repeat(64)}"\n`,
    );
    const root = join(dir, "models");
    strictEqual(await main(["--all", "--lock", lock, "--root", root, "--only", "scheduler"]), 0);
    deepStrictEqual(
      await Deno.readFile(join(root, "sd15/scheduler/scheduler_config.json")),
      content,
    );
    strictEqual(server.requests.length, 1);
    strictEqual(await main(["--all", "--lock", lock, "--root", root, "--only", "scheduler"]), 0);
    strictEqual(server.requests.length, 1, "second run finds the file present");
    // The depth entry's size disagrees with what the server sends: exit 1.
    strictEqual(await main(["--all", "--lock", lock, "--root", root, "--only", "depth"]), 1);
    // Usage and lock errors: exit 2.
    strictEqual(await main(["--all", "--lock", lock, "--root", root, "--only", "nope"]), 2);
    strictEqual(await main(["--bogus"]), 2);
    strictEqual(await main(["--all", "--lock", join(dir, "missing.lock"), "--root", root]), 2);
  } finally {
    await server.close();
    await Deno.remove(dir, { recursive: true });
  }
});
