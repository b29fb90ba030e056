/**
 * `--help` for every task: one layout (usage, what the command does, each
 * flag with what it does, notes), printed to stdout — a help text is the
 * answer the user asked for, not a log line — with exit status 0.
 *
 * @module
 */

/** The help of one command. */
export interface Help {
  /** The usage lines, each a whole command (`deno task models [--all]`). */
  usage: readonly string[];
  /** What the command does, one paragraph. */
  summary: string;
  /** Each flag or argument (`--config PATH`) with what it does. */
  options: ReadonlyArray<readonly [flag: string, description: string]>;
  /** Paragraphs after the flags (environment, exit status). */
  notes?: readonly string[];
}

/** The width help text is wrapped to. */
export const HELP_WIDTH = 100;

/** Wraps `text` at word boundaries to `width`, every line after the first indented by `indent`. */
export function wrap(text: string, width: number, indent = 0): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(/\s+/).filter((w) => w !== "")) {
    const room = width - (lines.length === 0 ? 0 : indent);
    if (line !== "" && line.length + 1 + word.length > room) {
      lines.push(line);
      line = word;
    } else {
      line = line === "" ? word : `${line} ${word}`;
    }
  }
  if (line !== "" || lines.length === 0) lines.push(line);
  return lines.map((l, i) => (i === 0 ? l : " ".repeat(indent) + l));
}

/** The help as text: usage, summary, the flags in two columns, notes. */
export function formatHelp(help: Help): string {
  const out: string[] = [];
  help.usage.forEach((line, i) => out.push(`${i === 0 ? "usage: " : "       "}${line}`));
  out.push("", ...wrap(help.summary, HELP_WIDTH));
  if (help.options.length > 0) {
    const column = Math.min(Math.max(...help.options.map(([flag]) => flag.length)) + 4, 30);
    out.push("");
    for (const [flag, description] of help.options) {
      const head = `  ${flag}`;
      const body = wrap(description, HELP_WIDTH - column, 0);
      if (head.length + 2 > column) {
        out.push(head);
        for (const line of body) out.push(" ".repeat(column) + line);
      } else {
        body.forEach((line, i) =>
          out.push((i === 0 ? head.padEnd(column) : " ".repeat(column)) + line)
        );
      }
    }
  }
  for (const note of help.notes ?? []) out.push("", ...wrap(note, HELP_WIDTH));
  return out.join("\n") + "\n";
}

/** Whether the command line asks for help (`--help` or `-h`). */
export function wantsHelp(args: readonly string[]): boolean {
  return args.includes("--help") || args.includes("-h");
}

/** Prints the help to stdout; returns 0, the exit status of `--help`. */
export function printHelp(help: Help): number {
  Deno.stdout.writeSync(new TextEncoder().encode(formatHelp(help)));
  return 0;
}

/** The usage lines alone, for a command-line mistake (printed with the mistake, exit 2). */
export function usageText(help: Help): string {
  return help.usage.map((line, i) => `${i === 0 ? "usage: " : "       "}${line}`).join("\n") +
    "\n(--help describes every flag)";
}
