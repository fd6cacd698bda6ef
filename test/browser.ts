// Real headless Chromium (Debian's `chromium`) for the UI tests, driven over the DevTools protocol with undici's
// WebSocket: launch, open a page, evaluate, click and hover with real mouse events, take screenshots.
// playwright-core is not in node_modules; this is the small part of it the tests need.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WebSocket } from "undici";

export const CHROMIUM = "/usr/bin/chromium";
export const chromiumAvailable = () => existsSync(CHROMIUM);

const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
  "--no-default-browser-check",
  "--remote-debugging-port=0",
];

type Pending = { resolve: (v: any) => void; reject: (e: Error) => void; method: string };

export class Browser {
  readonly #child: ChildProcess;
  readonly #ws: WebSocket;
  readonly #profile: string;
  readonly #pending = new Map<number, Pending>();
  readonly #listeners = new Set<(message: any) => void>();
  #next = 1;

  private constructor(child: ChildProcess, ws: WebSocket, profile: string) {
    this.#child = child;
    this.#ws = ws;
    this.#profile = profile;
    ws.addEventListener("message", (event) => {
      const message = JSON.parse(String(event.data));
      if (message.id !== undefined) {
        const p = this.#pending.get(message.id);
        this.#pending.delete(message.id);
        if (message.error) p?.reject(new Error(`${p.method}: ${message.error.message}`));
        else p?.resolve(message.result);
      } else {
        for (const l of this.#listeners) l(message);
      }
    });
  }

  static async launch(timeoutMs = 60_000): Promise<Browser> {
    const profile = mkdtempSync(join(tmpdir(), "rlgate-chromium-"));
    // Its own process group, so closing ends Chromium's helper processes too.
    const child = spawn(CHROMIUM, [...ARGS, `--user-data-dir=${profile}`, "about:blank"], {
      stdio: ["ignore", "ignore", "pipe"],
      detached: true,
    });
    const url = await new Promise<string>((resolve, reject) => {
      let text = "";
      const timer = setTimeout(
        () => reject(new Error(`chromium did not start in ${timeoutMs} ms:\n${text}`)),
        timeoutMs,
      );
      child.stderr!.on("data", (chunk: Buffer) => {
        text += chunk.toString();
        const m = /DevTools listening on (ws:\/\/\S+)/.exec(text);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
      child.once("exit", (code) => reject(new Error(`chromium exited (${code}):\n${text}`)));
    });
    child.stderr!.resume();
    const ws = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener("open", () => resolve());
      ws.addEventListener("error", () => reject(new Error(`cannot connect to ${url}`)));
    });
    return new Browser(child, ws, profile);
  }

  send(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<any> {
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, method });
      this.#ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    });
  }

  on(listener: (message: any) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  async newPage(width = 1600, height = 1000): Promise<Page> {
    const { targetId } = await this.send("Target.createTarget", { url: "about:blank" });
    const { sessionId } = await this.send("Target.attachToTarget", { targetId, flatten: true });
    const page = new Page(this, sessionId);
    await page.send("Page.enable");
    await page.send("Runtime.enable");
    await page.send("Emulation.setDeviceMetricsOverride", { width, height, deviceScaleFactor: 1, mobile: false });
    return page;
  }

  async close(): Promise<void> {
    try {
      await Promise.race([this.send("Browser.close"), new Promise((r) => setTimeout(r, 3000))]);
    } catch {
      // already gone
    }
    this.#ws.close();
    if (this.#child.exitCode === null && this.#child.signalCode === null) {
      const exited = new Promise((resolve) => this.#child.once("exit", resolve));
      this.#child.kill("SIGKILL");
      await exited;
    }
    try {
      process.kill(-this.#child.pid!, "SIGKILL"); // helpers left in the group
    } catch {
      // the group is gone already
    }
    // Chromium's helper processes may still be writing to the profile for a moment.
    rmSync(this.#profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  }
}

export class Page {
  readonly #browser: Browser;
  readonly #session: string;
  /** Console errors and uncaught exceptions of the page. */
  readonly errors: string[] = [];

  constructor(browser: Browser, session: string) {
    this.#browser = browser;
    this.#session = session;
    browser.on((message) => {
      if (message.sessionId !== session) return;
      if (message.method === "Runtime.exceptionThrown")
        this.errors.push(message.params.exceptionDetails?.exception?.description ?? "exception");
      if (message.method === "Runtime.consoleAPICalled" && message.params.type === "error") {
        this.errors.push(message.params.args.map((a: any) => a.value ?? a.description).join(" "));
      }
    });
  }

  send(method: string, params: Record<string, unknown> = {}): Promise<any> {
    return this.#browser.send(method, params, this.#session);
  }

  async goto(url: string): Promise<void> {
    await this.send("Page.navigate", { url });
    await this.waitFor("document.readyState === 'complete'");
  }

  /** The value of `expression` (awaited), or the page's exception as an error. */
  async evaluate<T = any>(expression: string): Promise<T> {
    const result = await this.send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true });
    if (result.exceptionDetails)
      throw new Error(
        `evaluate ${expression}: ${result.exceptionDetails.exception?.description ?? result.exceptionDetails.text}`,
      );
    return result.result.value as T;
  }

  /** Polls `expression` until it is truthy; returns its value. */
  async waitFor<T = any>(expression: string, timeoutMs = 30_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    for (;;) {
      try {
        last = await this.evaluate(expression);
        if (last) return last as T;
      } catch (error) {
        last = error;
      }
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${expression} (last: ${last})`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async #center(selector: string): Promise<{ x: number; y: number }> {
    const box = await this.waitFor<{ x: number; y: number }>(
      `(() => { const e = document.querySelector(${JSON.stringify(selector)}); if (!e) return null; e.scrollIntoView({ block: "center", inline: "center" }); const r = e.getBoundingClientRect(); return r.width ? { x: r.x + r.width / 2, y: r.y + r.height / 2 } : null; })()`,
    );
    return box;
  }

  /** A real mouse click at the element's centre. */
  async click(selector: string): Promise<void> {
    const { x, y } = await this.#center(selector);
    for (const type of ["mouseMoved", "mousePressed", "mouseReleased"]) {
      await this.send("Input.dispatchMouseEvent", { type, x, y, button: "left", clickCount: 1 });
    }
  }

  async hover(selector: string): Promise<void> {
    const { x, y } = await this.#center(selector);
    await this.send("Input.dispatchMouseEvent", { type: "mouseMoved", x, y });
  }

  async type(selector: string, text: string): Promise<void> {
    await this.evaluate(`document.querySelector(${JSON.stringify(selector)}).focus()`);
    await this.send("Input.insertText", { text });
  }

  async screenshot(path: string): Promise<void> {
    const { data } = await this.send("Page.captureScreenshot", { format: "png", captureBeyondViewport: true });
    writeFileSync(path, Buffer.from(data, "base64"));
  }
}
