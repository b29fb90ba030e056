/**
 * Keeps docs/models.md in sync with the contract the loader enforces
 * (`CONTRACTS` in mod/onnx/contract.ts): every component has a section
 * (a heading that starts with the component name in backticks) whose port
 * table (`| dir | role | names | dtypes | shape | notes |`) lists exactly the
 * contract's ports, their graph names, accepted dtypes, ranks, fixed dims and
 * optionality; residual ports list templates that expand to the names
 * `residualName` / `onnxWebResidualName` accept. Also checks that the layout
 * and lock sections name every base file and lock component.
 */

import { deepStrictEqual, ok, strictEqual } from "node:assert";
import {
  type Component,
  CONTRACTS,
  onnxWebResidualName,
  type PortSpec,
  residualName,
} from "../mod/onnx/mod.ts";
import { BASE_FILES, MODEL_COMPONENTS } from "../mod/models/mod.ts";

const DOC_URL = new URL("../docs/models.md", import.meta.url);
const doc = await Deno.readTextFile(DOC_URL);

/** One heading and the text up to the next heading of the same or a higher level. */
interface Section {
  level: number;
  title: string;
  body: string;
}

/** Splits markdown into sections by ATX headings, ignoring fenced code blocks. */
function sections(markdown: string): Section[] {
  const lines = markdown.split("\n");
  const heads: Array<{ line: number; level: number; title: string }> = [];
  let fenced = false;
  lines.forEach((line, i) => {
    if (line.startsWith("```")) fenced = !fenced;
    const m = fenced ? null : /^(#{1,6})\s+(.*)$/.exec(line);
    if (m) heads.push({ line: i, level: m[1].length, title: m[2].trim() });
  });
  return heads.map((h, k) => {
    const next = heads.slice(k + 1).find((o) => o.level <= h.level);
    const end = next ? next.line : lines.length;
    return { level: h.level, title: h.title, body: lines.slice(h.line + 1, end).join("\n") };
  });
}

const SECTIONS = sections(doc);

/** The section whose heading starts with `` `name` ``. */
function componentSection(name: string): Section {
  const found = SECTIONS.filter((s) => s.title.startsWith("`" + name + "`"));
  strictEqual(found.length, 1, `docs/models.md: expected one heading "\`${name}\`"`);
  return found[0];
}

/** A section by its exact heading text. */
function titledSection(title: string): Section {
  const found = SECTIONS.find((s) => s.title === title);
  ok(found, `docs/models.md: no heading "${title}"`);
  return found;
}

/** One row of a component's port table. */
interface PortRow {
  dir: "in" | "out";
  role: string;
  names: string[];
  dtypes: string[];
  shapes: string[][];
  notes: string;
  raw: string;
}

const backticked = (text: string): string[] => [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1]);

/** Rows of the first table in `body` whose header is `| dir | role | …`. */
function portRows(body: string, component: string): PortRow[] {
  const lines = body.split("\n").map((l) => l.trim());
  const start = lines.findIndex((l) => /^\|\s*dir\s*\|\s*role\s*\|/.test(l));
  ok(start >= 0, `${component}: no "| dir | role | names | dtypes | shape | notes |" table`);
  const rows: PortRow[] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith("|")) break;
    const cells = line.slice(1, -1).split("|").map((c) => c.trim());
    strictEqual(cells.length, 6, `${component}: a port row needs 6 cells: ${line}`);
    const [dir, role, names, dtypes, shape, notes] = cells;
    ok(dir === "in" || dir === "out", `${component}: dir must be in/out: ${line}`);
    const roles = backticked(role);
    strictEqual(roles.length, 1, `${component}: role must be one backticked word: ${line}`);
    rows.push({
      dir,
      role: roles[0],
      names: backticked(names),
      dtypes: [...dtypes.matchAll(/\b(?:b?float|u?int)\d+\b|\bbool\b|\bstring\b/g)].map((m) =>
        m[0]
      ),
      shapes: backticked(shape).filter((s) => s.startsWith("[")).map((s) => {
        const inner = s.slice(1, -1).trim();
        return inner === "" ? [] : inner.split(",").map((d) => d.trim());
      }),
      notes,
      raw: line,
    });
  }
  return rows;
}

/** Checks one documented row against one PortSpec. */
function checkRow(component: string, dir: string, spec: PortSpec, row: PortRow): void {
  const where = `${component} ${dir} ${spec.role}`;
  deepStrictEqual([...row.names].sort(), [...spec.names].sort(), `${where}: graph names`);
  if (spec.names.length === 0) ok(/by position/.test(row.raw), `${where}: say "(by position)"`);
  deepStrictEqual([...row.dtypes].sort(), [...spec.dtypes].sort(), `${where}: dtypes`);
  ok(row.shapes.length > 0, `${where}: no shape in backticks`);
  deepStrictEqual(
    [...new Set(row.shapes.map((s) => s.length))].sort(),
    [...spec.ranks].sort(),
    `${where}: documented ranks`,
  );
  for (const [axisText, allowed] of Object.entries(spec.dims ?? {})) {
    const axis = Number(axisText);
    for (const shape of row.shapes) {
      if (shape.length <= axis) continue;
      ok(
        allowed.includes(Number(shape[axis])),
        `${where}: dim ${axis} is fixed to ${allowed.join(" or ")} by the contract; ` +
          `the doc says ${shape[axis]} in [${shape.join(", ")}]`,
      );
    }
  }
  strictEqual(/\boptional\b/.test(row.notes), spec.optional === true, `${where}: "optional"`);
}

/** Backticked names of a residual row, `{i}` templates expanded for i = 0..11. */
function expandedNames(row: PortRow): Set<string> {
  const out = new Set<string>();
  for (const name of row.names) {
    if (name.includes("{i}")) {
      for (let i = 0; i < 12; i++) out.add(name.replaceAll("{i}", String(i)));
    } else out.add(name);
  }
  return out;
}

const components = Object.keys(CONTRACTS) as Component[];

Deno.test("models doc: every component of CONTRACTS has a section", () => {
  ok(components.length >= 9, `CONTRACTS lists ${components.length} components`);
  for (const c of components) componentSection(c);
});

for (const component of components) {
  Deno.test(`models doc: ${component} ports, names, dtypes, ranks and fixed dims`, () => {
    const contract = CONTRACTS[component];
    const rows = portRows(componentSection(component).body, component);
    const used = new Set<PortRow>();
    for (const [dir, specs] of [["in", contract.inputs], ["out", contract.outputs]] as const) {
      for (const spec of specs) {
        const row = rows.find((r) => r.dir === dir && r.role === spec.role);
        ok(row, `docs/models.md ${component}: no "${dir}" row for \`${spec.role}\``);
        checkRow(component, dir, spec, row);
        used.add(row);
      }
    }
    const residualDirs: Array<["in" | "out", boolean]> = [
      ["in", contract.residualInputs === true],
      ["out", contract.residualOutputs === true],
    ];
    for (const [dir, has] of residualDirs) {
      const row = rows.find((r) => r.dir === dir && r.role === "residuals");
      if (!has) {
        ok(!row, `${component}: documents ${dir} residuals the contract does not have`);
        continue;
      }
      ok(row, `docs/models.md ${component}: no "${dir}" row for \`residuals\``);
      used.add(row);
      const names = expandedNames(row);
      for (let i = 0; i <= 12; i++) {
        ok(names.has(residualName(i)), `${component}: residual ${i} ${residualName(i)} missing`);
        if (dir === "in") {
          ok(
            names.has(onnxWebResidualName(i)),
            `${component}: onnx-web residual ${i} ${onnxWebResidualName(i)} missing`,
          );
        }
      }
      ok(row.shapes.every((s) => s.length === 4), `${component}: residuals are rank 4`);
    }
    const extra = rows.filter((r) => !used.has(r)).map((r) => `${r.dir} ${r.role}`);
    deepStrictEqual(extra, [], `${component}: rows the contract does not have`);
  });
}

Deno.test("models doc: the residual name templates follow the contract's names", () => {
  // The doc writes down residuals as `down_block_{i}_additional_residual`; the
  // parser expands that template, so it must agree with the contract for every i.
  const row = portRows(componentSection("controlnet_unet").body, "controlnet_unet")
    .find((r) => r.role === "residuals")!;
  const names = expandedNames(row);
  strictEqual(names.size, 25, "12 OnnxStack + 12 onnx-web down names + 1 mid name");
});

Deno.test("models doc: the layout names every base file, the lock section every component", () => {
  const layout = titledSection("Folder layout").body;
  for (const file of BASE_FILES) ok(layout.includes(file), `layout lacks ${file}`);
  const lock = titledSection("What models.lock pins").body;
  const named = new Set(backticked(lock));
  for (const c of MODEL_COMPONENTS) ok(named.has(c), `lock section lacks \`${c}\``);
});

Deno.test("models doc: the section parser finds headings and rows (self-check)", () => {
  const sample = [
    "## `a` — first",
    "| dir | role | names | dtypes | shape | notes |",
    "|---|---|---|---|---|---|",
    "| in | `x` | `x`, `y` | float32, int64 | `[]` or `[N, 3]` | optional |",
    "```",
    "## not a heading",
    "```",
    "### sub",
    "## `b`",
  ].join("\n");
  const parsed = sections(sample);
  deepStrictEqual(parsed.map((s) => s.title), ["`a` — first", "sub", "`b`"]);
  ok(parsed[0].body.includes("### sub"), "a subsection belongs to its parent");
  const [row] = portRows(parsed[0].body, "a");
  deepStrictEqual(row.names, ["x", "y"]);
  deepStrictEqual(row.dtypes, ["float32", "int64"]);
  deepStrictEqual(row.shapes, [[], ["N", "3"]]);
  strictEqual(row.notes, "optional");
});
