// MoE routing replay (R3) end to end: the sim routes every token it processes (deterministic experts, sim/moe.ts),
// the gateway asks for them (vLLM: choices[].routed_experts; SGLang: return_routed_experts with
// routed_experts_start_len), a multi-turn agent session runs through it (both upstream flavours, streamed and not,
// both prompt modes), and the RL core's batches carry, for every token of every row, exactly the experts the sim
// routed it to. No position's routing is stored twice; with SGLang in tokens mode none crosses the wire twice.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, describe, test } from "node:test";
import { TrainerClient, type TrainingBatch } from "../clients/ts/index.ts";
import { startGateway, type Gateway } from "../gateway/index.ts";
import { startCore, type Core } from "../rl-core/core/index.ts";
import { routeToken, type MoeOptions } from "../sim/moe.ts";
import { startSim, type SimServer } from "../sim/index.ts";
import { createRollout, postJson, readSse, streamedMessage, tempDir, TOOLS } from "./helpers.ts";

type Json = Record<string, any>;

const SEED = 11;

interface Setup {
  flavor: "vllm" | "sglang";
  prompts: "messages" | "tokens";
  stream: boolean;
  moe: MoeOptions;
}

/** A streamed chat answer put back together (content and tool calls). */
function assembled(events: unknown[]): Json {
  const { content, tool_calls } = streamedMessage(events);
  return { role: "assistant", content: content ?? "", ...(tool_calls.length ? { tool_calls } : {}) };
}

/** Four turns of an agent: tool calls answered with tool results, then a user follow-up. */
async function session(base: string, stream: boolean): Promise<void> {
  const messages: Json[] = [{ role: "user", content: "list the files, then count them" }];
  for (let turn = 0; turn < 4; turn++) {
    const body = { model: "Qwen/Qwen3-8B", messages, tools: TOOLS, stream };
    let message: Json;
    if (stream) {
      const res = await fetch(`${base}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      assert.equal(res.status, 200);
      const events = await readSse(res);
      for (const event of events)
        assert.ok(!JSON.stringify(event).includes("routed_experts"), "no routing in a stream");
      message = assembled(events);
    } else {
      const res = await postJson(`${base}/chat/completions`, body);
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.sglext, undefined, "SGLang's routing is the gateway's, not the harness's");
      message = res.json.choices[0].message;
    }
    messages.push(message);
    for (const call of message.tool_calls ?? [])
      messages.push({ role: "tool", tool_call_id: call.id, content: `a.txt\nb.txt (turn ${turn})` });
    if (!message.tool_calls?.length) messages.push({ role: "user", content: `and now turn ${turn + 1}?` });
  }
}

async function takeBatches(client: TrainerClient, rows: number): Promise<TrainingBatch[]> {
  const out: TrainingBatch[] = [];
  const ac = new AbortController();
  let seen = 0;
  for await (const batch of client.batches({ signal: ac.signal, maxInFlight: 4 })) {
    out.push(batch);
    await client.ack([batch.batchId]);
    seen += batch.rows;
    if (seen >= rows) ac.abort();
  }
  return out;
}

/** Every row's routing equals the sim's for each of its tokens as a model input; the row's last token's is 0. */
function checkBatch(batch: TrainingBatch, moe: MoeOptions): number {
  const routed = batch.routedExperts;
  assert.ok(routed, "the batch carries routed experts");
  assert.equal(batch.moeLayers, moe.layers);
  assert.equal(batch.moeTopK, moe.topK);
  assert.equal(batch.routedExpertsDtype, moe.experts <= 256 ? "uint8" : "uint16");
  assert.equal(routed instanceof Uint16Array, moe.experts > 256);
  const width = moe.layers * moe.topK;
  assert.equal(routed.length, batch.tokenIds.length * width);
  let checked = 0;
  const want: number[] = [];
  for (let r = 0; r < batch.rows; r++) {
    const a = batch.offsets[r]!;
    const b = batch.offsets[r + 1]!;
    for (let i = a; i < b - 1; i++) {
      const p = i - a;
      routeToken(SEED, moe, p, batch.tokenIds[i]!, p === 0 ? -1 : batch.tokenIds[i - 1]!, want);
      assert.deepEqual(
        Array.from(routed.subarray(i * width, (i + 1) * width)),
        want,
        `row ${r} token ${p} (${batch.lossMask[i] ? "sampled" : "context"})`,
      );
      checked++;
    }
    assert.ok(
      routed.subarray((b - 1) * width, b * width).every((e) => e === 0),
      "the last token was never an input",
    );
  }
  return checked;
}

async function metric(gatewayUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${gatewayUrl}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line ? Number(line.split(" ").pop()) : 0;
}

const SETUPS: Setup[] = [
  { flavor: "sglang", prompts: "tokens", stream: false, moe: { layers: 4, topK: 2, experts: 64 } },
  { flavor: "sglang", prompts: "tokens", stream: true, moe: { layers: 3, topK: 4, experts: 300 } },
  { flavor: "sglang", prompts: "messages", stream: true, moe: { layers: 4, topK: 2, experts: 64 } },
  { flavor: "vllm", prompts: "messages", stream: false, moe: { layers: 4, topK: 2, experts: 64 } },
  { flavor: "vllm", prompts: "messages", stream: true, moe: { layers: 3, topK: 4, experts: 300 } },
  { flavor: "vllm", prompts: "tokens", stream: true, moe: { layers: 4, topK: 2, experts: 64 } },
];

describe("routing replay (R3): sim → gateway → RL core → trainer", () => {
  const cleanup: Array<() => Promise<void>> = [];
  after(async () => {
    for (const step of cleanup.reverse()) await step();
  });

  for (const setup of SETUPS) {
    const name = `${setup.flavor}, ${setup.prompts} mode, ${setup.stream ? "streamed" : "whole"}, ${setup.moe.experts} experts`;
    test(name, async () => {
      const sim: SimServer = await startSim({ port: 0, flavor: setup.flavor, moe: setup.moe, seed: SEED });
      const gwDir = tempDir("r3-gw");
      const coreDir = tempDir("r3-core");
      const gw: Gateway = await startGateway({
        upstream: sim.url,
        upstreamFlavor: setup.flavor,
        prompts: setup.prompts,
        port: 0,
        grpcPort: 0,
        dataDir: gwDir,
        routedExperts: { topK: setup.moe.topK, experts: setup.moe.experts },
      });
      const core: Core = await startCore({
        gateways: [gw.grpc!.address],
        port: 0,
        dataDir: coreDir,
        batchTimeoutMs: 100,
        tokenBudget: 1_000_000,
        groupSize: 2,
      });
      const client = new TrainerClient(core.address, { deadlineMs: 10_000 });
      cleanup.push(async () => {
        client.close();
        await core.close();
        await gw.close();
        await sim.close();
        rmSync(gwDir, { recursive: true, force: true });
        rmSync(coreDir, { recursive: true, force: true });
      });

      const store = gw.context.store;
      const rollouts = [];
      for (let k = 0; k < 2; k++) {
        const r = await createRollout(gw.url, { group: "r3", task: "files" });
        await session(r.base_urls.openai, setup.stream);
        rollouts.push(r.id);
      }
      // Stored once per position: the routed rows kept equal the rollout's routed positions, whatever was sent.
      let storedRows = 0;
      let storedBytes = 0;
      for (const id of rollouts) {
        const calls = store.listCalls(id);
        for (const call of calls) assert.equal(call.routingIssue, undefined, `call ${call.seq}: ${call.routingIssue}`);
        const bytes = store.storedTokenBytes(id);
        storedRows += bytes.routedTokens;
        storedBytes += bytes.routing;
      }
      const received = await metric(gw.url, "rlgate_routed_experts_rows_total");
      if (setup.flavor === "sglang" && setup.prompts === "tokens") {
        // routed_experts_start_len: every continued call asked only for what its thread lacked.
        assert.equal(received, storedRows, "no position's routing crossed the wire twice");
        const asked = sim.requests.filter((r) => (r.body as Json)?.routed_experts_start_len > 0);
        assert.ok(asked.length >= 4, "continued calls sent routed_experts_start_len");
      } else {
        assert.ok(received >= storedRows);
      }
      const width = setup.moe.layers * setup.moe.topK;
      assert.equal(storedBytes, storedRows * width * (setup.moe.experts <= 256 ? 1 : 2));

      for (const [k, id] of rollouts.entries()) {
        const res = await postJson(`${gw.url}/api/rollouts/${id}/finish`, { reward: k });
        assert.equal(res.status, 200, res.text);
        assert.equal(res.json.trajectories.flags.flagged, false, JSON.stringify(res.json.trajectories.flags.reasons));
      }
      const batches = await takeBatches(client, 2);
      let checked = 0;
      for (const batch of batches) checked += checkBatch(batch, setup.moe);
      assert.ok(checked > 200, `${checked} tokens checked`);
      if (setup.stream && setup.flavor === "vllm")
        assert.ok((await metric(gw.url, "rlgate_routed_experts_reemitted_total")) >= 8);
    });
  }
});
