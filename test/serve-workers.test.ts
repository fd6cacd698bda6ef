// `rlgate serve --workers N` as users run it (a real subprocess): calls of one rollout land on different workers
// (every call on a fresh connection, which the primary hands to the next worker) and the trajectories are the same as
// one process makes of the same script, in both prompt modes and along a Responses previous_response_id chain; a
// worker SIGKILLed under load loses nothing acknowledged, is started again, and the one trajectory stream (in the
// primary) keeps delivering; a worker SIGKILLed while connections arrive leaves none of them unanswered and open.
import assert from "node:assert/strict";
import { request } from "node:http";
import { rmSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { TrajectoryConsumer } from "../clients/ts/index.ts";
import { startGateway, type Gateway } from "../gateway/index.ts";
import type { RolloutMessage } from "../protocol/index.ts";
import { startSim, type SimServer } from "../sim/index.ts";
import { DEFAULT_SIM_MAX_MODEL_LEN } from "../cli/serve-command.ts";
import { spawnCli, tempDir, TOOLS, until, type CliProcess } from "./helpers.ts";
import { client, newAcknowledged, verify } from "./reliability/load.ts";

const AGENT_ROLLOUTS = 8;
const CHAIN_ROLLOUTS = 4;
const TURNS = 4;

interface Reply {
  status: number;
  seq: number;
  text: string;
}

/** A POST on a connection of its own (no keep-alive): the primary gives each new connection to the next worker. */
function post(url: string, body: unknown): Promise<Reply> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: "POST",
        agent: false,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, seq: Number(res.headers["x-rlgate-call"] ?? NaN), text }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

/** A GET on a connection of its own; rejects when the connection is closed without an answer. */
function getOnce(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

function sseEvents(text: string): any[] {
  return text
    .split("\n\n")
    .map((block) =>
      block
        .split("\n")
        .filter((line) => line.startsWith("data: "))
        .map((line) => line.slice(6))
        .join("\n"),
    )
    .filter((data) => data && data !== "[DONE]")
    .map((data) => JSON.parse(data));
}

/** The live UI's event stream on a connection of its own (so on some worker): the call numbers it announces. */
function watchCalls(url: string): { seqs: Set<number>; close(): void } {
  const seqs = new Set<number>();
  let buffer = "";
  const req = request(`${url}/api/events`, { agent: false }, (res) => {
    res.setEncoding("utf8");
    res.on("data", (chunk: string) => {
      buffer += chunk;
      for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = block.split("\n").find((line) => line.startsWith("data: "));
        if (block.startsWith("event: call") && data) seqs.add(JSON.parse(data.slice(6)).seq);
      }
    });
    res.on("error", () => {});
  });
  req.on("error", () => {});
  req.end();
  return { seqs, close: () => req.destroy() };
}

async function createRollout(url: string, id: string, group: string): Promise<void> {
  const res = await post(`${url}/api/rollouts`, { id, group });
  assert.equal(res.status, 201, res.text);
}

async function finish(url: string, id: string): Promise<void> {
  const res = await post(`${url}/api/rollouts/${id}/finish`, { reward: 1 });
  assert.equal(res.status, 200, res.text);
}

/** A tool-using agent that drops the reasoning from its history (history repair, or the token threads, restore it). */
async function agentRollout(url: string, id: string): Promise<number[]> {
  await createRollout(url, id, "agents");
  const messages: any[] = [
    { role: "system", content: "You are a coding agent." },
    { role: "user", content: `How many files are in directory ${id}?` },
  ];
  const seqs: number[] = [];
  for (let turn = 0; turn < TURNS; turn++) {
    const res = await post(`${url}/r/${id}/v1/chat/completions`, { model: "Qwen/Qwen3-8B", messages, tools: TOOLS });
    assert.equal(res.status, 200, res.text);
    seqs.push(res.seq);
    const message = JSON.parse(res.text).choices[0].message;
    messages.push({ role: "assistant", content: message.content ?? null, tool_calls: message.tool_calls });
    for (const call of message.tool_calls ?? [])
      messages.push({ role: "tool", tool_call_id: call.id, content: `${turn + 1} files` });
    if (!message.tool_calls?.length) messages.push({ role: "user", content: "And now?" });
  }
  await finish(url, id);
  return seqs;
}

/** A Responses conversation continued by previous_response_id, streamed every other turn. */
async function chainRollout(url: string, id: string): Promise<number[]> {
  await createRollout(url, id, "chains");
  const seqs: number[] = [];
  let previous: string | null = null;
  for (let turn = 0; turn < TURNS; turn++) {
    const stream = turn % 2 === 1;
    const res = await post(`${url}/r/${id}/v1/responses`, {
      model: "Qwen/Qwen3-8B",
      input: `Step ${turn} of ${id}: say something.`,
      previous_response_id: previous,
      stream,
    });
    assert.equal(res.status, 200, res.text);
    seqs.push(res.seq);
    const response = stream
      ? sseEvents(res.text).find((e) => e.type === "response.completed").response
      : JSON.parse(res.text);
    previous = response.id;
  }
  await finish(url, id);
  return seqs;
}

async function runScript(url: string): Promise<Map<string, number[]>> {
  const ids = [
    ...Array.from({ length: AGENT_ROLLOUTS }, (_, i) => `agent-${i}`),
    ...Array.from({ length: CHAIN_ROLLOUTS }, (_, i) => `chain-${i}`),
  ];
  const seqs = await Promise.all(ids.map((id) => (id.startsWith("agent") ? agentRollout : chainRollout)(url, id)));
  return new Map(ids.map((id, i) => [id, seqs[i]!]));
}

interface Collected {
  consumer: TrajectoryConsumer;
  byRollout: Map<string, RolloutMessage>;
}

function collect(address: string): Collected {
  const byRollout = new Map<string, RolloutMessage>();
  const consumer: TrajectoryConsumer = new TrajectoryConsumer({
    address,
    member: "test-core",
    onRollout(m) {
      byRollout.set(m.rolloutId, m);
      consumer.ack([m.cursor]);
    },
  });
  consumer.start();
  return { consumer, byRollout };
}

/** What a trainer gets of a rollout's trajectories: token ids, loss masks, logprobs, row offsets. */
function trained(m: RolloutMessage) {
  const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");
  const t = m.trajectories;
  return {
    rows: t.rows,
    offsets: hex(t.offsets),
    tokenIds: hex(t.tokenIds),
    lossMask: hex(t.lossMask),
    logprobs: hex(t.logprobs),
    flagged: m.flagged,
  };
}

async function spawnWorkers(
  workers: number,
  args: string[],
): Promise<{ proc: CliProcess; url: string; grpc: string; pids: number[] }> {
  const proc = spawnCli(["serve", "--workers", String(workers), "--port", "0", "--grpc-port", "0", ...args]);
  try {
    await proc.waitFor(/trajectories:\s+grpc:\/\/\S+/, 180_000); // the banner's last line; a loaded machine is slow
  } catch (error) {
    await proc.kill();
    throw error;
  }
  const out = proc.output();
  return {
    proc,
    url: out.match(/listening on (http:\/\/\S+)/)![1]!,
    grpc: out.match(/trajectories:\s+grpc:\/\/(\S+)/)![1]!,
    pids: out
      .match(/workers:\s+\d+ \(pids ([\d, ]+)\)/)![1]!
      .split(", ")
      .map(Number),
  };
}

describe("rlgate serve --workers", () => {
  let sim: SimServer;
  const dirs: string[] = [];
  before(async () => {
    sim = await startSim({ port: 0, maxModelLen: DEFAULT_SIM_MAX_MODEL_LEN });
  });
  after(async () => {
    await sim.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  for (const prompts of ["messages", "tokens"] as const) {
    test(
      `${prompts} prompts: calls hop between 2 workers and the trajectories equal one process's`,
      { timeout: 600_000 },
      async () => {
        const multiDir = tempDir(`workers-${prompts}`);
        const singleDir = tempDir(`single-${prompts}`);
        dirs.push(multiDir, singleDir);
        const multi = await spawnWorkers(2, ["--upstream", sim.url, "--prompts", prompts, "--data", multiDir]);
        let single: Gateway | null = null;
        const streams: Collected[] = [];
        const watchers: Array<{ close(): void }> = [];
        try {
          single = await startGateway({ upstream: sim.url, port: 0, grpcPort: 0, dataDir: singleDir, prompts });
          // Browsers on two connections (so on both workers, one each): each sees every worker's calls.
          const browsers = [watchCalls(multi.url), watchCalls(multi.url)];
          watchers.push(...browsers);
          // Relaying starts once the primary has heard of the browsers: probe calls until each saw both workers'.
          await until(
            async () => {
              await post(`${multi.url}/v1/chat/completions`, { messages: [{ role: "user", content: "probe" }] });
              return browsers.every((b) => new Set([...b.seqs].map((seq) => seq % 2)).size === 2) || undefined;
            },
            60_000,
            "both browsers seeing both workers' calls",
          );
          const [multiSeqs] = await Promise.all([runScript(multi.url), runScript(single.url)]);
          const allSeqs = [...multiSeqs.values()].flat();
          for (const [i, browser] of browsers.entries()) {
            await until(
              () => allSeqs.every((seq) => browser.seqs.has(seq)) || undefined,
              60_000,
              `every call on live UI stream ${i}`,
            );
          }

          // Call numbers are drawn per worker (≡ its slot mod 2): the records say which worker served each call.
          const hopped = [...multiSeqs.values()].filter((seqs) => new Set(seqs.map((s) => s % 2)).size === 2);
          assert.ok(
            hopped.length >= (AGENT_ROLLOUTS + CHAIN_ROLLOUTS) / 3,
            `calls of ${hopped.length} of ${multiSeqs.size} rollouts landed on both workers`,
          );
          for (const seqs of multiSeqs.values()) assert.equal(new Set(seqs).size, seqs.length, "call numbers collide");

          const fromMulti = collect(multi.grpc);
          const fromSingle = collect(single.grpc!.address);
          streams.push(fromMulti, fromSingle);
          const total = AGENT_ROLLOUTS + CHAIN_ROLLOUTS;
          await until(
            () => (fromMulti.byRollout.size >= total && fromSingle.byRollout.size >= total) || undefined,
            120_000,
            "every rollout from both trajectory streams",
          );
          for (const id of multiSeqs.keys()) {
            const got = trained(fromMulti.byRollout.get(id)!);
            assert.deepEqual(got, trained(fromSingle.byRollout.get(id)!), `rollout ${id}`);
            // Tokens mode: one agent thread, one trajectory (no call started a new thread because its worker had not
            // seen the call before it). Messages mode: the same re-rendering breaks as one process, no more.
            if (prompts === "tokens") assert.equal(got.rows, 1, `rollout ${id}: ${got.rows} trajectories`);
            assert.equal(got.flagged, false, `rollout ${id} flagged`);
          }

          // A finished rollout is refused by every worker.
          for (let i = 0; i < 4; i++) {
            const late = await post(`${multi.url}/r/agent-0/v1/chat/completions`, {
              model: "Qwen/Qwen3-8B",
              messages: [{ role: "user", content: "late" }],
            });
            assert.equal(late.status, 409, late.text);
          }
          const again = await post(`${multi.url}/api/rollouts/agent-1/finish`, { reward: 0 });
          assert.equal(again.status, 400, again.text);
        } finally {
          for (const s of streams) await s.consumer.close();
          for (const w of watchers) w.close();
          await single?.close();
          await multi.proc.kill("SIGTERM");
        }
      },
    );
  }

  test(
    "a worker SIGKILLed while connections arrive: every connection is answered or closed at once, none left hanging",
    { timeout: 300_000 },
    async () => {
      const dir = tempDir("workers-handoff");
      dirs.push(dir);
      const gw = await spawnWorkers(2, ["--upstream", "sim", "--data", dir]);
      // Each request on a connection of its own, so that connections are always being handed to workers.
      const started = new Map<number, number>();
      const hung: number[] = [];
      let answered = 0;
      let cut = 0;
      let stop = false;
      let next = 0;
      const loop = async () => {
        while (!stop) {
          const id = next++;
          started.set(id, Date.now());
          try {
            await getOnce(`${gw.url}/healthz`);
            answered++;
          } catch {
            cut++; // the connection the killed worker held was closed: the client knows at once
          }
          started.delete(id);
        }
      };
      const clients = Array.from({ length: 8 }, loop);
      try {
        await until(() => answered >= 200 || undefined, 120_000, "requests before the kill");
        process.kill(gw.pids[0]!, "SIGKILL");
        await gw.proc.waitFor(new RegExp(`worker 0 \\(pid ${gw.pids[0]}\\) exited \\(SIGKILL\\)`));
        const atKill = answered;
        await until(() => answered >= atKill + 200 || undefined, 120_000, "requests after the kill");
        stop = true;
        const settled = await Promise.race([
          Promise.all(clients).then(() => true),
          new Promise<false>((resolve) => setTimeout(() => resolve(false), 15_000)),
        ]);
        for (const [id, at] of started) if (Date.now() - at > 10_000) hung.push(id);
        assert.ok(settled, `requests unanswered 15 s after the load stopped: ${started.size} (${cut} cut)`);
        assert.deepEqual(hung, []);

        // A kept-alive connection (fetch keeps its connections) does not hold the shutdown up.
        assert.equal((await fetch(`${gw.url}/healthz`)).status, 200);
        const exited = await Promise.race([
          gw.proc.kill("SIGTERM").then(() => true),
          new Promise<false>((resolve) => setTimeout(() => resolve(false), 30_000)),
        ]);
        assert.ok(exited, "the primary did not exit within 30 s of SIGTERM");
        assert.equal(gw.proc.child.exitCode, 0, gw.proc.output());
      } finally {
        stop = true;
        await gw.proc.kill("SIGKILL");
      }
    },
  );

  test(
    "a worker SIGKILLed under load: nothing acknowledged lost, a new worker starts, the stream keeps delivering",
    { timeout: 600_000 },
    async () => {
      const dir = tempDir("workers-kill");
      dirs.push(dir);
      const gw = await spawnWorkers(2, ["--upstream", "sim", "--data", dir]);
      const stream = collect(gw.grpc);
      const ack = newAcknowledged();
      let stop = false;
      try {
        const clients = Array.from({ length: 6 }, (_, i) =>
          client(
            () => gw.url,
            i,
            ack,
            () => stop,
            3,
          ),
        );
        await until(() => (ack.calls.size >= 40 && ack.finishes.size >= 3) || undefined, 300_000, "load");
        process.kill(gw.pids[0]!, "SIGKILL");
        await gw.proc.waitFor(new RegExp(`worker 0 \\(pid ${gw.pids[0]}\\) exited \\(SIGKILL\\); starting a new one`));
        await gw.proc.waitFor(/gateway worker 0 \(pid \d+\) listens again/, 180_000);
        const atRestart = ack.calls.size;
        await until(() => ack.calls.size >= atRestart + 30 || undefined, 300_000, "load after the restart");
        stop = true;
        await Promise.all(clients);

        const verified = await verify(gw.url, ack);
        if (verified.lostCalls.length + verified.unlisted.length > 0) {
          dirs.splice(dirs.indexOf(dir), 1); // kept for a look at what the store holds
          console.log(`the store is kept at ${dir}; the gateway's output:\n${gw.proc.output().slice(-6000)}`);
        }
        assert.deepEqual(verified.lostCalls, [], "completed calls missing after a worker's SIGKILL");
        assert.deepEqual(verified.unlisted, [], "rollouts whose calls could not be read back");
        assert.deepEqual(verified.brokenCalls, [], "completed calls stored without their tokens");
        assert.deepEqual(verified.lostFinishes, [], "acknowledged finishes lost");
        await until(
          () => [...ack.finishes].every((id) => stream.byRollout.has(id)) || undefined,
          120_000,
          "every acknowledged finish on the trajectory stream",
        );
        const metrics = await (await fetch(`${gw.url}/metrics`)).text();
        assert.match(metrics, /^rlgate_worker_restarts_total 1$/m);
        assert.match(metrics, /^rlgate_workers 2$/m);
      } finally {
        stop = true;
        await stream.consumer.close();
        await gw.proc.kill("SIGTERM");
      }
      assert.equal(gw.proc.child.exitCode, 0, gw.proc.output());
    },
  );
});
