// Several inference replicas behind one gateway: each rollout's calls on one replica, fail-over when one dies, a
// replica added by the upstreams file, the load spread, health ejection and return, and /metrics.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { startSim } from "../sim/index.ts";
import type { CallRecord } from "../store/records.ts";
import { AGENT_SCRIPT, postJson, rolloutCalls, runCli, tempDir, until } from "./helpers.ts";
import { Agent, startFleet, startSims, type Fleet } from "./replicas-helpers.ts";

/** The replica that served each call of a rollout. */
async function replicasOf(fleet: Fleet, agent: Agent): Promise<string[]> {
  return (await rolloutCalls(fleet.gateway.url, agent.rollout.id)).map((c) => c.replica ?? "none");
}

async function calls(fleet: Fleet, agent: Agent): Promise<CallRecord[]> {
  return rolloutCalls(fleet.gateway.url, agent.rollout.id);
}

async function agents(fleet: Fleet, n: number): Promise<Agent[]> {
  return Promise.all(Array.from({ length: n }, () => Agent.create(fleet.gateway.url)));
}

async function metricsText(fleet: Fleet): Promise<string> {
  return (await fetch(`${fleet.gateway.url}/metrics`)).text();
}

function metric(text: string, name: string, replica: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${name}{replica="${replica}"}`));
  return line === undefined ? undefined : Number(line.split(" ").at(-1));
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 300));

describe("replicas", () => {
  test("stickiness: every call of a rollout goes to one replica, the one that received it", async () => {
    const fleet = await startFleet(await startSims(3));
    try {
      const group = await agents(fleet, 12);
      for (let turn = 0; turn < 3; turn++)
        await Promise.all(group.map((a) => a.turn({ stream: turn % 2 === 1 }).then((s) => assert.equal(s, 200))));
      const served = new Map<string, number>();
      for (const agent of group) {
        const replicas = await replicasOf(fleet, agent);
        assert.equal(replicas.length, 3);
        assert.equal(new Set(replicas).size, 1, `rollout ${agent.rollout.id} went to ${replicas.join(", ")}`);
        served.set(replicas[0]!, (served.get(replicas[0]!) ?? 0) + 3);
      }
      // The record names the replica that really answered: each sim's chat requests are the calls recorded on it.
      for (const sim of fleet.sims) {
        const received = sim.requests.filter((r) => r.path === "/v1/chat/completions").length;
        assert.equal(received, served.get(sim.url) ?? 0, `${sim.url}`);
      }
    } finally {
      await fleet.close();
    }
  });

  test("balanced load: 100 concurrent rollouts spread over 3 replicas", async () => {
    const fleet = await startFleet(await startSims(3));
    try {
      const group = await agents(fleet, 100);
      const statuses = await Promise.all(group.map((a) => a.turn()));
      assert.deepEqual(new Set(statuses), new Set([200]));
      const counts = fleet.sims.map((s) => s.requests.filter((r) => r.path === "/v1/chat/completions").length);
      assert.equal(
        counts.reduce((a, b) => a + b),
        100,
      );
      for (const count of counts) assert.ok(count >= 15 && count <= 55, `shares ${counts.join("/")}`);
    } finally {
      await fleet.close();
    }
  });

  test("fail-over: a replica closed mid-run; its rollouts continue on another replica, trajectories intact", async () => {
    // Health checks far apart: the dead replica is found by the calls themselves (a refused connection).
    // A scripted agent (tool, tool, answer) whose history never adds a user turn: one trajectory on one replica.
    const fleet = await startFleet(await startSims(3, { script: AGENT_SCRIPT }), { healthIntervalMs: 60_000 });
    try {
      const group = await agents(fleet, 9);
      await Promise.all(group.map((a) => a.turn()));
      const first = await Promise.all(group.map((a) => replicasOf(fleet, a).then((r) => r[0]!)));
      const doomedUrl = first[0]!;
      const doomed = fleet.sims.find((s) => s.url === doomedUrl)!;
      const orphans = group.filter((_, i) => first[i] === doomedUrl);

      // A streamed call in flight on the doomed replica when it dies: recorded as failed, never re-run elsewhere.
      const inFlight = orphans[0]!.turn({ stream: true, headers: { "x-sim-delay-ms": "30000" } });
      await until(() => (doomed.stats.inFlight > 0 ? true : undefined), 20_000, "the call to reach the replica");
      const elsewhere = () => fleet.sims.filter((s) => s !== doomed).reduce((n, s) => n + s.stats.requests, 0);
      const before = elsewhere();
      await doomed.close();
      assert.notEqual(await inFlight, 200);
      await settle();
      assert.equal(elsewhere(), before, "the call that reached the model was not sent to another replica");

      // The next turns, one rollout at a time: the first call to the dead replica is refused and retried elsewhere.
      for (let turn = 0; turn < 2; turn++)
        for (const agent of group) assert.equal(await agent.turn({ stream: turn === 1 }), 200);

      const orphanCalls = await calls(fleet, orphans[0]!);
      assert.deepEqual(
        orphanCalls.map((c) => c.status),
        ["ok", "upstream_error", "ok", "ok"],
      );
      assert.equal(orphanCalls[1]!.replica, doomedUrl, "the failed call names the replica that died under it");
      const moved = orphanCalls[2]!.replica!;
      assert.notEqual(moved, doomedUrl);
      assert.equal(orphanCalls[3]!.replica, moved, "the rollout stays on its new replica");
      // Exactly one call met the refusal (the replica was ejected then) and was retried, saying so.
      const all = (await Promise.all(group.map((a) => calls(fleet, a)))).flat();
      const retried = all.filter((c) => c.warnings?.some((w) => w.includes("refused the connection")));
      assert.equal(retried.length, 1, JSON.stringify(retried.map((c) => c.warnings)));
      assert.match(retried[0]!.warnings!.join(" "), new RegExp(`replica ${doomedUrl} refused the connection`));
      assert.equal(retried[0]!.status, "ok");
      assert.notEqual(retried[0]!.replica, doomedUrl);
      // Other rollouts never moved.
      for (const [i, agent] of group.entries()) {
        if (first[i] === doomedUrl) continue;
        assert.deepEqual(new Set(await replicasOf(fleet, agent)), new Set([first[i]]));
      }

      // Token ids are the same on every replica: the continued rollout is one trajectory, as on a single replica.
      const finished = await postJson(`${fleet.gateway.url}/api/rollouts/${orphans[0]!.rollout.id}/finish`, {
        reward: 1,
      });
      assert.equal(finished.status, 200, finished.text);
      const rec = (await (
        await fetch(`${fleet.gateway.url}/api/rollouts/${orphans[0]!.rollout.id}/trajectories`)
      ).json()) as any;
      assert.equal(rec.trajectories.length, 1, JSON.stringify(finished.json.trajectories));
      assert.deepEqual(rec.breaks, []);
      assert.deepEqual(rec.flags.failed_calls, [orphanCalls[1]!.seq], "the failed call is listed, not trained");
      const last = orphanCalls.at(-1)!;
      assert.deepEqual(rec.trajectories[0].token_ids, [...last.promptTokenIds!, ...last.choices[0]!.tokenIds]);

      const text = await metricsText(fleet);
      assert.equal(metric(text, "rlgate_replica_healthy", doomedUrl), 0);
      assert.ok(metric(text, "rlgate_replica_errors_total", doomedUrl)! >= 2);
    } finally {
      await fleet.close();
    }
  });

  test("pass-through: a GET refused by a dead replica is answered by another, and ejects the dead one", async () => {
    const fleet = await startFleet(await startSims(2), { healthIntervalMs: 60_000 });
    try {
      const [dead, alive] = fleet.sims;
      await dead!.close();
      await settle();
      for (let i = 0; i < 4; i++) {
        const res = await fetch(`${fleet.gateway.url}/v1/models`);
        assert.equal(res.status, 200);
        assert.equal(((await res.json()) as any).object, "list");
      }
      assert.equal(alive!.requests.filter((r) => r.path === "/v1/models").length, 4);
      const text = await metricsText(fleet);
      assert.equal(metric(text, "rlgate_replica_errors_total", dead!.url), 1, "tried once, then ejected");
      assert.equal(metric(text, "rlgate_replica_healthy", dead!.url), 0);
    } finally {
      await fleet.close();
    }
  });

  test("a replica added to the upstreams file takes new rollouts; old ones move only to it", async () => {
    const sims = await startSims(3);
    const file = join(tempDir("upstreams"), "upstreams.txt");
    writeFileSync(file, `# the fleet\n${sims[0]!.url}\n${sims[1]!.url}   # second\n\n`);
    const fleet = await startFleet(sims, { upstream: undefined, upstreamsFile: file });
    try {
      assert.deepEqual(fleet.gateway.context.upstream.urls, [sims[0]!.url, sims[1]!.url]);
      const old = await agents(fleet, 30);
      await Promise.all(old.map((a) => a.turn()));
      assert.equal(sims[2]!.stats.requests, 0);
      const before = await Promise.all(old.map((a) => replicasOf(fleet, a).then((r) => r[0]!)));

      writeFileSync(file, `${sims[0]!.url}\n${sims[1]!.url}\n${sims[2]!.url}\n`);
      await until(() => (fleet.gateway.context.upstream.urls.length === 3 ? true : undefined), 20_000, "the reload");
      const fresh = await agents(fleet, 30);
      await Promise.all([...old, ...fresh].map((a) => a.turn()));
      const freshOn = await Promise.all(fresh.map((a) => replicasOf(fleet, a).then((r) => r[0]!)));
      assert.ok(freshOn.includes(sims[2]!.url), "no new rollout went to the added replica");
      for (const [i, agent] of old.entries()) {
        const [was, now] = await replicasOf(fleet, agent);
        assert.equal(was, before[i]);
        assert.ok(now === was || now === sims[2]!.url, `a rollout moved from ${was} to ${now}`);
      }

      // A bad edit keeps the list, and the log says why.
      writeFileSync(file, `${sims[0]!.url}\nftp://nowhere\n`);
      const logged = await until(
        () => fleet.logs.find((l) => String(l["msg"]).includes("keeping the replicas")),
        20_000,
        "the bad file to be logged",
      );
      assert.match(String(logged["msg"]), /ftp:\/\/nowhere' is not an http\(s\) URL/);
      assert.equal(fleet.gateway.context.upstream.urls.length, 3);

      // A replica removed from the file takes no more calls and leaves /metrics.
      writeFileSync(file, `${sims[0]!.url}\n${sims[1]!.url}\n`);
      await until(() => (fleet.gateway.context.upstream.urls.length === 2 ? true : undefined), 20_000, "the removal");
      assert.doesNotMatch(await metricsText(fleet), new RegExp(`replica="${sims[2]!.url}"`));
      const onRemoved = fresh.filter((_, i) => freshOn[i] === sims[2]!.url);
      for (const agent of onRemoved) assert.equal(await agent.turn(), 200);
      for (const agent of onRemoved) assert.notEqual((await replicasOf(fleet, agent)).at(-1), sims[2]!.url);
    } finally {
      await fleet.close();
    }
  });

  test("health checks eject a replica that stopped answering and bring it back when it answers again", async () => {
    const sims = await startSims(3);
    const fleet = await startFleet(sims, { healthIntervalMs: 100 });
    try {
      const group = await agents(fleet, 12);
      await Promise.all(group.map((a) => a.turn()));
      const first = await Promise.all(group.map((a) => replicasOf(fleet, a).then((r) => r[0]!)));
      const target = sims.find((s) => s.url === first[0])!;
      const owned = group.filter((_, i) => first[i] === target.url);
      const port = target.port;
      await target.close();
      await until(
        async () => (metric(await metricsText(fleet), "rlgate_replica_healthy", target.url) === 0 ? true : undefined),
        20_000,
        "the closed replica to be ejected",
      );
      const ejected = fleet.logs.find((l) => l["msg"] === "replica ejected");
      assert.equal(ejected?.["replica"], target.url);
      assert.match(String(ejected?.["reason"]), /health check failed 2 times in a row/);
      // Ejected by the checks: its rollouts' calls go straight to the next replica, no refused connection first.
      for (const agent of owned) assert.equal(await agent.turn(), 200);
      for (const agent of owned) {
        const [, second] = await calls(fleet, agent);
        assert.notEqual(second!.replica, target.url);
        assert.equal(second!.warnings, undefined);
      }

      // The replica comes back on its address: after passing checks, its rollouts return to it.
      const revived = await startSim({ port });
      fleet.sims.push(revived);
      await until(
        async () => (metric(await metricsText(fleet), "rlgate_replica_healthy", target.url) === 1 ? true : undefined),
        20_000,
        "the replica to return",
      );
      assert.ok(fleet.logs.some((l) => l["msg"] === "replica returned" && l["replica"] === target.url));
      for (const agent of owned) assert.equal(await agent.turn(), 200);
      assert.equal(revived.stats.requests - revived.requests.filter((r) => r.path === "/health").length, owned.length);
    } finally {
      await fleet.close();
    }
  });

  test("/metrics: per-replica requests, in flight, errors and health", async () => {
    const fleet = await startFleet(await startSims(3));
    try {
      const group = await agents(fleet, 6);
      await Promise.all(group.map((a) => a.turn()));
      assert.equal((await fetch(`${fleet.gateway.url}/v1/models`)).status, 200);
      const text = await metricsText(fleet);
      let requests = 0;
      for (const sim of fleet.sims) {
        assert.equal(metric(text, "rlgate_replica_in_flight", sim.url), 0);
        assert.equal(metric(text, "rlgate_replica_healthy", sim.url), 1);
        assert.equal(metric(text, "rlgate_replica_errors_total", sim.url), 0);
        const sent = metric(text, "rlgate_replica_requests_total", sim.url)!;
        assert.equal(sent, sim.requests.filter((r) => r.path !== "/health").length);
        requests += sent;
      }
      assert.equal(requests, 7, "6 calls and one passthrough");
    } finally {
      await fleet.close();
    }
  });

  test("rlgate serve refuses an upstreams file it cannot use, with a sentence", async () => {
    const dir = tempDir("upstreams-cli");
    const result = await runCli(["serve", "--port", "0", "--upstreams-file", join(dir, "missing.txt"), "--data", dir]);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /rlgate: cannot read the upstreams file .*missing\.txt: ENOENT/);
    assert.doesNotMatch(result.stderr, /\n\s+at /, "a sentence, not a stack trace");
  });

  test("a bad --upstream is refused with a sentence", async () => {
    await assert.rejects(
      startFleet([], { upstream: "http://127.0.0.1:8000,localhost:9000" }),
      /--upstream: 'localhost:9000' is not an http\(s\) URL/,
    );
    await assert.rejects(startFleet([], { upstream: [] }), /no upstream: give --upstream/);
  });
});
