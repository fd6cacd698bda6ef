// The core's relay of a trainer's pause (rl-core/core/policy-relay.ts) when a gateway paused but its answer was lost:
// the connection dropped after the gateway acted on the request. The relay cannot tell a refusal from that, so the
// undo must reach every gateway, or the one whose answer was lost stays paused (holding its harness calls) until
// its own timeout while the trainer was told the pause was undone. Two real gateways and sims; the lost answer is
// a proxy that forwards the pause to its gateway and then drops the connection.
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { CurrentVersion } from "../rl-core/core/policy-version.ts";
import { PolicyRelay } from "../rl-core/core/policy-relay.ts";
import { startStack, type Stack } from "./helpers.ts";

const stacks: Stack[] = [];
let proxy: Server;
let proxyUrl = "";

before(async () => {
  for (let i = 0; i < 2; i++) stacks.push(await startStack());
  const target = stacks[1]!.gateway.url;
  // Forwards each request to the second gateway; a pause's answer is dropped once the gateway gave it.
  proxy = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const forwarded = await fetch(`${target}${req.url}`, {
      method: req.method,
      headers: { "content-type": "application/json" },
      ...(req.method === "POST" ? { body: Buffer.concat(chunks) } : {}),
    });
    const body = await forwarded.text();
    if (req.url === "/api/policy/pause") return req.socket.destroy();
    res.writeHead(forwarded.status, { "content-type": "application/json" }).end(body);
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

test("a pause whose answer a gateway lost is undone there too, not only at the gateways that answered", async () => {
  const relay = new PolicyRelay({
    gatewayApis: [stacks[0]!.gateway.url, proxyUrl],
    token: null,
    current: new CurrentVersion("", () => {}),
  });
  await assert.rejects(relay.pause({ mode: "keep", timeoutS: 600 }), /the pause was refused and undone/);
  assert.equal(await paused(stacks[1]!.gateway.url), false, "the gateway whose answer was lost is not left paused");
  assert.equal(await paused(stacks[0]!.gateway.url), false, "the gateway that answered was resumed");
});
