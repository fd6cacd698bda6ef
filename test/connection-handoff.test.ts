// The primary's connection handoff of `rlgate serve --workers N` (gateway/cluster/connection-handoff.ts) with real
// forked workers (test/fixtures/handoff-worker.mjs): connections go round the workers; one a closing worker declines
// goes to another; one a stalled worker never confirms, or that no worker is there to take, is closed so its client
// knows; and every worker SIGKILLed over and over while clients connect leaves the primary serving and no client
// hanging (a closed channel whose exit was not yet seen once made the primary hand a connection to the dead worker
// forever).
import assert from "node:assert/strict";
import cluster, { type Worker } from "node:cluster";
import { connect } from "node:net";
import { after, test } from "node:test";
import { ConnectionHandoff } from "../gateway/cluster/connection-handoff.ts";

cluster.setupPrimary({ exec: new URL("./fixtures/handoff-worker.mjs", import.meta.url).pathname, silent: true });

interface Harness {
  handoff: ConnectionHandoff;
  port: number;
  fork(mode: "serve" | "decline" | "stall"): Promise<Worker>;
  close(): void;
}

const opened: Harness[] = [];
after(() => {
  for (const harness of opened) harness.close();
});

async function harness(options: { confirmMs?: number; waitMs?: number } = {}): Promise<Harness> {
  const handoff = new ConnectionHandoff({ log: () => {}, ...options });
  const port = await handoff.listen(0, "127.0.0.1");
  const workers = new Set<Worker>();
  const onExit = (worker: Worker) => {
    if (workers.delete(worker)) handoff.remove(worker);
  };
  cluster.on("exit", onExit);
  const h: Harness = {
    handoff,
    port,
    fork(mode) {
      const worker = cluster.fork({ MODE: mode, NODE_TEST_CONTEXT: "" });
      workers.add(worker);
      worker.on("message", (message: { type?: string; id?: number } | string) => {
        if (typeof message === "string") return;
        if (message.type === "rlgate:took") handoff.took(worker, message.id!);
        if (message.type === "rlgate:declined") handoff.declined(worker, message.id!);
      });
      return new Promise((resolve) =>
        worker.on("message", (message: unknown) => {
          if (message !== "ready") return;
          handoff.add(worker);
          resolve(worker);
        }),
      );
    },
    close() {
      cluster.off("exit", onExit);
      handoff.close();
      for (const worker of workers) worker.process.kill("SIGKILL");
    },
  };
  opened.push(h);
  return h;
}

/** One connection: sends a byte, resolves with what came back before the connection closed ("" when nothing). */
function exchange(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    let text = "";
    socket.on("connect", () => socket.write("x"));
    socket.on("data", (chunk: Buffer) => (text += chunk.toString()));
    socket.on("error", () => {});
    socket.on("close", () => resolve(text));
  });
}

test(
  "connections go round the workers, each answered by the worker that confirmed it",
  { timeout: 60_000 },
  async () => {
    const h = await harness();
    const workers = await Promise.all([h.fork("serve"), h.fork("serve")]);
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push(await exchange(h.port));
    const pids = workers.map((w) => String(w.process.pid));
    assert.deepEqual(new Set(answers), new Set(pids));
    h.close();
  },
);

test("a connection a closing worker declines is handed to another worker, unread", { timeout: 60_000 }, async () => {
  const h = await harness();
  const declining = await h.fork("decline");
  const serving = await h.fork("serve");
  const answers = await Promise.all(Array.from({ length: 6 }, () => exchange(h.port)));
  assert.deepEqual(answers, Array(6).fill(String(serving.process.pid)));
  assert.ok(!declining.isDead());
  h.close();
});

test(
  "a connection a stalled worker never confirms is ended for its client; that worker gets no more",
  { timeout: 60_000 },
  async () => {
    const h = await harness({ confirmMs: 200, waitMs: 200 });
    await h.fork("stall");
    assert.equal(await exchange(h.port), ""); // ended by the primary although the worker holds a copy
    assert.equal(await exchange(h.port), ""); // not handed to the stalled worker: closed after waiting
    h.close();
  },
);

test("a connection no worker is there to take is closed after waiting", { timeout: 60_000 }, async () => {
  const h = await harness({ waitMs: 200 });
  assert.equal(await exchange(h.port), "");
  h.close();
});

test(
  "every worker SIGKILLed over and over while clients connect: the primary goes on, every client settles",
  { timeout: 60_000 },
  async () => {
    const h = await harness({ waitMs: 2_000, confirmMs: 2_000 });
    const workers = new Set<Worker>();
    const start = () => void h.fork("serve").then((w) => workers.add(w));
    start();
    start();
    const restart = (worker: Worker) => {
      if (workers.delete(worker) && !stop) start();
    };
    cluster.on("exit", restart);
    let stop = false;
    let answered = 0;
    let cut = 0;
    const client = async () => {
      while (!stop) {
        if ((await exchange(h.port)) === "") cut++;
        else answered++;
      }
    };
    const clients = Array.from({ length: 16 }, client);
    for (let round = 0; round < 8; round++) {
      await new Promise((resolve) => setTimeout(resolve, 300));
      for (const worker of workers) worker.process.kill("SIGKILL");
    }
    const atLastKill = answered;
    // A primary spinning on a dead worker's channel would never get here: its timers would not run.
    while (answered < atLastKill + 50) await new Promise((resolve) => setTimeout(resolve, 50));
    stop = true;
    await Promise.all(clients); // each ends: answered, or closed by a kill or a deadline
    cluster.off("exit", restart);
    h.close();
    assert.ok(cut > 0, "no connection was cut: the kills did not land while connections were handed");
  },
);
