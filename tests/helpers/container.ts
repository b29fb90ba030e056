/**
 * Podman for the container test, as it runs on a machine without an image
 * registry: Debian's podman and runc, the vfs storage driver, cgroupfs, no
 * default ulimits, the storage kept in a cache folder outside the repository
 * (`~/.cache/generate-image-sd15-mcp/container`, `$SD_MCP_CONTAINER_CACHE`
 * overrides) so that reruns reuse the base image. The base is a Debian 12
 * root built from Debian's packages (`debootstrap --variant=minbase`) and
 * `podman import`ed once.
 *
 * @module
 */

import { join } from "node:path";

/** The base image the test builds the Containerfile on (made from Debian's packages). */
export const BASE_IMAGE = "localhost/sd15-mcp-base:bookworm";

/** Where the storage, the run state and the settings live. */
export function containerCache(): string {
  return Deno.env.get("SD_MCP_CONTAINER_CACHE") ??
    join(Deno.env.get("HOME") ?? "/tmp", ".cache", "generate-image-sd15-mcp", "container");
}

/** One command's outcome. */
export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

async function run(command: string, args: string[], env?: Record<string, string>): Promise<Ran> {
  try {
    const out = await new Deno.Command(command, { args, env, stdin: "null" }).output();
    const dec = new TextDecoder();
    return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  } catch (error) {
    return { code: 127, stdout: "", stderr: String(error) };
  }
}

/** Runs podman with the storage and settings above. */
export class Podman {
  readonly #global: string[];
  readonly #env: Record<string, string>;

  constructor(cache = containerCache()) {
    this.#global = [
      "--root",
      join(cache, "storage"),
      "--runroot",
      join(cache, "run"),
      "--storage-driver",
      "vfs",
      "--cgroup-manager",
      "cgroupfs",
      "--runtime",
      "runc",
      "--events-backend",
      "file",
    ];
    this.#env = { CONTAINERS_CONF: join(cache, "containers.conf") };
  }

  /** Writes the settings file (no default ulimits: this VM refuses them). */
  async init(): Promise<void> {
    await Deno.mkdir(join(containerCache(), "run"), { recursive: true });
    await Deno.writeTextFile(
      this.#env.CONTAINERS_CONF,
      '[containers]\ndefault_ulimits = []\n\n[engine]\ncgroup_manager = "cgroupfs"\n' +
        'runtime = "runc"\nevents_logger = "file"\n',
    );
  }

  /** `podman <args>`. */
  run(...args: string[]): Promise<Ran> {
    return run("podman", [...this.#global, ...args], this.#env);
  }

  /** `podman <args>` with stdin from a file. */
  async runWithInput(input: string, ...args: string[]): Promise<Ran> {
    const file = await Deno.open(input);
    const child = new Deno.Command("podman", {
      args: [...this.#global, ...args],
      env: this.#env,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    await file.readable.pipeTo(child.stdin);
    const out = await child.output();
    const dec = new TextDecoder();
    return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  }
}

function firstLine(text: string): string {
  return text.trim().split("\n").find((l) => l.trim() !== "")?.trim() ?? "no output";
}

/**
 * Why the container test cannot run here, or undefined when it can: podman
 * must be installed and work with these settings, and either the base image
 * must be in the cache or debootstrap must be there to build it.
 */
export async function containerUnavailable(): Promise<string | undefined> {
  if (Deno.build.os !== "linux") return `not Linux (${Deno.build.os})`;
  if ((await run("podman", ["--version"])).code !== 0) {
    return "podman is not installed (Debian: apt-get install podman runc debootstrap)";
  }
  const podman = new Podman();
  await podman.init();
  const info = await podman.run("info", "--format", "{{.Host.OCIRuntime.Name}}");
  if (info.code !== 0) return `podman does not run here: ${firstLine(info.stderr)}`;
  if ((await podman.run("image", "exists", BASE_IMAGE)).code === 0) return undefined;
  if ((await run("debootstrap", ["--version"])).code !== 0) {
    return `no ${BASE_IMAGE} in ${containerCache()} and debootstrap is not installed to build it`;
  }
  if (Deno.uid() !== 0) return "debootstrap needs root to build the base image";
  return undefined;
}

/**
 * Builds the base image from Debian's packages unless it is cached;
 * returns the seconds it took (0 when cached).
 */
export async function ensureBaseImage(podman: Podman): Promise<number> {
  if ((await podman.run("image", "exists", BASE_IMAGE)).code === 0) return 0;
  const started = performance.now();
  const work = await Deno.makeTempDir({ prefix: "sd15-base-" });
  try {
    const root = join(work, "root");
    const mirror = Deno.env.get("SD_MCP_DEBIAN_MIRROR") ?? "http://deb.debian.org/debian";
    const strap = await run("debootstrap", ["--variant=minbase", "bookworm", root, mirror]);
    if (strap.code !== 0) {
      throw new Error(`debootstrap failed (exit ${strap.code}):\n${strap.stdout}${strap.stderr}`);
    }
    const tar = join(work, "root.tar");
    const packed = await run("tar", ["-C", root, "-cf", tar, "."]);
    if (packed.code !== 0) throw new Error(`tar failed: ${packed.stderr}`);
    const imported = await podman.runWithInput(tar, "import", "-", BASE_IMAGE);
    if (imported.code !== 0) throw new Error(`podman import failed: ${imported.stderr}`);
  } finally {
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
  return (performance.now() - started) / 1000;
}
