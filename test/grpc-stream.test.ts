// The gateway's trajectory stream: consumer groups (a rollout to one member, an RL group to one member), leases
// re-delivered when a member leaves or goes silent and stays away past the member timeout, resuming from the
// committed cursor after a gateway restart, the token, and the message size limit.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, describe, test } from "node:test";
import { Worker } from "node:worker_threads";
import { credentials, Metadata, type ClientDuplexStream } from "@grpc/grpc-js";
import { TrajectoryConsumer } from "../clients/ts/index.ts";
import type { Gateway } from "../gateway/index.ts";
import {
  channelOptions,
  TrajectoryStreamClient,
  type RolloutMessage,
  type StreamMessage,
  type SubscribeMessage,
} from "../protocol/index.ts";
import { putSyntheticRollout, startGrpcGateway } from "./grpc-helpers.ts";
import { tempDir, until } from "./helpers.ts";

interface Member {
  consumer: TrajectoryConsumer;
  received: RolloutMessage[];
}

/** A member that acks a group once it holds all `size` of its rollouts (as an RL core does); `hold` never acks. */
function member(
  gateway: Gateway,
  name: string,
  options: { size?: number; hold?: boolean; token?: string } = {},
): Member {
  const received: RolloutMessage[] = [];
  const byGroup = new Map<string, RolloutMessage[]>();
  const consumer: TrajectoryConsumer = new TrajectoryConsumer({
    address: gateway.grpc!.address,
    consumerGroup: "cores",
    member: name,
    token: options.token,
    leaseTimeoutMs: 3000,
    onRollout(m) {
      received.push(m);
      if (options.hold) return;
      const list = [...(byGroup.get(m.group) ?? []), m];
      byGroup.set(m.group, list);
      if (list.length >= (options.size ?? 1)) consumer.ack(list.map((x) => x.cursor));
    },
  });
  consumer.start();
  closers.push(() => consumer.close());
  return { consumer, received };
}

const closers: Array<() => Promise<void>> = [];
after(async () => {
  for (const close of closers.reverse()) await close();
});

async function gateway(
  dataDir = tempDir("grpc-gw"),
  extra: Parameters<typeof startGrpcGateway>[0] = {},
): Promise<Gateway> {
  const gw = await startGrpcGateway({ dataDir, ...extra });
  let closed = false;
  closers.push(async () => {
    if (!closed) await gw.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const close = gw.close.bind(gw);
  gw.close = async () => {
    closed = true;
    await close();
  };
  return gw;
}

describe("trajectory stream", () => {
  test("a consumer group: every rollout to one member, a group's rollouts together, a leaver's leases re-delivered", async () => {
    const gw = await gateway(undefined, { grpcMemberTimeoutMs: 300 });
    const store = gw.context.store;
    const a = member(gw, "a", { size: 3 });
    const b = member(gw, "b", { size: 3 });
    await until(() => (a.consumer.connected && b.consumer.connected ? true : undefined), 10_000, "members");
    for (let k = 0; k < 3; k++) {
      for (let g = 0; g < 6; g++) await putSyntheticRollout(store, { id: `g${g}-r${k}`, group: `g${g}`, reward: k });
    }
    await until(() => (a.received.length + b.received.length >= 18 ? true : undefined), 10_000, "18 rollouts");
    const ids = [...a.received, ...b.received].map((m) => m.rolloutId).sort();
    assert.equal(new Set(ids).size, 18, "each rollout delivered once");
    for (const m of [a, b]) {
      const groups = new Set(m.received.map((r) => r.group));
      for (const g of groups)
        assert.equal(m.received.filter((r) => r.group === g).length, 3, `group ${g} whole at one member`);
    }
    const rollout = a.received[0] ?? b.received[0]!;
    assert.equal(rollout.trajectories.rows, 1);
    assert.equal(rollout.trajectoryIds.length, 1);
    assert.equal(rollout.trajectories.tokenIds.byteLength, (32 + 16 + 8 + 16) * 4);

    // A member that holds a group and leaves (and is not back within the member timeout): the group goes whole to the
    // other member.
    await a.consumer.close();
    const holder = member(gw, "holder", { hold: true });
    await until(() => (holder.consumer.connected ? true : undefined), 10_000, "holder");
    for (let k = 0; k < 3; k++) await putSyntheticRollout(store, { id: `late-r${k}`, group: "late", reward: k });
    const late = () => [...holder.received, ...b.received].filter((r) => r.group === "late").length;
    await until(() => (late() >= 3 ? true : undefined), 10_000, "late group delivered");
    await new Promise((r) => setTimeout(r, 300));
    const heldBy = holder.received.length === 3 ? holder : b;
    assert.equal(heldBy.received.filter((r) => r.group === "late").length, 3);
    if (heldBy === holder) {
      assert.equal(
        b.received.filter((r) => r.group === "late").length,
        0,
        "a held group is not handed to another member",
      );
      await holder.consumer.close();
      await until(
        () => (b.received.filter((r) => r.group === "late").length === 3 ? true : undefined),
        10_000,
        "re-delivery",
      );
    }
    const lastCursor = store.finishedAfter(0, 1000).at(-1)!.cursor;
    await until(
      () => (gw.grpc!.stream.group("cores").committed === lastCursor ? true : undefined),
      10_000,
      "committed cursor",
    );
    assert.equal(gw.grpc!.stream.group("cores").leased, 0);
    await b.consumer.close();
  });

  test("a member silent past its lease timeout is dropped and its rollouts go to another member", async () => {
    const gw = await gateway(undefined, { grpcMemberTimeoutMs: 300 });
    await putSyntheticRollout(gw.context.store, { id: "quiet-1", group: "q", reward: 1 });
    // A raw subscriber that never heartbeats nor acks.
    const client = new TrajectoryStreamClient(gw.grpc!.address, credentials.createInsecure(), channelOptions());
    const call = (
      client as unknown as { subscribe(m: Metadata): ClientDuplexStream<SubscribeMessage, StreamMessage> }
    ).subscribe(new Metadata());
    const got: StreamMessage[] = [];
    const ended = new Promise<{ code: number }>((resolve) => {
      call.on("data", (m: StreamMessage) => got.push(m));
      call.on("error", (e: { code: number }) => resolve(e));
      call.on("end", () => resolve({ code: 0 }));
    });
    call.write({ subscribe: { consumerGroup: "cores", member: "quiet", maxInFlight: 8, leaseTimeoutMs: 600 } });
    const status = await ended;
    assert.equal(status.code, 4, "DEADLINE_EXCEEDED"); // grpc status 4
    assert.ok(got.some((m) => m.kind === "rollout"));
    client.close();
    const other = member(gw, "other");
    await until(() => (other.received.length === 1 ? true : undefined), 10_000, "re-delivery after the lease timeout");
    assert.equal(other.received[0]!.rolloutId, "quiet-1");
    await other.consumer.close();
  });

  test("after a gateway restart, acked rollouts stay acked and the rest are delivered again", async () => {
    const dataDir = tempDir("grpc-gw-restart");
    let gw = await gateway(dataDir);
    for (let i = 0; i < 5; i++) await putSyntheticRollout(gw.context.store, { id: `r${i}`, reward: i });
    const seen: string[] = [];
    const c1: TrajectoryConsumer = new TrajectoryConsumer({
      address: gw.grpc!.address,
      onRollout(m) {
        seen.push(m.rolloutId);
        if (seen.length <= 3) c1.ack([m.cursor]);
      },
    });
    c1.start();
    await until(() => (seen.length === 5 ? true : undefined), 10_000, "5 rollouts");
    await c1.close();
    await gw.close();
    gw = await gateway(dataDir);
    const again: string[] = [];
    const c2 = new TrajectoryConsumer({ address: gw.grpc!.address, onRollout: (m) => void again.push(m.rolloutId) });
    c2.start();
    await until(() => (again.length === 2 ? true : undefined), 10_000, "2 rollouts");
    await new Promise((r) => setTimeout(r, 200));
    assert.deepEqual(again, ["r3", "r4"]);
    await c2.close();
  });

  test("with a control token the stream needs it; a rollout above the message limit arrives flagged, without tokens", async () => {
    const gw = await gateway(undefined, { controlToken: "s3cret", grpcMaxMessageBytes: 8192 });
    await putSyntheticRollout(gw.context.store, { id: "big", reward: 1, promptTokens: 2000 });
    await putSyntheticRollout(gw.context.store, { id: "small", reward: 1 });
    const states: string[] = [];
    const denied = new TrajectoryConsumer({
      address: gw.grpc!.address,
      onRollout: () => assert.fail("no rollout without the token"),
      onConnection: (_, detail) => void states.push(detail),
    });
    denied.start();
    await until(() => (states.length > 0 ? true : undefined), 10_000, "refusal");
    assert.match(states[0]!, /UNAUTHENTICATED/);
    await denied.close();
    const got: RolloutMessage[] = [];
    const allowed = new TrajectoryConsumer({
      address: gw.grpc!.address,
      token: "s3cret",
      onRollout: (m) => void got.push(m),
    });
    allowed.start();
    await until(() => (got.length === 2 ? true : undefined), 10_000, "2 rollouts");
    assert.equal(got[0]!.oversize, true);
    assert.equal(got[0]!.flagged, true);
    assert.equal(got[0]!.trajectories.tokenIds.byteLength, 0);
    assert.match(got[0]!.flagReasons.join(" "), /exceed 8192 bytes/);
    assert.equal(got[1]!.oversize, false);
    assert.ok(got[1]!.trajectories.tokenIds.byteLength > 0);
    await allowed.close();
  });

  test("a trajectory worker that dies while building a rollout costs a retry or a reconnect, never a flagged rollout", async () => {
    // Stands in for the worker dying (out of memory, a native crash) right after it was asked for a rollout.
    let crashes = 3;
    const post = Worker.prototype.postMessage;
    Worker.prototype.postMessage = function (
      this: Worker,
      message: unknown,
      transfer?: Parameters<Worker["postMessage"]>[1],
    ) {
      if ((message as { kind?: string }).kind === "message" && crashes > 0) {
        crashes--;
        void this.terminate(); // before it can answer
      }
      return post.call(this, message, transfer);
    };
    closers.push(async () => void (Worker.prototype.postMessage = post));
    const gw = await gateway();
    const states: string[] = [];
    const got: RolloutMessage[] = [];
    const consumer = new TrajectoryConsumer({
      address: gw.grpc!.address,
      member: "m",
      onRollout: (m) => void (got.push(m), consumer.ack([m.cursor])),
      onConnection: (_, detail) => void states.push(detail),
    });
    consumer.start();
    closers.push(() => consumer.close());
    await putSyntheticRollout(gw.context.store, { id: "r1", reward: 1 });
    await until(() => (got.length === 1 ? true : undefined), 15_000, "r1 delivered after the crashes");
    assert.equal(crashes, 0);
    assert.equal(got[0]!.rolloutId, "r1");
    assert.equal(got[0]!.flagged, false, got[0]!.flagReasons.join("; "));
    assert.ok(got[0]!.trajectories.tokenIds.byteLength > 0);
    // Two crashes in a row ended the session (UNAVAILABLE); the member came back and got the rollout whole.
    assert.ok(
      states.some((d) => /UNAVAILABLE/.test(d)),
      states.join(" | "),
    );
  });
});
