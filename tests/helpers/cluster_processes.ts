/**
 * The processes of an embedded PostgreSQL cluster (the postmaster and every
 * process under it: checkpointer, WAL writer, backends…), to stop and
 * continue them all at once: SIGSTOP to every one of them is what a frozen
 * VM, a stalled disk or a network partition looks like from the server (no
 * error, no closed connection, only silence), and SIGCONT ends it.
 *
 * @module
 */

/** The postmaster's pid, from the first line of `<cluster>/data/postmaster.pid`. */
export async function postmasterPid(clusterDir: string): Promise<number> {
  const text = await Deno.readTextFile(`${clusterDir}/data/postmaster.pid`);
  return Number(text.split("\n")[0]);
}

/** `root` and every process below it, parents first (read from `/proc/<pid>/stat`). */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    let stat: string;
    try {
      stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
    } catch {
      continue; // exited meanwhile
    }
    // "pid (comm) state ppid …": comm may hold spaces and parentheses, so split after the last ')'.
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    const list = children.get(ppid) ?? [];
    list.push(Number(entry.name));
    children.set(ppid, list);
  }
  const tree = [root];
  for (let i = 0; i < tree.length; i++) tree.push(...(children.get(tree[i]) ?? []));
  return tree;
}

/** A cluster whose processes are stopped; {@link StoppedCluster.resume} continues them. */
export interface StoppedCluster {
  /** The processes that were stopped. */
  readonly pids: readonly number[];
  /** Sends SIGCONT to every stopped process (the postmaster last, as it was stopped first). */
  resume(): void;
}

/**
 * Sends SIGSTOP to every process of the embedded cluster in `clusterDir`
 * (`<server.data_dir>/postgres`). None can fork while stopped, so the list
 * taken at the start is complete; stopping the postmaster first keeps it
 * from starting a backend in between.
 */
export async function stopCluster(clusterDir: string): Promise<StoppedCluster> {
  const root = await postmasterPid(clusterDir);
  Deno.kill(root, "SIGSTOP");
  const pids = processTree(root);
  for (const pid of pids.slice(1)) {
    try {
      Deno.kill(pid, "SIGSTOP");
    } catch {
      // exited meanwhile
    }
  }
  return {
    pids,
    resume() {
      for (const pid of [...pids].reverse()) {
        try {
          Deno.kill(pid, "SIGCONT");
        } catch {
          // exited meanwhile
        }
      }
    },
  };
}
