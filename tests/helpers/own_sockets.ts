/**
 * The sockets this process has open, from `/proc` (Linux), read by `cat`
 * and `find` in child processes: Deno lets a program read `/proc/self`,
 * its own `/proc/<pid>` and `/proc/net` only with `--allow-all`.
 *
 * @module
 */

function procText(path: string): string {
  return new TextDecoder().decode(new Deno.Command("cat", { args: [path] }).outputSync().stdout);
}

/** The socket inodes this process holds open. */
function ownSocketInodes(): Set<string> {
  const out = new Deno.Command("find", {
    args: [`/proc/${Deno.pid}/fd`, "-lname", "socket:*", "-printf", "%l\\n"],
    stderr: "null",
  }).outputSync();
  const links = new TextDecoder().decode(out.stdout).split("\n");
  return new Set(
    links.map((l) => /^socket:\[(\d+)\]$/.exec(l)?.[1]).filter((i) => i !== undefined),
  );
}

/** The inodes of this process's listening TCP sockets (IPv4 and IPv6). */
export function ownTcpListeners(): Set<string> {
  const own = ownSocketInodes();
  const out = new Set<string>();
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    for (const line of procText(file).split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[3] === "0A" && own.has(f[9])) out.add(f[9]); // st = LISTEN; the inode column
    }
  }
  return out;
}

/** The paths of this process's Unix sockets bound to a path matching `pattern`. */
export function ownUnixSockets(pattern: RegExp): string[] {
  const own = ownSocketInodes();
  return procText("/proc/net/unix").split("\n").slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((f) => own.has(f[6]) && pattern.test(f[7] ?? ""))
    .map((f) => f[7]);
}
