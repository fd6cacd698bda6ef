// A harness that reads slower than the upstream writes: the relay pauses the upstream and waits for one `drain`,
// however many chunks undici hands over after the pause (a listener per chunk made Node warn
// MaxListenersExceededWarning with Codex's streams), and the harness still gets every byte.
import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, describe, test } from "node:test";
import { createRollout, startStack, type Stack } from "./helpers.ts";

const LONG = "word ".repeat(60_000);

describe("relay backpressure", () => {
  let stack: Stack;
  const warnings: Error[] = [];
  const onWarning = (warning: Error) => warnings.push(warning);
  before(async () => {
    stack = await startStack({ sim: { script: [{ content: LONG }], maxModelLen: 131_072 } });
    process.on("warning", onWarning);
  });
  after(async () => {
    process.off("warning", onWarning);
    await stack?.close();
  });

  for (const [path, body] of [
    ["/v1/chat/completions", { model: "Qwen/Qwen3-8B", stream: true, messages: [{ role: "user", content: "go" }] }],
    ["/v1/responses", { model: "Qwen/Qwen3-8B", stream: true, input: "go" }],
  ] as const) {
    test(`${path}: a harness that stops reading pauses the upstream; one drain listener; every byte arrives`, async () => {
      const rollout = await createRollout(stack.gateway.url, {});
      const url = new URL(`${stack.gateway.url}/r/${rollout.id}${path}`);
      const text = await new Promise<string>((resolve, reject) => {
        const req = request(url, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
          res.pause();
          // Not reading for a while lets the gateway's socket buffer fill while the sim keeps writing.
          setTimeout(() => {
            let out = "";
            res
              .setEncoding("utf8")
              .on("data", (d: string) => (out += d))
              .on("end", () => resolve(out))
              .resume();
          }, 1500);
        });
        req.on("error", reject);
        req.end(JSON.stringify(body));
      });
      const words = (text.match(/word/g) ?? []).length;
      assert.ok(words >= 60_000, `every word arrived (${words})`);
      assert.deepEqual(
        warnings.map((w) => w.name),
        [],
        warnings.map((w) => w.message).join("\n"),
      );
    });
  }
});
