/**
 * Headless Chromium (Debian's `chromium` package) driven over the Chrome
 * DevTools Protocol, with nothing but Deno's WebSocket: launch, one page,
 * the frames inside it (cross-origin iframes are other targets, attached
 * with `Target.setAutoAttach` in flat mode), evaluation in a chosen frame,
 * console and CSP reports, screenshots.
 *
 * @module
 */

/** Where Chromium is looked for: `CHROMIUM_BIN` when set, else Debian's launcher. */
export const CHROMIUM_CANDIDATES: readonly string[] = Deno.env.get("CHROMIUM_BIN")
  ? [Deno.env.get("CHROMIUM_BIN")!]
  : ["/usr/bin/chromium"];

/**
 * Flags that work on a CI machine (root, no display, no GPU, no network
 * beyond loopback); the profile is a new empty folder.
 */
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--remote-debugging-port=0",
];

/** The Chromium binary to use, or why there is none. */
export async function findChromium(): Promise<{ path: string } | { missing: string }> {
  for (const path of CHROMIUM_CANDIDATES) {
    try {
      const info = await Deno.stat(path);
      if (info.isFile) return { path };
    } catch {
      // next
    }
  }
  return {
    missing: `no Chromium at ${CHROMIUM_CANDIDATES.join(" or ")}: install Debian's "chromium" ` +
      `package (apt-get install chromium; .ci/run does it as root) or set CHROMIUM_BIN`,
  };
}

/** A CDP event, with the session it came from (flat mode). */
export interface CdpEvent {
  method: string;
  // deno-lint-ignore no-explicit-any
  params: any;
  sessionId?: string;
}

/** One WebSocket to the browser; every target is a session on it. */
export class Cdp {
  #ws: WebSocket;
  #next = 1;
  #pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void; method: string }
  >();
  #listeners = new Set<(event: CdpEvent) => void>();

  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.onmessage = (event) => {
      const message = JSON.parse(String(event.data));
      if (typeof message.id === "number") {
        const waiter = this.#pending.get(message.id);
        if (!waiter) return;
        this.#pending.delete(message.id);
        if (message.error) {
          waiter.reject(new Error(`${waiter.method}: ${message.error.message}`));
        } else waiter.resolve(message.result);
      } else if (typeof message.method === "string") {
        for (const listener of [...this.#listeners]) listener(message);
      }
    };
    ws.onclose = () => {
      for (const waiter of this.#pending.values()) {
        waiter.reject(new Error(`${waiter.method}: the browser closed the connection`));
      }
      this.#pending.clear();
    };
  }

  /** Connects to the browser endpoint (`ws://…/devtools/browser/…`). */
  static connect(url: string): Promise<Cdp> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      ws.onopen = () => resolve(new Cdp(ws));
      ws.onerror = (event) => reject(new Error(`CDP WebSocket: ${(event as ErrorEvent).message}`));
    });
  }

  /** Sends a command (to `sessionId`'s target, or the browser) and waits for its result. */
  // deno-lint-ignore no-explicit-any
  send<T = any>(
    method: string,
    params: Record<string, unknown> = {},
    sessionId?: string,
  ): Promise<T> {
    const id = this.#next++;
    this.#ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject, method });
    });
  }

  /** Calls `listener` with every event; returns the unsubscribe. */
  on(listener: (event: CdpEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Closes the WebSocket. */
  close(): void {
    this.#ws.close();
  }
}

/** A running headless Chromium. */
export interface Browser {
  cdp: Cdp;
  /** What Chromium wrote to stderr (its own warnings). */
  stderr(): string;
  /** Closes the browser (Browser.close, then a kill if it lingers) and removes its profile. */
  close(): Promise<void>;
}

/** Starts `path` headless with a fresh profile and connects to it. */
export async function launchChromium(path: string): Promise<Browser> {
  const profile = await Deno.makeTempDir({ prefix: "sd15-chromium-" });
  const child = new Deno.Command(path, {
    args: [...FLAGS, `--user-data-dir=${profile}`, "about:blank"],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let log = "";
  let endpoint!: (url: string) => void;
  const listening = new Promise<string>((resolve) => endpoint = resolve);
  // Keep draining stderr for the browser's whole life, so it never blocks on a full pipe.
  const drained = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) {
      log += decoder.decode(chunk, { stream: true });
      const match = log.match(/DevTools listening on (ws:\/\/\S+)/);
      if (match) endpoint(match[1]);
    }
  })();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const url = await Promise.race([
    listening,
    child.status.then((s) => {
      throw new Error(`chromium exited with ${s.code} before listening:\n${log}`);
    }),
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`chromium did not listen within 60 s:\n${log}`)),
        60_000,
      );
    }),
  ]).finally(() => clearTimeout(timer));
  const cdp = await Cdp.connect(url);
  return {
    cdp,
    stderr: () => log,
    async close() {
      await Promise.race([
        cdp.send("Browser.close").catch(() => {}),
        new Promise((r) => setTimeout(r, 5000)),
      ]);
      cdp.close();
      const exited = await Promise.race([
        child.status.then(() => true),
        new Promise<boolean>((r) => setTimeout(() => r(false), 10_000)),
      ]);
      if (!exited) {
        try {
          child.kill("SIGKILL");
        } catch {
          // already gone
        }
        await child.status;
      }
      await drained.catch(() => {});
      await Deno.remove(profile, { recursive: true }).catch(() => {});
    },
  };
}

/** A frame's JavaScript context: where {@link Page.evaluate} runs. */
export interface FrameContext {
  sessionId: string;
  contextId: number;
  frameId: string;
}

/** A console message, an exception or a log entry (CSP reports come as these). */
export interface PageMessage {
  kind: "console" | "exception" | "log";
  level: string;
  text: string;
}

/**
 * One page (tab) and every frame in it. Out-of-process iframes (another
 * site) are attached as child sessions, so their contexts, console, network
 * and CSP reports are seen too.
 */
export class Page {
  readonly cdp: Cdp;
  readonly sessionId: string;
  readonly targetId: string;
  /** The viewport, in CSS pixels. */
  width = 0;
  height = 0;
  readonly sessions = new Set<string>();
  readonly contexts = new Map<string, FrameContext>();
  readonly messages: PageMessage[] = [];
  /** Every request any frame made: its URL and the frame. */
  readonly requests: Array<{ url: string; frameId?: string }> = [];
  #unsubscribe: () => void;

  private constructor(cdp: Cdp, targetId: string, sessionId: string) {
    this.cdp = cdp;
    this.targetId = targetId;
    this.sessionId = sessionId;
    this.#unsubscribe = cdp.on((event) => this.#onEvent(event));
  }

  /** Opens a new page at about:blank with `width`×`height` CSS pixels. */
  static async open(cdp: Cdp, width: number, height: number): Promise<Page> {
    const { targetId } = await cdp.send("Target.createTarget", { url: "about:blank" });
    const { sessionId } = await cdp.send("Target.attachToTarget", { targetId, flatten: true });
    const page = new Page(cdp, targetId, sessionId);
    page.width = width;
    page.height = height;
    await page.#setUp(sessionId);
    await cdp.send("Emulation.setDeviceMetricsOverride", {
      width,
      height,
      deviceScaleFactor: 1,
      mobile: false,
    }, sessionId);
    return page;
  }

  async #setUp(sessionId: string): Promise<void> {
    this.sessions.add(sessionId);
    await Promise.all([
      this.cdp.send("Runtime.enable", {}, sessionId),
      this.cdp.send("Log.enable", {}, sessionId),
      this.cdp.send("Network.enable", {}, sessionId),
      this.cdp.send("Page.enable", {}, sessionId).catch(() => {}),
      this.cdp.send("Target.setAutoAttach", {
        autoAttach: true,
        waitForDebuggerOnStart: true,
        flatten: true,
      }, sessionId),
    ]);
    // Child targets wait for us (waitForDebuggerOnStart): nothing of theirs is missed.
    await this.cdp.send("Runtime.runIfWaitingForDebugger", {}, sessionId).catch(() => {});
  }

  #onEvent(event: CdpEvent): void {
    const session = event.sessionId;
    if (event.method === "Target.attachedToTarget" && session && this.sessions.has(session)) {
      void this.#setUp(event.params.sessionId).catch(() => {});
      return;
    }
    if (!session || !this.sessions.has(session)) return;
    const p = event.params;
    switch (event.method) {
      case "Runtime.executionContextCreated":
        if (p.context.auxData?.isDefault) {
          this.contexts.set(`${session}:${p.context.id}`, {
            sessionId: session,
            contextId: p.context.id,
            frameId: p.context.auxData.frameId,
          });
        }
        break;
      case "Runtime.executionContextDestroyed":
        this.contexts.delete(`${session}:${p.executionContextId}`);
        break;
      case "Runtime.executionContextsCleared":
        for (const key of [...this.contexts.keys()]) {
          if (key.startsWith(`${session}:`)) this.contexts.delete(key);
        }
        break;
      case "Runtime.consoleAPICalled":
        this.messages.push({
          kind: "console",
          level: p.type,
          text: p.args.map((a: { value?: unknown; description?: string }) =>
            a.value ?? a.description ?? ""
          ).join(" "),
        });
        break;
      case "Runtime.exceptionThrown":
        this.messages.push({
          kind: "exception",
          level: "error",
          text: p.exceptionDetails.exception?.description ?? p.exceptionDetails.text,
        });
        break;
      case "Log.entryAdded":
        this.messages.push({ kind: "log", level: p.entry.level, text: p.entry.text });
        break;
      case "Network.requestWillBeSent":
        this.requests.push({ url: p.request.url, frameId: p.frameId });
        break;
    }
  }

  /** Navigates the top frame and waits for its load event. */
  async goto(url: string): Promise<void> {
    const loaded = new Promise<void>((resolve) => {
      const off = this.cdp.on((event) => {
        if (event.sessionId === this.sessionId && event.method === "Page.loadEventFired") {
          off();
          resolve();
        }
      });
    });
    const { errorText } = await this.cdp.send("Page.navigate", { url }, this.sessionId);
    if (errorText) throw new Error(`navigating to ${url}: ${errorText}`);
    await loaded;
  }

  /** Evaluates `expression` (awaiting a promise) in the top frame. */
  evaluate<T = unknown>(expression: string): Promise<T> {
    return this.#evaluate<T>(expression, this.sessionId, undefined);
  }

  /** Evaluates `expression` in `frame`. */
  evaluateIn<T = unknown>(frame: FrameContext, expression: string): Promise<T> {
    return this.#evaluate<T>(expression, frame.sessionId, frame.contextId);
  }

  async #evaluate<T>(expression: string, sessionId: string, contextId?: number): Promise<T> {
    const result = await this.cdp.send("Runtime.evaluate", {
      expression,
      awaitPromise: true,
      returnByValue: true,
      ...(contextId === undefined ? {} : { contextId }),
    }, sessionId);
    if (result.exceptionDetails) {
      throw new Error(
        `evaluate failed: ${
          result.exceptionDetails.exception?.description ?? result.exceptionDetails.text
        }`,
      );
    }
    return result.result.value as T;
  }

  /** The first frame context (waiting up to `timeoutMs`) where `probe` evaluates to true. */
  async frameWhere(probe: string, timeoutMs = 15_000): Promise<FrameContext> {
    const end = Date.now() + timeoutMs;
    while (Date.now() < end) {
      for (const context of [...this.contexts.values()]) {
        const ok = await this.evaluateIn<boolean>(context, `Boolean(${probe})`).catch(() => false);
        if (ok) return context;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`no frame where ${probe} within ${timeoutMs} ms`);
  }

  /**
   * A PNG of the whole page, iframes included: the viewport is stretched to
   * the page's height for the capture (an out-of-process iframe paints only
   * what is in the viewport), then restored.
   */
  async screenshot(): Promise<Uint8Array> {
    const { width, height } = this;
    const full = await this.evaluate<number>("document.documentElement.scrollHeight");
    const metrics = (h: number) =>
      this.cdp.send("Emulation.setDeviceMetricsOverride", {
        width,
        height: h,
        deviceScaleFactor: 1,
        mobile: false,
      }, this.sessionId);
    await metrics(Math.min(Math.max(full, height), 10_000));
    try {
      // Two frames for the resized viewport to paint, iframes too.
      await this.evaluate(
        "new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))",
      );
      const { data } = await this.cdp.send("Page.captureScreenshot", {
        format: "png",
      }, this.sessionId);
      return Uint8Array.fromBase64(data);
    } finally {
      await metrics(height);
    }
  }

  /** Stops listening and closes the page. */
  async close(): Promise<void> {
    this.#unsubscribe();
    await this.cdp.send("Target.closeTarget", { targetId: this.targetId }).catch(() => {});
  }
}
