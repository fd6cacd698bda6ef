// A trainer's weight update through the RL core (trainer.proto PausePolicy / ResumePolicy, relayed to the gateway's
// control API with its token) and the core's staleness rule (--max-staleness, --stale keep | mask | drop) over the
// versions that update gave the tokens, in both batch layouts. Real gateway and sim, tokens mode.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { rmSync } from "node:fs";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { TrainerClient, tokenVersions, type TrainingBatch } from "../clients/ts/index.ts";
import { startCore, type Core, type StaleMode } from "../rl-core/core/index.ts";
import { answerInFlight } from "./answer-in-flight.ts";
import { trainerPython } from "./grpc-helpers.ts";
import { requireInCi } from "./require-in-ci.ts";
import { ROOT, postJson, startStack, tempDir, until, type Stack } from "./helpers.ts";

const TOKEN = "update-token";
const AUTH = { authorization: `Bearer ${TOKEN}` };
const dirs: string[] = [];
const closers: Array<() => Promise<void>> = [];
after(async () => {
  for (const close of closers.reverse()) await close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function core(stack: Stack, name: string, options: Parameters<typeof startCore>[0] | object): Promise<Core> {
  const dir = tempDir(`policy-trainer-${name}`);
  dirs.push(dir);
  const started = await startCore({
    gateways: [stack.gateway.grpc!.address],
    gatewayToken: TOKEN,
    consumerGroup: name,
    port: 0,
    metricsPort: null,
    dataDir: dir,
    tokenBudget: 1_000_000,
    batchTimeoutMs: 100,
    groupSize: 2,
    ...options,
  });
  closers.push(() => started.close());
  return started;
}

async function policyState(url: string): Promise<{ paused: boolean; version: string | null; holding: number }> {
  return (await (await fetch(`${url}/api/policy`, { headers: AUTH })).json()) as never;
}

async function createRollout(url: string, body: object): Promise<{ id: string }> {
  const res = await postJson(`${url}/api/rollouts`, body, AUTH);
  assert.equal(res.status, 201, res.text);
  return res.json;
}

async function batchesOf(c: Core, layout: "rows" | "tree"): Promise<TrainingBatch[]> {
  await c.flush();
  const client = new TrainerClient(c.address);
  const out: TrainingBatch[] = [];
  try {
    const ready = c.status().batchesReady;
    for await (const batch of client.batches({ layout, maxInFlight: 100 })) {
      out.push(batch);
      if (out.length === ready) break;
    }
    return out;
  } finally {
    client.close();
  }
}

describe("a weight update a trainer drives through the core, and the staleness of what it sampled", () => {
  let stack: Stack;
  const cores = new Map<string, Core>();
  const modes: StaleMode[] = ["keep", "mask", "drop"];
  let relay: Core;
  /** The first rollout's one call: its tokens before the update (version 0) and after (version 5). */
  let cut = 0;
  let sampled = 0;

  before(async () => {
    stack = await startStack({
      sim: { seed: 3, interTokenMs: 2 },
      gateway: { prompts: "tokens", grpcPort: 0, controlToken: TOKEN, requireKey: false },
    });
    closers.push(() => stack.close());
    relay = await core(stack, "relay", { gatewayApis: [stack.gateway.url] });
    for (const mode of modes)
      for (const layout of ["rows", "tree"] as const)
        cores.set(
          `${mode}/${layout}`,
          await core(stack, `${mode}-${layout}`, { maxStaleness: 2, stale: mode, layout }),
        );
  });

  test(
    "PausePolicy and ResumePolicy: relayed with the token, held calls served by the new version, repeatable",
    { timeout: 120_000 },
    async () => {
      const url = stack.gateway.url;
      const trainer = new TrainerClient(relay.address);
      try {
        const slow = await createRollout(url, { group: "g", policy_version: "0" });
        const answer = await answerInFlight(url, slow.id);

        const paused = await trainer.pausePolicy({ mode: "abort", timeoutS: 60 });
        assert.equal(paused.paused, true);
        assert.deepEqual(
          paused.gateways.map((g) => [g.url, g.paused, g.mode]),
          [[stack.gateway.url, true, "abort"]],
        );
        const again = await trainer.pausePolicy({ mode: "abort", timeoutS: 60 });
        assert.equal(again.gateways[0]!.pauses, paused.gateways[0]!.pauses, "a second pause is the same pause");
        // A call that comes during the pause is held, not failed.
        const fast = await createRollout(url, { group: "g", policy_version: "0" });
        const held = answerInFlight(url, fast.id, "Something short.");
        await until(async () => ((await policyState(url)).holding >= 1 ? true : undefined), 20_000, "a held call");

        const resumed = await trainer.resumePolicy(5);
        assert.equal(resumed.paused, false);
        assert.equal(resumed.currentVersion, "5");
        assert.equal((await policyState(url)).version, "5");
        assert.equal((await trainer.resumePolicy(5)).gateways[0]!.paused, false, "a resume may be repeated");
        assert.equal((await trainer.status()).currentVersion, "5");

        assert.ok(!(await answer.rest()).includes('"abort"'), "the aborted answer was continued");
        assert.match(await (await held).rest(), /\[DONE\]/);
        for (const [id, reward] of [
          [slow.id, 1],
          [fast.id, 0],
        ] as const)
          assert.equal((await postJson(`${url}/api/rollouts/${id}/finish`, { reward }, AUTH)).status, 200);
      } finally {
        trainer.close();
      }

      // The slow rollout's call: sampled by 0 up to the update, by 5 after it.
      await until(() => (relay.status().groupsDone >= 1 ? true : undefined), 60_000, "the group");
      const [batch] = await batchesOf(relay, "rows");
      const call = batch!.rowInfo.flatMap((r) => r.calls).find((c) => c.versionRuns?.length)!;
      assert.equal(call.versionRuns!.length, 2);
      assert.deepEqual(
        call.versionRuns!.map((r) => r.version),
        ["0", "5"],
      );
      cut = call.versionRuns![1]!.start;
      const versions = tokenVersions(batch!);
      sampled = versions.filter((_, t) => batch!.lossMask[t] === 1 && batch!.callIndex[t]! >= 0).length;
      const heldCall = batch!.rowInfo.flatMap((r) => r.calls).find((c) => c !== call)!;
      assert.equal(heldCall.policyVersion, "5", "the held call went upstream after the resume");
      assert.ok(cut > 0);
    },
  );

  for (const layout of ["rows", "tree"] as const) {
    test(`--max-staleness 2 --stale keep (${layout}): every token trained, the stale ones counted`, async () => {
      const c = cores.get(`keep/${layout}`)!;
      await until(() => (c.status().groupsDone >= 1 ? true : undefined), 60_000, "the group");
      const [batch] = await batchesOf(c, layout);
      const status = c.status();
      assert.equal(status.currentVersion, "5", "learned from the rollouts' versions");
      assert.equal(status.staleTokensKept, cut);
      assert.equal(batch!.rollouts, 2);
      assert.equal(batch!.staleTokens, cut);
      assert.equal(batch!.maxStaleness, 5);
      assert.equal(batch!.currentVersion, "5");
      const slowRow = batch!.rowInfo.find((r) => r.reward === 1)!;
      assert.deepEqual([slowRow.staleness, slowRow.staleTokens], [5, cut]);
      const trained = tokenVersions(batch!).filter((_, t) => batch!.lossMask[t] === 1);
      assert.equal(trained.filter((v) => v === "0").length, cut, "the stale tokens carry their version");
    });

    test(`--max-staleness 2 --stale mask (${layout}): stale tokens out of the loss, the rollout's fresh ones trained`, async () => {
      const c = cores.get(`mask/${layout}`)!;
      await until(() => (c.status().groupsDone >= 1 ? true : undefined), 60_000, "the group");
      const [batch] = await batchesOf(c, layout);
      assert.equal(c.status().staleTokensMasked, cut);
      assert.equal(batch!.rollouts, 2, "the slow rollout still trains");
      assert.equal(batch!.staleTokens, 0);
      const versions = tokenVersions(batch!);
      const trained = versions.filter((_, t) => batch!.lossMask[t] === 1);
      assert.ok(trained.length > 0 && trained.every((v) => v === "5"), `trained versions ${trained.join(",")}`);
      assert.equal(trained.length, sampled - cut);
      const call = batch!.rowInfo.flatMap((r) => r.calls).find((c) => c.versionRuns?.length)!;
      assert.deepEqual(call.versionRuns, [{ start: 0, version: "5" }], "runs over the tokens still trained");
      const slowRow = batch!.rowInfo.find((r) => r.reward === 1)!;
      assert.equal(slowRow.noSignal, false, "both rollouts in the group's statistics");
    });

    test(`--max-staleness 2 --stale drop (${layout}): the rollout with stale tokens dropped, counted`, async () => {
      const c = cores.get(`drop/${layout}`)!;
      await until(() => (c.status().groupsDone >= 1 ? true : undefined), 60_000, "the group");
      const [batch] = await batchesOf(c, layout);
      assert.equal(c.status().rolloutsDropped["stale"], 1);
      assert.equal(batch!.rollouts, 1);
      assert.deepEqual(
        batch!.rowInfo.map((r) => [r.reward, r.noSignal]),
        [[0, true]],
        "the fresh rollout alone in its group",
      );
      const trained = tokenVersions(batch!).filter((_, t) => batch!.lossMask[t] === 1);
      assert.ok(trained.every((v) => v === "5"));
    });
  }

  const python = trainerPython();
  const noPython = python ? null : "no python3 with grpcio, grpc_tools and numpy";
  test(
    "the Python client: pause_policy, update_policy",
    { timeout: 120_000, skip: requireInCi("python3-grpcio python3-numpy", noPython) },
    async () => {
      const { stdout } = await promisify(execFile)(python!, ["clients/python/tests/policy_update_check.py"], {
        cwd: ROOT,
        timeout: 120_000,
        env: { ...process.env, RLGATE_CORE: relay.address, RLGATE_VERSION: "step-7" },
      });
      const seen = JSON.parse(stdout);
      assert.equal(seen.pause.paused, true);
      assert.equal(seen.pause.gateways[0].mode, "wait");
      assert.equal(seen.again.gateways[0].pauses, seen.pause.gateways[0].pauses);
      assert.equal(seen.inside.paused, true);
      assert.equal(seen.status.current_version, "step-7");
      const gateway = await policyState(stack.gateway.url);
      assert.deepEqual([gateway.paused, gateway.version], [false, "step-7"]);
    },
  );

  test("a core refuses to start with a --gateway-api that is no http URL", async () => {
    await assert.rejects(core(stack, "bad-api", { gatewayApis: ["127.0.0.1:8700"] }), /http:\/\/ or https:\/\/ URL/);
  });

  test("a pause a gateway refuses is undone at the others", async () => {
    const c = await core(stack, "broken", { gatewayApis: [stack.gateway.url, "http://127.0.0.1:1"] });
    const trainer = new TrainerClient(c.address);
    try {
      await assert.rejects(trainer.pausePolicy({ mode: "keep" }), /UNAVAILABLE.*127\.0\.0\.1:1/s);
      assert.equal((await policyState(stack.gateway.url)).paused, false);
      await assert.rejects(
        new TrainerClient(cores.get("keep/rows")!.address).pausePolicy(),
        /relays pauses to no gateway/,
      );
    } finally {
      trainer.close();
    }
  });
});
