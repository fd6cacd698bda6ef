// Many gateways behind one balancer (docs/deploy.md): the nginx configuration the docs give, run for real in front of
// two gateways. Every request of a rollout hashes on its id to one gateway, streams pass through unbuffered, and one
// RL core reading both gateways receives every rollout. Skips, saying why, where nginx is not installed.
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { startGateway, type Gateway } from "../gateway/index.ts";
import { startCore, type Core } from "../rl-core/core/index.ts";
import { startSim, type SimServer } from "../sim/index.ts";
import { freePort } from "../util/listen.ts";
import { postJson, ROOT, tempDir, until } from "./helpers.ts";
import { requireInCi } from "./require-in-ci.ts";

const NGINX = ["/usr/sbin/nginx", "nginx"].find((bin) => spawnSync(bin, ["-v"]).status === 0);
const skip = requireInCi("nginx-light", NGINX ? null : "nginx is not installed");
const ROLLOUTS = 16;

/** docs/deploy/nginx.conf with this test's ports (and, as root, workers that may write the prefix directory). */
function balancerConfig(listenPort: number, gatewayPorts: number[]): string {
  let conf = readFileSync(join(ROOT, "docs/deploy/nginx.conf"), "utf8");
  conf = conf.replace(/listen 127\.0\.0\.1:\d+;/, `listen 127.0.0.1:${listenPort};`);
  conf = conf.replace(
    /(\n\s*server 127\.0\.0\.1:\d+;)+/,
    gatewayPorts.map((port) => `\n    server 127.0.0.1:${port};`).join(""),
  );
  if (process.getuid?.() === 0) conf = `user root;\n${conf}`;
  return conf;
}

describe("gateways behind nginx, hashing on the rollout id", { skip }, () => {
  let sim: SimServer;
  const gateways: Gateway[] = [];
  let nginx: ChildProcess;
  let nginxLog = "";
  let balancer = "";
  let core: Core;
  const dirs: string[] = [];

  before(async () => {
    sim = await startSim({ port: 0 });
    for (let i = 0; i < 2; i++) {
      const dataDir = tempDir(`deploy-gw${i}`);
      dirs.push(dataDir);
      gateways.push(await startGateway({ upstream: sim.url, port: 0, grpcPort: 0, dataDir }));
    }
    const prefix = tempDir("deploy-nginx");
    dirs.push(prefix);
    mkdirSync(join(prefix, "logs"), { recursive: true });
    const port = await freePort();
    writeFileSync(
      join(prefix, "nginx.conf"),
      balancerConfig(
        port,
        gateways.map((g) => g.port),
      ),
    );
    nginx = spawn(NGINX!, ["-p", prefix, "-c", join(prefix, "nginx.conf"), "-e", "stderr"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    nginx.stderr!.on("data", (d: Buffer) => (nginxLog += d.toString()));
    balancer = `http://127.0.0.1:${port}`;
    await until(
      async () => ((await fetch(`${balancer}/healthz`).catch(() => null))?.status === 200 ? true : undefined),
      20_000,
      "nginx to answer",
    ).catch((error: Error) => {
      throw new Error(`${error.message}; nginx said: ${nginxLog}`);
    });
    const coreDir = tempDir("deploy-core");
    dirs.push(coreDir);
    core = await startCore({
      gateways: gateways.map((g) => g.grpc!.address),
      port: 0,
      metricsPort: null,
      dataDir: coreDir,
      groupTimeoutMs: 60_000,
    });
  });
  after(async () => {
    nginx?.kill("SIGTERM");
    await core?.close();
    for (const g of gateways) await g.close();
    await sim?.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  test("a rollout's create, calls (streamed too) and finish reach one gateway; the core reads them all", async () => {
    const ids = Array.from({ length: ROLLOUTS }, (_, i) => `job-1.sample-${i}`);
    for (const id of ids) {
      const created = await fetch(`${balancer}/api/rollouts/${id}`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ group: `task-${id.length % 2}`, harness: "qwen-code" }),
      });
      const body = await created.text();
      assert.equal(created.status, 201, body);
      const { base_urls } = JSON.parse(body) as { base_urls: { openai: string } };
      assert.equal(base_urls.openai, `${balancer}/r/${id}/v1`, "the harness is handed the balancer's address");
      const messages = [{ role: "user", content: `task ${id}` }];
      const first = await postJson(`${base_urls.openai}/chat/completions`, { messages });
      assert.equal(first.status, 200, first.text);
      messages.push(first.json.choices[0].message, { role: "user", content: "go on" });
      const streamed = await fetch(`${base_urls.openai}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ messages, stream: true }),
      });
      assert.equal(streamed.status, 200);
      assert.match(streamed.headers.get("content-type") ?? "", /text\/event-stream/);
      const events = (await streamed.text()).split("\n\n").filter((e) => e.startsWith("data: "));
      assert.ok(events.length > 2, "the stream arrives as events");
      assert.equal(events.at(-1), "data: [DONE]");
      const finished = await postJson(`${balancer}/api/rollouts/${id}/finish`, { reward: 1 });
      assert.equal(finished.status, 200, finished.text);
    }
    // Each rollout lives on exactly one gateway, with both of its calls there; both gateways took some.
    const perGateway = [0, 0];
    for (const id of ids) {
      const holders: number[] = [];
      for (const [i, g] of gateways.entries()) {
        const res = await fetch(`${g.url}/api/rollouts/${id}`);
        if (res.status === 200) {
          holders.push(i);
          const rollout = (await res.json()) as { calls: number; status: string };
          assert.deepEqual([rollout.calls, rollout.status], [2, "ok"], `${id} on gateway ${i}`);
        }
      }
      assert.equal(holders.length, 1, `${id} is on one gateway (found on ${holders.join(", ") || "none"})`);
      perGateway[holders[0]!]!++;
    }
    assert.ok(
      perGateway.every((n) => n > 0),
      `both gateways take rollouts: ${perGateway.join(" / ")}`,
    );
    await until(
      () => (core.status().rolloutsReceived === ROLLOUTS ? true : undefined),
      30_000,
      "the core to receive every rollout from both gateways",
    );
    assert.equal(core.status().rolloutsDuplicate, 0);
  });
});
