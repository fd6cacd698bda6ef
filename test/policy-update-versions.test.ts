// The core's current policy version as a trainer drives it (rl-core/core/policy-version.ts, policy-relay.ts), through
// gRPC ResumePolicy to a real gateway: a resume that names a lower version makes it current (a trainer restarted from
// an older checkpoint) and is counted, and under --stale drop the rollouts it samples then train; a resume a gateway refuses leaves the current version as it was; a resume still
// relayed when the core closes is kept in its store, as is a version written just before the store closes.
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { rmSync } from "node:fs";
import { after, test } from "node:test";
import { TrainerClient } from "../clients/ts/index.ts";
import { startCore, type Core } from "../rl-core/core/index.ts";
import { CoreStore } from "../rl-core/core/core-store.ts";
import { createRollout, postJson, startStack, tempDir, until, type Stack } from "./helpers.ts";

const cleanups: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

function dataDir(): string {
  const dir = tempDir("policy-versions");
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function coreFor(gatewayApis: string[], dir = dataDir()): Promise<Core> {
  const core = await startCore({ gateways: [], gatewayApis, port: 0, metricsPort: null, dataDir: dir });
  cleanups.push(() => core.close());
  return core;
}

function trainerOf(core: Core): TrainerClient {
  const trainer = new TrainerClient(core.address);
  cleanups.push(() => trainer.close());
  return trainer;
}

let stack: Stack | null = null;
async function gatewayUrl(): Promise<string> {
  if (!stack) {
    stack = await startStack();
    const started = stack;
    cleanups.push(() => started.close());
  }
  return stack.gateway.url;
}

/** A control API that answers a resume as `answer` says (the test decides when, and how). */
async function fakeGateway(answer: (respond: (status: number) => void) => void): Promise<string> {
  const server: Server = createServer((req, res) => {
    req.resume();
    answer((status) =>
      res
        .writeHead(status, { "content-type": "application/json" })
        .end(status === 200 ? '{"paused":false,"version":"x"}' : '{"error":"refused"}'),
    );
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  cleanups.push(() => void server.close());
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

test("a resume that names a lower version makes it current, and is counted", async () => {
  const core = await coreFor([await gatewayUrl()]);
  const trainer = trainerOf(core);
  assert.equal((await trainer.resumePolicy("step-50")).currentVersion, "step-50");
  assert.equal((await trainer.resumePolicy("step-10")).currentVersion, "step-10");
  assert.equal(core.currentVersion, "step-10");
  assert.equal((await core.metrics.versionLowered.get()).values[0]!.value, 1);
  assert.equal((await trainer.status()).currentVersion, "step-10");
  const gateway = (await (await fetch(`${await gatewayUrl()}/api/policy`)).json()) as { version: string };
  assert.equal(gateway.version, "step-10", "the gateway serves it too");
});

test("--stale drop after a mistyped high version: the trainer's next resume lowers it, and its rollouts train", async () => {
  const s = await startStack({ gateway: { prompts: "tokens", grpcPort: 0 } });
  cleanups.push(() => s.close());
  const core = await startCore({
    gateways: [s.gateway.grpc!.address],
    gatewayApis: [s.gateway.url],
    port: 0,
    metricsPort: null,
    dataDir: dataDir(),
    groupSize: 2,
    maxStaleness: 2,
    stale: "drop",
    batchTimeoutMs: 100,
  });
  cleanups.push(() => core.close());
  const trainer = trainerOf(core);
  await trainer.resumePolicy("50"); // meant 5
  await trainer.resumePolicy("5");
  for (let i = 0; i < 2; i++) {
    const rollout = await createRollout(s.gateway.url, { group: "g" });
    const ask = { model: "Qwen/Qwen3-8B", max_tokens: 8, messages: [{ role: "user", content: `task ${i}` }] };
    const answered = await postJson(`${s.gateway.url}/r/${rollout.id}/v1/chat/completions`, ask);
    assert.equal(answered.status, 200, answered.text);
    assert.equal((await postJson(`${s.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: i })).status, 200);
  }
  await until(() => (core.status().groupsDone >= 1 ? true : undefined), 30_000, "the group");
  const status = core.status();
  assert.equal(status.currentVersion, "5");
  assert.equal(status.rolloutsDropped["stale"] ?? 0, 0, "sampled by 5, current 5: none stale (with 50 current, both)");
  await core.flush();
  assert.equal(core.status().batchesReady, 1);
});

test("a resume a gateway refuses, or one every gateway would refuse, does not change the current version", async () => {
  let resumes = 0;
  const refusesSecond = await fakeGateway((respond) => respond(++resumes === 1 ? 200 : 503));
  const core = await coreFor([await gatewayUrl(), refusesSecond]);
  const trainer = trainerOf(core);
  assert.equal((await trainer.resumePolicy("3")).currentVersion, "3");
  await assert.rejects(trainer.resumePolicy("4"), /the resume failed/);
  assert.equal(core.currentVersion, "3", "not current: one gateway does not serve it");
  // Every gateway refuses a version over 128 characters: the core refuses it before asking any.
  await assert.rejects(trainer.resumePolicy("v".repeat(129)), /at most 128 characters/);
  assert.equal(core.currentVersion, "3");
  assert.equal(resumes, 2, "the long version was not relayed");
});

test("a resume still relayed when the core closes is kept in its store", async () => {
  let release: (status: number) => void = () => {};
  let markAsked: () => void = () => {};
  const asked = new Promise<void>((resolve) => (markAsked = resolve));
  const slowUrl = await fakeGateway((respond) => {
    release = respond;
    markAsked();
  });
  const dir = dataDir();
  const core = await startCore({ gateways: [], gatewayApis: [slowUrl], port: 0, metricsPort: null, dataDir: dir });
  const trainer = new TrainerClient(core.address);
  const resumed = trainer.resumePolicy("7");
  await asked;
  const closed = core.close();
  // The core's gRPC server cuts the call once its grace ran out: the core is past it, closing its store. Only then
  // does the gateway answer, so the version is set while the core closes.
  await assert.rejects(resumed);
  trainer.close();
  release(200);
  await closed;
  const again = await coreFor([], dir);
  assert.equal(again.currentVersion, "7");
});

test("a version written just before the store closes is there when it opens again", async () => {
  const dir = dataDir();
  const store = new CoreStore(dir);
  void store.setPolicyVersion("step-9");
  await store.close();
  const reopened = new CoreStore(dir);
  try {
    assert.equal(reopened.policyVersion(), "step-9");
  } finally {
    await reopened.close();
  }
});
