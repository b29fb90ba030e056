/**
 * The MCP Apps gallery in a real browser: headless Chromium (Debian's
 * package) shows the test host page, which reads the view from the server
 * over real streamable HTTP (an SDK client with an API key, the tiny
 * models) and runs it in a sandbox proxy on another origin under the MCP
 * Apps default CSP (the resources themselves: tests/apps_test.ts). Checked: a finished image with its metadata, Save, Again,
 * light and dark themes, a narrow width; a handed-off job's progress to
 * completion; the Cancel button; list_generations and get_generation views;
 * that the view made no request and broke no CSP rule. Screenshots go to
 * `.cache/test-artifacts/apps_browser/<time>/` (ignored by git); the path is
 * printed.
 *
 * Without Chromium the test is ignored (not passed), saying why.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { MCP_APP_MIME_TYPE, UI_EXTENSION_ID } from "../mod/apps/mod.ts";
import { readPngText } from "../mod/image/mod.ts";
import { INLINE_IMAGE_BUDGET } from "../mod/jobs/mod.ts";
import { startAppsHost } from "./helpers/apps_host.ts";
import { findChromium, type FrameContext, launchChromium, Page } from "./helpers/chromium.ts";
import { startHttpApp } from "./helpers/http_app.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { ROOT } from "./helpers/paths.ts";
import { untilEnded } from "./helpers/job_results.ts";
import { imageEntries, pngs } from "./helpers/results.ts";
import { ignoredFor } from "./helpers/ignore.ts";

/** What a host that renders MCP Apps advertises at initialize. */
const APPS_CLIENT = { extensions: { [UI_EXTENSION_ID]: { mimeTypes: [MCP_APP_MIME_TYPE] } } };

/** Finds the view's frame: the sandbox's inner srcdoc document with the gallery's root. */
const VIEW_PROBE = `location.href === "about:srcdoc" && document.getElementById("app") !== null`;

/** A snapshot of what the view shows, read in its frame. */
const SNAPSHOT = `(() => {
  const text = (n) => n ? n.textContent : null;
  const runs = [...document.querySelectorAll("main > section.run")].map((r) => ({
    state: r.dataset.state,
    prompt: text(r.querySelector(":scope > .prompt")),
    progress: text(r.querySelector("[data-field=progress]")),
    eta: text(r.querySelector("[data-field=eta]")),
    texts: [...r.querySelectorAll("[data-field=notice],[data-field=error],[data-field=note]")]
      .map((n) => n.dataset.field + ": " + n.textContent),
    buttons: [...r.querySelectorAll(":scope > .run-body button")].map((b) => b.dataset.action),
    figures: [...r.querySelectorAll("figure")].map((f) => {
      const img = f.querySelector("img");
      return {
        complete: img.complete,
        naturalWidth: img.naturalWidth,
        naturalHeight: img.naturalHeight,
        shownWidth: img.getBoundingClientRect().width,
        src: img.src.slice(0, 22),
        fullSize: text(f.querySelector("[data-field=full-size]")),
        fields: Object.fromEntries([...f.querySelectorAll("dd[data-field]")]
          .map((d) => [d.dataset.field, d.textContent])),
      };
    }),
    jobs: [...r.querySelectorAll("article.job")].map((j) => ({
      id: j.dataset.job,
      state: text(j.querySelector("[data-field=state]")),
      images: j.querySelectorAll("figure img").length,
      prompt: text(j.querySelector(".prompt")),
    })),
  }));
  return {
    runs,
    scrollWidth: document.documentElement.scrollWidth,
    clientWidth: document.documentElement.clientWidth,
    background: getComputedStyle(document.body).backgroundColor,
    theme: document.documentElement.dataset.theme ?? null,
  };
})()`;

interface Figure {
  complete: boolean;
  naturalWidth: number;
  naturalHeight: number;
  shownWidth: number;
  src: string;
  /** A preview's note about its full-size PNG ("Preview" while it is read), or null. */
  fullSize: string | null;
  fields: Record<string, string>;
}
interface Snapshot {
  runs: Array<{
    state: string;
    prompt: string | null;
    progress: string | null;
    eta: string | null;
    texts: string[];
    buttons: string[];
    figures: Figure[];
    jobs: Array<{ id: string; state: string | null; images: number; prompt: string | null }>;
  }>;
  scrollWidth: number;
  clientWidth: number;
  background: string;
  theme: string | null;
}
type CallResult = {
  content?: Array<{ type: string; data?: string; text?: string }>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
};

/** One server over HTTP with the tiny models, and a client that renders MCP Apps behind the test host. */
async function startServer(label: string, sections: string) {
  const server = await startHttpApp(label, sections);
  const client = await connectHttp(server.port, { "MCP-API-Key": server.writeKey }, APPS_CLIENT);
  const host = await startAppsHost(client);
  return {
    port: server.port,
    client,
    host,
    async close() {
      await host.close();
      await client.close();
      await server.close();
    },
  };
}

/** A luminance 0..1 of a CSS `rgb(…)` colour. */
function luminance(css: string): number {
  const [r, g, b] = (css.match(/\d+(\.\d+)?/g) ?? ["0", "0", "0"]).map(Number);
  return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
}

async function until<T>(
  what: string,
  read: () => Promise<T>,
  ok: (value: T) => boolean,
  timeoutMs = 60_000,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: T = await read();
  while (!ok(last)) {
    if (Date.now() > end) {
      throw new Error(
        `timed out waiting for ${what}; last: ${JSON.stringify(last).slice(0, 2000)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 50));
    last = await read();
  }
  return last;
}

const found = await findChromium();

if ("missing" in found) {
  Deno.test({
    ...ignoredFor(found.missing, "apps browser: the gallery in headless Chromium"),
    fn() {},
  });
} else {
  Deno.test("apps browser: the gallery in headless Chromium, over HTTP, on the tiny models", async (t) => {
    const artifacts = join(
      ROOT,
      ".cache/test-artifacts/apps_browser",
      new Date().toISOString().replace(/[:.]/g, "-"),
    );
    await Deno.mkdir(artifacts, { recursive: true });
    console.log(`apps browser test: screenshots in ${artifacts}`);
    const browser = await launchChromium(found.path);
    // A generation of 4 steps finishes within the wait; one of 500 is handed off after 0.5 s.
    const fast = await startServer(
      "apps_fast",
      `[generation]\nsteps = 4\nmax_count = 40\n[jobs]\nmax_images_per_key = 100\nmax_images_per_project = 100\n`,
    );
    const slow = await startServer(
      "apps_slow",
      `[generation]\nsteps = 500\nmax_wait_seconds = 0.5\n`,
    );
    // 500 steps and the default wait (50 s): a call stays open for its whole job.
    const patient = await startServer("apps_open", `[generation]\nsteps = 500\n`);
    const pages: Page[] = [];
    const shot = async (page: Page, name: string) => {
      // Once the host has fitted the frame to the view's content (the view reports its size).
      const view = await page.frameWhere(VIEW_PROBE);
      await until(
        "the frame to fit the view",
        async () => {
          const content = await page.evaluateIn<number>(
            view,
            "document.documentElement.scrollHeight",
          );
          const frame = await page.evaluate<number>(
            `document.getElementById("frame").clientHeight`,
          );
          return Math.abs(content - frame) < 2;
        },
        (fits) => fits,
        10_000,
      );
      const path = join(artifacts, `${name}.png`);
      await Deno.writeFile(path, await page.screenshot());
      return path;
    };
    /** A new page on `server`'s host, showing `tool`'s view for `args`; resolves when the call answered. */
    const open = async (
      server: typeof fast,
      tool: string,
      args: Record<string, unknown>,
      options: { theme?: "light" | "dark"; width?: number } = {},
    ) => {
      const page = await Page.open(browser.cdp, 900, 1400);
      pages.push(page);
      await page.goto(server.host.url);
      const result = page.evaluate<CallResult>(
        `host.open(${JSON.stringify({ tool, args, ...options })})`,
      );
      const view = await page.frameWhere(VIEW_PROBE);
      const snapshot = () => page.evaluateIn<Snapshot>(view, SNAPSHOT);
      return { page, view, result, snapshot };
    };
    const click = (page: Page, view: FrameContext, selector: string) =>
      page.evaluateIn(
        view,
        `(() => { const b = document.querySelector(${JSON.stringify(selector)}); ` +
          `if (!b) throw new Error("no " + ${
            JSON.stringify(selector)
          }); b.click(); return true; })()`,
      );
    const hostState = <T>(page: Page, expression: string) => page.evaluate<T>(expression);

    try {
      let firstSeed = "";
      await t.step("a finished image at full size with its metadata; Save; Again", async () => {
        const args = {
          positive_prompt: "a red cube on a table",
          size: "landscape_512",
          name: "cube",
        };
        const { page, view, result, snapshot } = await open(fast, "generate_image", args);
        const answered = await result;
        const [png] = pngs(answered);
        assert.ok(png, "the call returned an image");
        const metadata = readPngText(png);
        const shown = await until(
          "the image",
          snapshot,
          (s) => s.runs[0]?.figures[0]?.complete === true && s.runs[0].figures[0].naturalWidth > 0,
        );
        const run = shown.runs[0];
        assert.equal(run.state, "done");
        assert.equal(run.prompt, args.positive_prompt);
        assert.equal(run.figures.length, 1);
        const figure = run.figures[0];
        assert.equal(figure.naturalWidth, 512);
        assert.equal(figure.naturalHeight, 384);
        assert.equal(figure.shownWidth, 512, "full size where the width allows");
        assert.equal(figure.src, "data:image/png;base64,");
        assert.equal(figure.fields.seed, metadata.seed);
        assert.equal(figure.fields.size, "landscape_512 · 512×384");
        assert.equal(figure.fields.mode, "text to image");
        assert.equal(
          figure.fields.elapsed_seconds,
          `${Number(metadata.elapsed_seconds).toFixed(1)} s`,
        );
        assert.ok(figure.fields.timestamp, "when it was made");
        // Every tEXt key of the PNG is shown (a preset's keys too, where the server writes them).
        for (const key of Object.keys(metadata)) assert.ok(key in figure.fields, key);
        // The tiny config's quality preset, each of its keys under its label.
        assert.deepEqual(
          ["preset", "steps", "scheduler", "guidance_scale", "vae_decoder"].map((k) =>
            figure.fields[k]
          ),
          ["quality", metadata.steps, "pndm", "7.5", "full"],
        );
        assert.ok(run.buttons.includes("again"), JSON.stringify(run.buttons));
        assert.ok(shown.scrollWidth <= shown.clientWidth, "no horizontal scrolling");
        firstSeed = metadata.seed;
        await shot(page, "finished-light");

        await click(page, view, "figure [data-action=save]");
        const downloads = await until(
          "the download",
          () =>
            hostState<
              Array<
                {
                  contents: Array<
                    { type: string; resource: { uri: string; mimeType: string; blob: string } }
                  >;
                }
              >
            >(page, "host.downloads"),
          (d) => d.length === 1,
        );
        const item = downloads[0].contents[0];
        assert.equal(item.type, "resource");
        assert.equal(item.resource.mimeType, "image/png");
        assert.equal(item.resource.blob, answered.content!.find((c) => c.type === "image")!.data);
        assert.match(
          item.resource.uri,
          new RegExp(`^file:///cube_\\d{8}_\\d{6}_${metadata.seed}\\.png$`),
        );

        await click(page, view, "main > section.run [data-action=again]");
        const again = await until(
          "the second image",
          snapshot,
          (s) => s.runs.length === 2 && s.runs[0].figures[0]?.complete === true,
        );
        const calls = await hostState<
          Array<{ method: string; name?: string; arguments?: unknown }>
        >(
          page,
          "host.log",
        );
        assert.deepEqual(
          calls.filter((c) => c.name === "generate_image").map((c) => c.arguments),
          [args],
          "Again calls the same tool with the same arguments",
        );
        assert.equal(again.runs[0].prompt, args.positive_prompt);
        assert.notEqual(again.runs[0].figures[0].fields.seed, firstSeed, "random seeds differ");
        assert.equal(again.runs[1].figures[0].fields.seed, firstSeed, "the first run stays");

        // The host switches to dark: the view follows.
        const light = again.background;
        await page.evaluate(`host.setTheme("dark")`);
        const dark = await until(
          "the dark theme",
          snapshot,
          (s) => s.theme === "dark" && s.background !== light,
        );
        assert.ok(luminance(light) > 0.8, `light background ${light}`);
        assert.ok(luminance(dark.background) < 0.2, `dark background ${dark.background}`);
        await shot(page, "finished-again-dark");
      });

      await t.step("dark from the start, and a 320-pixel-wide container", async () => {
        const { page, result, snapshot } = await open(fast, "generate_image", {
          positive_prompt: "a narrow tower",
        }, { theme: "dark", width: 320 });
        await result;
        const shown = await until(
          "the image",
          snapshot,
          (s) => s.runs[0]?.figures[0]?.complete === true,
        );
        assert.equal(shown.theme, "dark");
        assert.ok(luminance(shown.background) < 0.2, shown.background);
        const figure = shown.runs[0].figures[0];
        assert.equal(figure.naturalWidth, 512);
        assert.ok(figure.shownWidth <= 320 - 24, `shown ${figure.shownWidth} px wide in 320`);
        assert.ok(
          shown.scrollWidth <= shown.clientWidth,
          `scrollWidth ${shown.scrollWidth} > ${shown.clientWidth}`,
        );
        await shot(page, "narrow-dark");
      });

      await t.step(
        "a batch past the inline budget: previews, each replaced by its full PNG where the host reads it",
        async () => {
          // Enough tiny-model images (each about the size of this one) to pass the budget together.
          const [one] = pngs(
            await fast.client.callTool({
              name: "generate_image",
              arguments: { positive_prompt: "a field of flowers", size: "square_512" },
            }),
          );
          const count = Math.min(40, Math.ceil(INLINE_IMAGE_BUDGET / one.length) + 3);
          assert.ok(count * one.length > INLINE_IMAGE_BUDGET * 1.1, `${count} x ${one.length}`);
          const { page, result, snapshot } = await open(fast, "generate_image", {
            positive_prompt: "a field of flowers",
            size: "square_512",
            count,
          });
          const answered = await result;
          // On a busy machine the call may hand off; the view then follows the job to its images.
          const job = answered.structuredContent?.job_id as string | undefined;
          const final = job ? await untilEnded(fast.client, job) : answered;
          const entries = imageEntries(final);
          assert.equal(entries.length, count, JSON.stringify(final).slice(0, 500));
          assert.ok(entries.some((e) => e.link), "previews with links");
          const shown = await until(
            "the figures, each preview resolved or explained",
            snapshot,
            (s) =>
              s.runs[0]?.figures.length === count &&
              s.runs[0].figures.every((f) => f.complete && f.fullSize !== "Preview"),
            120_000,
          );
          assert.deepEqual(shown.runs[0].texts, [], "the links are not notes");
          let read = 0;
          for (const [i, figure] of shown.runs[0].figures.entries()) {
            const seed = entries[i].caption?.match(/seed (\d+)/)?.[1];
            assert.ok(seed, entries[i].caption ?? "no caption");
            if (entries[i].link && figure.fullSize !== null) {
              // The server does not serve the PNG to this host: the preview stays and says where it is.
              assert.match(
                figure.fullSize,
                new RegExp(
                  `^Preview; the full-size PNG is ${
                    entries[i].link!.replace(/[/.]/g, "\\$&")
                  }, which could not be read here: `,
                ),
              );
              continue;
            }
            // The PNG itself, inline or read through the host, with its metadata.
            assert.equal(figure.src, "data:image/png;base64,");
            assert.deepEqual([figure.naturalWidth, figure.fields.seed], [512, seed]);
            if (entries[i].link) read++;
          }
          console.log(`apps browser: ${read} full PNGs read through the host`);
          await shot(page, "batch-previews");
        },
      );

      let finishedJob = "";
      await t.step(
        "a handed-off job: progress through get_generation, then its images",
        async () => {
          // Three images of 500 steps: seconds of progress to watch, on any machine.
          const { page, result, snapshot } = await open(slow, "generate_image", {
            positive_prompt: "a slow lighthouse",
            count: 3,
          });
          const handedOff = await result;
          const job = handedOff.structuredContent?.job_id as string;
          assert.match(job, /^gen_/, "the call handed off");
          const steps: number[] = [];
          const seen: string[] = [];
          let eta = "";
          let midShot = false;
          const done = await until(
            "the job's images",
            async () => {
              const s = await snapshot();
              const line = s.runs[0]?.progress ?? "";
              const step = line.match(/^Image ([1-3]) of 3, step (\d+) of (\d+)$/);
              if (step) {
                // Where the whole job is: steps done over all its images.
                const at = (Number(step[1]) - 1) * Number(step[3]) + Number(step[2]);
                if (at !== steps.at(-1)) {
                  steps.push(at);
                  seen.push(line);
                }
              }
              if (s.runs[0]?.eta && /left|no estimate/.test(s.runs[0].eta)) eta = s.runs[0].eta;
              if (!midShot && steps.length >= 2) {
                midShot = true;
                await shot(page, "handed-off-progress");
              }
              return s;
            },
            (s) => s.runs[0]?.figures.length === 3 && s.runs[0].figures.every((f) => f.complete),
            180_000,
          );
          assert.ok(steps.length >= 3, `progress seen: ${seen.join(" | ")}`);
          assert.deepEqual(
            steps,
            [...steps].sort((a, b) => a - b),
            `backwards: ${seen.join(" | ")}`,
          );
          assert.match(eta, /^(about \d+ (s|min \d+ s) left|no estimate yet)$/);
          assert.equal(done.runs[0].state, "done");
          assert.equal(done.runs[0].prompt, "a slow lighthouse");
          for (const figure of done.runs[0].figures) {
            assert.equal(figure.naturalWidth, 512);
            assert.equal(figure.naturalHeight, 512);
          }
          assert.deepEqual(done.runs[0].texts, [], "the [i/N] lines are the images' captions");
          const calls = await hostState<Array<{ name?: string; arguments?: { job_id?: string } }>>(
            page,
            "host.log",
          );
          const polls = calls.filter((c) => c.name === "get_generation");
          assert.ok(polls.length >= 2, `get_generation calls: ${polls.length}`);
          assert.ok(polls.every((c) => c.arguments?.job_id === job));
          // The view's images are the job's: get_generation returns them to any client of the key.
          const fetched = await slow.client.callTool({
            name: "get_generation",
            arguments: { job_id: job },
          });
          assert.deepEqual(
            done.runs[0].figures.map((f) => f.fields.seed),
            pngs(fetched).map((png) => readPngText(png).seed),
          );
          finishedJob = job;
          await shot(page, "handed-off-done");
        },
      );

      await t.step(
        "a call still open: its job's progress, found with list_generations",
        async () => {
          const { page, result, snapshot } = await open(patient, "generate_image", {
            positive_prompt: "an open call",
            count: 3,
          });
          let answered = false;
          result.then(() => answered = true, () => answered = true);
          const whileOpen: string[] = [];
          await until(
            "the images",
            async () => {
              const s = await snapshot();
              const line = s.runs[0]?.progress ?? "";
              if (!answered && /^Image [1-3] of 3, step \d+ of \d+$/.test(line)) {
                whileOpen.push(line);
              }
              return s;
            },
            (s) => s.runs[0]?.figures.length === 3 && s.runs[0].figures.every((f) => f.complete),
            180_000,
          );
          const final = await result;
          assert.equal(final.structuredContent, undefined, "the call did not hand off");
          assert.equal(pngs(final).length, 3);
          assert.ok(
            whileOpen.length >= 2,
            `progress while the call was open: ${whileOpen.join(" | ")}`,
          );
          const calls = await hostState<
            Array<{ name?: string; arguments?: Record<string, unknown> }>
          >(
            page,
            "host.log",
          );
          assert.ok(
            calls.some((c) => c.name === "list_generations"),
            "looked for the job",
          );
          assert.ok(calls.some((c) => c.name === "get_generation"), "followed the job");
          await shot(page, "open-call-done");
        },
      );

      let cancelledJob = "";
      await t.step("Cancel stops a running job", async () => {
        // Four images of 500 steps: the job still runs when the button is pressed.
        const { page, view, result, snapshot } = await open(slow, "generate_image", {
          positive_prompt: "to be cancelled",
          count: 4,
        });
        cancelledJob = (await result).structuredContent?.job_id as string;
        assert.match(cancelledJob, /^gen_/);
        await until("two steps", snapshot, (s) => {
          const step = s.runs[0]?.progress?.match(/step (\d+) of \d+$/);
          return !!step && Number(step[1]) >= 2;
        }, 120_000);
        await click(page, view, "[data-action=cancel]");
        const cancelled = await until(
          "the cancellation",
          snapshot,
          (s) => s.runs[0]?.state === "cancelled",
        );
        const notice = cancelled.runs[0].texts.map((t) =>
          t.match(/^notice: generation gen_\S+ was cancelled after ([0-3]) of 4 images; /)
        ).find(Boolean);
        assert.ok(notice, JSON.stringify(cancelled.runs[0].texts));
        assert.equal(
          cancelled.runs[0].figures.length,
          Number(notice[1]),
          "the finished images stay",
        );
        assert.equal(cancelled.runs[0].progress, null, "no progress after the cancellation");
        const calls = await hostState<Array<{ name?: string; arguments?: { job_id?: string } }>>(
          page,
          "host.log",
        );
        assert.deepEqual(
          calls.filter((c) => c.name === "cancel_generation").map((c) => c.arguments),
          [{ job_id: cancelledJob }],
        );
        const listed = await slow.client.callTool({ name: "list_generations", arguments: {} });
        const jobs =
          (listed.structuredContent as { generations: Array<{ job_id: string; state: string }> })
            .generations;
        assert.equal(jobs.find((j) => j.job_id === cancelledJob)?.state, "cancelled");
        await shot(page, "cancelled");
      });

      await t.step("list_generations and get_generation show the jobs", async () => {
        const list = await open(slow, "list_generations", {});
        await list.result;
        const shown = await until(
          "the listed jobs",
          list.snapshot,
          (s) => (s.runs[0]?.jobs ?? []).some((j) => j.id === finishedJob && j.images === 3),
        );
        const jobs = shown.runs[0].jobs;
        assert.equal(jobs.find((j) => j.id === cancelledJob)?.state, "cancelled");
        assert.equal(jobs.find((j) => j.id === finishedJob)?.state, "succeeded");
        assert.equal(jobs.find((j) => j.id === finishedJob)?.prompt, "a slow lighthouse");
        await shot(list.page, "list-generations");

        const one = await open(slow, "get_generation", { job_id: finishedJob });
        await one.result;
        const fetched = await until(
          "the job's images and prompt",
          one.snapshot,
          (s) =>
            s.runs[0]?.figures.length === 3 && s.runs[0].figures.every((f) => f.complete) &&
            s.runs[0].prompt === "a slow lighthouse",
        );
        assert.equal(fetched.runs[0].figures[0].naturalWidth, 512);
        assert.ok(!fetched.runs[0].buttons.includes("again"), "no Again without the original call");
      });
      await t.step(
        "the view made no request and broke no CSP rule; the CSP is enforced",
        async () => {
          const problems = pages.flatMap((p) =>
            p.messages.filter((m) =>
              m.kind === "exception" || /Content Security Policy|Refused to/i.test(m.text)
            )
          );
          assert.deepEqual(problems, []);
          const requested = pages.flatMap((p) =>
            p.requests.map((r) => r.url).filter((url) => !url.startsWith("data:"))
          );
          const allowed =
            /^http:\/\/(127\.0\.0\.1|localhost):\d+\/(host\.html|sandbox\.html\?host=\S+|host\/mcp|favicon\.ico)$/;
          assert.deepEqual(requested.filter((url) => !allowed.test(url)), []);
          // The control: a fetch from the view is refused by the CSP and reported.
          const page = pages.at(-1)!;
          const view = await page.frameWhere(VIEW_PROBE);
          const outcome = await page.evaluateIn<string>(
            view,
            `fetch("http://127.0.0.1:${slow.port}/healthz").then(() => "fetched", (e) => "refused: " + e.message)`,
          );
          assert.match(outcome, /^refused/);
          await until(
            "the CSP report",
            () =>
              Promise.resolve(page.messages.filter((m) => /Content Security Policy/.test(m.text))),
            (m) => m.length > 0,
            10_000,
          );
        },
      );
    } finally {
      for (const page of pages) await page.close().catch(() => {});
      await browser.close();
      await patient.close();
      await slow.close();
      await fast.close();
    }
  });
}
