// The core's relay of a trainer's pause (rl-core/core/policy-relay.ts) to two real gateways (and sims), the second
// behind a proxy that misbehaves on a pause: (1) the gateway paused but its answer was lost — the relay cannot tell
// that from a refusal, so its undo must reach every gateway, or that one stays paused (holding harness calls) until
// its own timeout while the trainer was told the pause was undone; (2) a trainer repeats a pause while its first is
// still out and the first then fails — relayed one at a time, the first one's undo cannot resume what the repeat
// paused.
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { CurrentVersion } from "../rl-core/core/policy-version.ts";
import { PolicyRelay } from "../rl-core/core/policy-relay.ts";
import { startStack, type Stack } from "./helpers.ts";

const stacks: Stack[] = [];
let proxy: Server;
let proxyUrl = "";
type Forward = () => Promise<{ status: number; body: string }>;
let onPause: (req: IncomingMessage, res: ServerResponse, forward: Forward) => Promise<void> = async () => {};

before(async () => {
  for (let i = 0; i < 2; i++) stacks.push(await startStack());
  const target = stacks[1]!.gateway.url;
  // Forwards each request to the second gateway, and does to a pause what the test running asks (`onPause`).
  proxy = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const forward = async () => {
      const forwarded = await fetch(`${target}${req.url}`, {
        method: req.method,
        headers: { "content-type": "application/json" },
        ...(req.method === "POST" ? { body: Buffer.concat(chunks) } : {}),
      });
      return { status: forwarded.status, body: await forwarded.text() };
    };
    if (req.url === "/api/policy/pause") return onPause(req, res, forward);
    const { status, body } = await forward();
    res.writeHead(status, { "content-type": "application/json" }).end(body);
  });
  proxy.listen(0, "127.0.0.1");
  await once(proxy, "listening");
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});

after(async () => {
  proxy?.close();
  for (const s of stacks) await s.close();
});

async function paused(url: string): Promise<boolean> {
  return ((await (await fetch(`${url}/api/policy`)).json()) as { paused: boolean }).paused;
}

function relayOf(): PolicyRelay {
  return new PolicyRelay({
    gatewayApis: [stacks[0]!.gateway.url, proxyUrl],
    token: null,
    current: new CurrentVersion("", { save: () => {} }),
  });
}

test("a pause whose answer a gateway lost is undone there too, not only at the gateways that answered", async () => {
  // The gateway pauses; its answer is dropped on the way back.
  onPause = async (req, _res, forward) => {
    await forward();
    req.socket.destroy();
  };
  const relay = relayOf();
  await assert.rejects(relay.pause({ mode: "keep", timeoutS: 600 }), /the pause was refused and undone/);
  assert.equal(await paused(stacks[1]!.gateway.url), false, "the gateway whose answer was lost is not left paused");
  assert.equal(await paused(stacks[0]!.gateway.url), false, "the gateway that answered was resumed");
});

test("a pause repeated while the first is still out is not undone by the first one's failure", async () => {
  // The first pause fails at the second gateway, but only once a repeat has been answered there (or after a while,
  // when the relay makes the repeat wait for the first): its undo must not resume what the repeat paused.
  let repeated: () => void = () => {};
  const repeat = new Promise<void>((resolve) => (repeated = resolve));
  let pauses = 0;
  onPause = async (_req, res, forward) => {
    if (++pauses === 1) {
      await Promise.race([repeat, new Promise((r) => setTimeout(r, 300))]);
      res.writeHead(503, { "content-type": "application/json" }).end('{"error":"busy"}');
      return;
    }
    const { status, body } = await forward();
    res.writeHead(status, { "content-type": "application/json" }).end(body);
    repeated();
  };
  const relay = relayOf();
  const first = relay.pause({ mode: "keep", timeoutS: 600 });
  const second = relay.pause({ mode: "keep", timeoutS: 600 });
  await assert.rejects(first, /refused and undone/);
  assert.equal((await second).paused, true);
  const states = await Promise.all(stacks.map((s) => paused(s.gateway.url)));
  await relay.resume({ version: "" });
  assert.deepEqual(states, [true, true], "both gateways paused, as the repeat answered");
});
