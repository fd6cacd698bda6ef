// Weight updates through the gateway (issue 44) against both sim flavours: an abort-mode pause that lands mid-stream
// is invisible to the harness (one answer, equal token for token to an uninterrupted one with the same seed), the
// call's ids are exactly what the sim sampled and its per-token versions split where the sim's requests say the
// answer was cut; a wait-mode pause lets running answers end and holds new calls until the resume. Every pause is
// triggered by what the harness received, never by a timer.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { simLogprob } from "../sim/logprobs.ts";
import { versionLogprobSeed } from "../sim/weights/state.ts";
import type { FlavorName } from "../sim/flavor.ts";
import { TrajectoryConsumer } from "../clients/ts/index.ts";
import type { RolloutMessage } from "../protocol/index.ts";
import { createRollout, postJson, rolloutCalls, startStack, type Stack } from "./helpers.ts";
import { describeLoad, policyUpdateLoad } from "./policy-update-load.ts";
import { versionMismatches } from "./token-version-check.ts";

const MODEL = "Qwen/Qwen3-8B";
const SEED = 11;
const ASK = {
  model: MODEL,
  stream: true,
  seed: 7,
  max_tokens: 80,
  messages: [{ role: "user", content: "Tell me a long story about a lighthouse keeper." }],
};

async function policy(stack: Stack, action: "pause" | "resume", body: unknown): Promise<any> {
  const res = await postJson(`${stack.gateway.url}/api/policy/${action}`, body);
  assert.equal(res.status, 200, res.text);
  return res.json;
}

/** Streams one chat call; `onChunk(n)` runs (awaited) after the n-th content event arrived. Returns the events. */
async function streamChat(
  url: string,
  body: unknown,
  onChunk: (n: number) => Promise<void> = async () => {},
): Promise<any[]> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 200);
  const decoder = new TextDecoder();
  let buffer = "";
  const events: any[] = [];
  let n = 0;
  for await (const bytes of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(bytes, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block.replace(/^data: /, "");
      if (data === "[DONE]") {
        events.push(data);
        continue;
      }
      const event = JSON.parse(data);
      events.push(event);
      if (event.choices?.[0]?.delta?.content || event.choices?.[0]?.delta?.reasoning) await onChunk(++n);
    }
  }
  return events;
}

function answerText(events: any[]): string {
  return events
    .filter((e) => e !== "[DONE]")
    .map((e) => (e.choices?.[0]?.delta?.reasoning ?? "") + (e.choices?.[0]?.delta?.content ?? ""))
    .join("");
}

function finishReasons(events: any[]): unknown[] {
  return events.filter((e) => e !== "[DONE]" && e.choices?.[0]?.finish_reason).map((e) => e.choices[0].finish_reason);
}

for (const flavor of ["vllm", "sglang"] as FlavorName[]) {
  describe(`weight updates through the gateway (${flavor} sim, tokens prompt mode)`, () => {
    const stacks: Stack[] = [];
    after(async () => {
      for (const stack of stacks) await stack.close();
    });

    async function stack(): Promise<Stack> {
      const s = await startStack({
        sim: { flavor, seed: SEED, interTokenMs: 2 },
        gateway: { prompts: "tokens", upstreamFlavor: flavor, grpcPort: 0 },
      });
      stacks.push(s);
      return s;
    }

    test("abort mode mid-stream: one answer, equal to an uninterrupted one; versions split where the sim cut it", async () => {
      const s = await stack();
      const reference = await createRollout(s.gateway.url, { policy_version: "0" });
      const refEvents = await streamChat(`${s.gateway.url}/r/${reference.id}/v1/chat/completions`, ASK);
      const [refCall] = await rolloutCalls(s.gateway.url, reference.id);

      const rollout = await createRollout(s.gateway.url, { policy_version: "0" });
      const completionsBefore = s.sim.requests.filter((r) => r.path === "/v1/completions").length;
      const events = await streamChat(`${s.gateway.url}/r/${rollout.id}/v1/chat/completions`, ASK, async (n) => {
        if (n !== 5) return;
        const paused = await policy(s, "pause", { mode: "abort" });
        assert.equal(paused.paused, true);
        const resumed = await policy(s, "resume", { version: "1" });
        assert.equal(resumed.paused, false);
        assert.equal(resumed.version, "1");
      });

      assert.equal(answerText(events), answerText(refEvents), "the harness reads the uninterrupted answer");
      assert.deepEqual(finishReasons(events), finishReasons(refEvents), "one finish, not an abort");
      const [call] = await rolloutCalls(s.gateway.url, rollout.id);
      assert.equal(call!.status, "ok");
      assert.deepEqual(call!.choices[0]!.tokenIds, refCall!.choices[0]!.tokenIds, "ids: exactly what the sim sampled");
      assert.deepEqual(call!.promptTokenIds, refCall!.promptTokenIds);

      // The sim was asked twice: the first request, aborted, then the prompt plus the ids sampled before the abort.
      const sent = s.sim.requests.filter((r) => r.path === "/v1/completions").slice(completionsBefore);
      assert.equal(sent.length, 2);
      const first = (sent[0]!.body as { prompt: number[] }).prompt;
      const second = (sent[1]!.body as { prompt: number[] }).prompt;
      const cut = second.length - first.length;
      assert.ok(cut >= 5 && cut < call!.choices[0]!.tokenIds.length, `cut at ${cut}`);
      assert.deepEqual(second, [...first, ...call!.choices[0]!.tokenIds.slice(0, cut)]);
      assert.ok(s.sim.weights.log.some((e) => e.event === "abort"));
      assert.equal(call!.policyVersion, "0");
      assert.deepEqual(call!.policyUpdate!.versions, [
        { start: 0, version: "0" },
        { start: cut, version: "1" },
      ]);
      assert.equal(call!.policyUpdate!.continued, 1);

      // Logprobs: before the cut the old weights', after it the new ones' (the sim's policy changed with the version).
      const ids = call!.choices[0]!.tokenIds;
      const logprobs = call!.choices[0]!.logprobs!;
      const context = (i: number) => [...first, ...ids.slice(0, i)];
      for (const i of [0, cut - 1, cut, ids.length - 1]) {
        const version = i < cut ? "0" : "1";
        const expected = Math.fround(simLogprob(versionLogprobSeed(SEED, version), context(i), ids[i]!));
        assert.equal(logprobs[i], expected, `token ${i} scored by version ${version}`);
      }
      assert.notEqual(logprobs[cut], refCall!.choices[0]!.logprobs![cut], "the new version scores differently");
      // The load figure's check (token-version-check.ts) passes this call, and fails it when its runs are off.
      const runsOf = (versions: { start: number; version: string }[]) => ({
        ...call!,
        policyUpdate: { ...call!.policyUpdate, versions },
      });
      assert.equal(versionMismatches(call!, SEED).mismatched, 0);
      const shifted = runsOf([
        { start: 0, version: "0" },
        { start: cut + 1, version: "1" },
      ]);
      assert.equal(versionMismatches(shifted, SEED).mismatched, 1, "one token a run late");
      assert.equal(versionMismatches(runsOf([{ start: 0, version: "0" }]), SEED).mismatched, ids.length - cut);

      // The trajectory stream carries the runs on the call's CallInfo (batches pass CallInfo on, in either layout).
      const finished = await postJson(`${s.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 1 });
      assert.equal(finished.status, 200, finished.text);
      const message = await new Promise<RolloutMessage>((resolve) => {
        const consumer: TrajectoryConsumer = new TrajectoryConsumer({
          address: `127.0.0.1:${s.gateway.grpc!.port}`,
          member: `policy-${flavor}`,
          onRollout(m) {
            consumer.ack([m.cursor]);
            if (m.rolloutId !== rollout.id) return;
            void consumer.close();
            resolve(m);
          },
        });
        consumer.start();
      });
      const info = message.calls!.find((c) => c.seq === call!.seq)!;
      assert.equal(info.policyVersion, "0");
      assert.deepEqual(info.versionRuns, [
        { start: 0, version: "0" },
        { start: cut, version: "1" },
      ]);
      // Each token of the row: its call's run at its place among the call's tokens (context tokens have none).
      const raw = message.callIndex!;
      const callIndex = new Int32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
      const mask = message.trajectories.lossMask;
      const mine = message.calls!.indexOf(info);
      let k = 0;
      const versions: string[] = [];
      for (let t = 0; t < callIndex.length; t++) {
        if (callIndex[t] !== mine || mask[t] !== 1) continue;
        const run = [...info.versionRuns!].reverse().find((r) => r.start <= k)!;
        versions.push(run.version);
        k++;
      }
      assert.equal(versions.length, ids.length);
      assert.deepEqual(versions, [...Array(cut).fill("0"), ...Array(ids.length - cut).fill("1")]);
    });

    test("wait mode: the running answer ends under the old weights, a call sent meanwhile is held, then served", async () => {
      const s = await stack();
      const rollout = await createRollout(s.gateway.url, { policy_version: "0" });
      const url = `${s.gateway.url}/r/${rollout.id}/v1/chat/completions`;
      let pausing: Promise<any> | null = null;
      let held: Promise<any[]> | null = null;
      const events = await streamChat(url, ASK, async (n) => {
        if (n !== 3) return;
        pausing = policy(s, "pause", { mode: "wait" });
        // The pause holds new calls at once, though it answers only once the running answer ended.
        while (!(await (await fetch(`${s.gateway.url}/api/policy`)).json()).paused)
          await new Promise((r) => setImmediate(r));
        held = streamChat(url, { ...ASK, messages: [{ role: "user", content: "And another one." }] });
        while ((await (await fetch(`${s.gateway.url}/api/policy`)).json()).holding !== 1)
          await new Promise((r) => setImmediate(r));
      });
      assert.deepEqual(finishReasons(events).length, 1);
      assert.notEqual(finishReasons(events)[0], "abort");
      const paused = await pausing!;
      assert.equal(paused.mode, "wait");
      assert.equal(paused.holding, 1);
      await policy(s, "resume", { version: "2" });
      const heldEvents = await held!;
      assert.equal(finishReasons(heldEvents).length, 1);
      const calls = await rolloutCalls(s.gateway.url, rollout.id);
      assert.equal(calls.length, 2);
      assert.equal(calls[0]!.policyVersion, "0");
      assert.equal(calls[0]!.policyUpdate, undefined, "the running answer was not interrupted");
      assert.equal(calls[1]!.policyVersion, "2", "the held call is served by the new version");
      assert.ok(calls[1]!.policyUpdate!.heldMs! > 0);
      const metrics = await (await fetch(`${s.gateway.url}/metrics`)).text();
      assert.match(metrics, /rlgate_policy_pauses_total\{mode="wait"\} 1/);
      assert.match(metrics, /rlgate_policy_held_calls_total 1/);
      assert.match(metrics, /rlgate_policy_hold_seconds_count 1/);
    });

    for (const prompts of ["tokens", "messages"] as const) {
      test(`abort mode on a whole answer (${prompts} prompts): asked again after the resume, one whole answer`, async () => {
        const s = await startStack({
          sim: { flavor, seed: SEED, interTokenMs: 50 },
          gateway: { prompts, upstreamFlavor: flavor },
        });
        stacks.push(s);
        const rollout = await createRollout(s.gateway.url, { policy_version: "0" });
        const body = { ...ASK, stream: false, max_tokens: 30 };
        const answer = postJson(`${s.gateway.url}/r/${rollout.id}/v1/chat/completions`, body);
        while (s.sim.weights.running === 0) await new Promise((r) => setImmediate(r));
        await policy(s, "pause", { mode: "abort" });
        await policy(s, "resume", { version: "5" });
        const res = await answer;
        assert.equal(res.status, 200, res.text);
        assert.notEqual(res.json.choices[0].finish_reason, "abort");
        assert.ok(res.json.choices[0].message.content || res.json.choices[0].message.reasoning);
        const [call] = await rolloutCalls(s.gateway.url, rollout.id);
        assert.equal(call!.status, "ok");
        // The sim's requests say whether the pause caught the answer running (asked twice) or it had just ended.
        const generations = s.sim.requests.filter((r) => r.path.startsWith("/v1/")).length;
        if (generations === 2) {
          assert.equal(call!.policyUpdate!.continued, 1);
          assert.deepEqual(call!.policyUpdate!.versions, [{ start: 0, version: "5" }]);
        } else {
          assert.equal(generations, 1);
          assert.equal(call!.policyUpdate, undefined);
        }
        console.log(
          `whole answer, ${flavor}, ${prompts}: ${generations === 2 ? "aborted and asked again" : "ended first"}`,
        );
        assert.ok(call!.choices[0]!.tokenIds.length > 0);
        assert.equal(call!.choices[0]!.finishReason, res.json.choices[0].finish_reason);
      });
    }

    test("repeated pause and resume are idempotent; a pause nobody resumes ends at its timeout", async () => {
      const s = await stack();
      const one = await policy(s, "pause", { mode: "keep", timeout_s: 60 });
      const two = await policy(s, "pause", { mode: "keep", timeout_s: 60 });
      assert.equal(one.pauses, 1);
      assert.equal(two.pauses, 1, "a repeated pause is the same pause");
      assert.equal(s.sim.weights.paused, true);
      await policy(s, "resume", { version: 3 });
      const again = await policy(s, "resume", { version: 3 });
      assert.equal(again.paused, false);
      assert.equal(again.version, "3");
      assert.equal(s.sim.weights.paused, false);

      await policy(s, "pause", { timeout_s: 0.05 });
      while ((await (await fetch(`${s.gateway.url}/api/policy`)).json()).paused)
        await new Promise((r) => setTimeout(r, 10));
      assert.equal(s.sim.weights.paused, false, "the timeout resumed the upstream too");
      const metrics = await (await fetch(`${s.gateway.url}/metrics`)).text();
      assert.match(metrics, /rlgate_policy_auto_resumes_total 1/);
      const bad = await postJson(`${s.gateway.url}/api/policy/pause`, { mode: "sideways" });
      assert.equal(bad.status, 400);
    });
  });
}

describe("weight updates under load (bounded: 20 updates under 16 concurrent rollouts, vllm sim; the full figure: npm run bench:policy-updates)", () => {
  const stacks: Stack[] = [];
  after(async () => {
    for (const stack of stacks) await stack.close();
  });

  test("no call lost, failed or cut short; every token has the version that sampled it; held time per call reported", async () => {
    const s = await startStack({ sim: { seed: SEED, interTokenMs: 1 }, gateway: { prompts: "tokens" } });
    stacks.push(s);
    const UPDATES = 20;
    const figures = await policyUpdateLoad(s, {
      updates: UPDATES,
      rollouts: 16,
      simSeed: SEED,
      update: async (mode, version) => {
        await policy(s, "pause", { mode });
        await policy(s, "resume", { version });
      },
    });
    assert.ok(figures.calls >= 16);
    assert.equal(figures.failed, 0, "no call failed");
    assert.equal(figures.lost, 0, "one finish per harness call");
    assert.equal(figures.abortsSeen, 0, "no harness saw an abort");
    assert.equal(figures.untagged, 0, "every sampled token has a version");
    assert.equal(figures.mismatched, 0, "every sampled token has the version that sampled it");
    assert.ok(figures.updatedTokens > 0, "tokens sampled after updates were checked");
    const metrics = await (await fetch(`${s.gateway.url}/metrics`)).text();
    assert.match(metrics, new RegExp(`rlgate_policy_held_calls_total ${figures.heldMs.length}\\b`));
    const state = await (await fetch(`${s.gateway.url}/api/policy`)).json();
    assert.equal(state.pauses, UPDATES);
    assert.equal(state.version, String(UPDATES));
    console.log(`load: ${describeLoad(figures)}`);
  });
});
