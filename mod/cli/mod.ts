/**
 * What the command-line tasks share: their `--help` (one layout, on stdout,
 * exit 0) and the usage lines printed with a command-line mistake.
 *
 * @module
 */

export {
  formatHelp,
  type Help,
  HELP_WIDTH,
  printHelp,
  usageText,
  wantsHelp,
  wrap,
} from "./help.ts";
