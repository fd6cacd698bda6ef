// An abort-mode weight update that lands before a streamed completion's first token: vLLM's only event is then the
// abort chunk, which carries the prompt ids and no sampled token. The gateway continues the answer after the resume;
// the harness must still read the prompt ids once and the call must be recorded whole (prompt ids, every sampled id),
// equal to an uninterrupted answer with the same seed. The upstream is the sim behind a proxy that cuts the first
// generation at its first event, as vLLM does for a request aborted while it waits or prefills.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, test } from "node:test";
import { startGateway, type Gateway } from "../gateway/index.ts";
import { startSim, type SimServer as Sim } from "../sim/server.ts";
import { createRollout, rolloutCalls, tempDir } from "./helpers.ts";

// Only a token-id prompt has an exact continuation (gateway/policy/continued-completion.ts).
const PROMPT_IDS = [12522, 5193, 264, 882];
const ASK = { model: "Qwen/Qwen3-8B", prompt: PROMPT_IDS, max_tokens: 12, seed: 3, stream: true };

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

/** Passes every request to the sim, except that the first streamed completion ends at once in an abort. */
async function abortingProxy(sim: Sim): Promise<{ url: string; server: Server; completions: number[][] }> {
  const completions: number[][] = [];
  const server = createServer((req, res) => {
    void (async () => {
      const body = await readBody(req);
      const upstream = await fetch(`${sim.url}${req.url}`, {
        method: req.method,
        headers: { "content-type": req.headers["content-type"] ?? "application/json" },
        body: req.method === "GET" ? undefined : new Uint8Array(body),
      });
      const text = await upstream.text();
      const isCompletion = req.url === "/v1/completions";
      if (isCompletion) completions.push(JSON.parse(body.toString("utf8")).prompt);
      if (!isCompletion || completions.length > 1) {
        res.writeHead(upstream.status, { "content-type": upstream.headers.get("content-type") ?? "" });
        res.end(text);
        return;
      }
      const first = JSON.parse(text.split("\n\n")[0]!.replace(/^data: /, ""));
      const choice = first.choices[0];
      assert.ok(Array.isArray(choice.prompt_token_ids), "the sim's first event carries the prompt ids");
      const abort = {
        ...first,
        choices: [{ ...choice, text: "", token_ids: [], logprobs: null, finish_reason: "abort" }],
      };
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(`data: ${JSON.stringify(abort)}\n\ndata: [DONE]\n\n`);
    })().catch((error: unknown) => res.destroy(error as Error));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, completions };
}

let sim: Sim;
let gateway: Gateway | undefined;
let proxy: Awaited<ReturnType<typeof abortingProxy>> | undefined;
after(async () => {
  await gateway?.close();
  proxy?.server.close();
  await sim?.close();
});

test("an abort before the first token: the harness reads the prompt ids once and the call is recorded whole", async () => {
  sim = await startSim({ port: 0, seed: 5 });
  proxy = await abortingProxy(sim);
  gateway = await startGateway({ upstream: proxy.url, port: 0, dataDir: tempDir("store") });

  const reference = await fetch(`${sim.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...ASK, stream: false, return_token_ids: true }),
  }).then((r) => r.json() as Promise<any>);

  const rollout = await createRollout(gateway.url);
  const res = await fetch(`${gateway.url}/r/${rollout.id}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...ASK, return_token_ids: true }),
  });
  assert.equal(res.status, 200);
  const events = (await res.text())
    .split("\n\n")
    .map((block) => block.replace(/^data: /, ""))
    .filter((data) => data && data !== "[DONE]")
    .map((data) => JSON.parse(data));
  const choices = events.map((e) => e.choices?.[0]).filter(Boolean);
  assert.equal(proxy.completions.length, 2, "the aborted generation was continued once");
  assert.deepEqual(proxy.completions[1], proxy.completions[0], "nothing was sampled before the abort");

  const promptIdEvents = choices.filter((c) => Array.isArray(c.prompt_token_ids));
  assert.equal(promptIdEvents.length, 1, "the prompt ids reach the harness once");
  assert.deepEqual(promptIdEvents[0].prompt_token_ids, reference.choices[0].prompt_token_ids);
  assert.ok(!choices.some((c) => c.finish_reason === "abort"), "no abort reaches the harness");
  assert.equal(choices.map((c) => c.text ?? "").join(""), reference.choices[0].text);

  const [call] = await rolloutCalls(gateway.url, rollout.id);
  assert.equal(call!.status, "ok");
  assert.deepEqual(call!.promptTokenIds, reference.choices[0].prompt_token_ids);
  assert.deepEqual(call!.choices[0]!.tokenIds, reference.choices[0].token_ids);
  assert.equal(call!.policyUpdate!.continued, 1);
});
