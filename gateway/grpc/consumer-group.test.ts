// A consumer group's state across restarts: leases, acks above the committed cursor and RL-group affinities are
// persisted; a restarted group (same store) keeps a member's rollouts and groups for that member until it is back
// or absent past the member timeout; fully acked groups stay with their member for late rollouts; what is
// persisted is pruned as the committed cursor advances. Time is a manual clock (member timeouts) and mocked Date
// (the finished log's cursor stamps): nothing here sleeps.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, describe, test } from "node:test";
import { Store } from "../../store/store.ts";
import { putSyntheticRollout } from "../../test/grpc-helpers.ts";
import { tempDir } from "../../test/helpers.ts";
import { manualClock } from "../../util/clock.ts";
import { ConsumerGroup, type ConsumerGroupOptions, type Session } from "./consumer-group.ts";

const dirs: string[] = [];
const stores: Store[] = [];
const groups: ConsumerGroup[] = [];
after(async () => {
  for (const g of groups) await g.close().catch(() => {}); // before their stores: no write is left for a closed store
  for (const s of stores) await s.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function store(): Store {
  const dir = tempDir("cg-unit");
  dirs.push(dir);
  const s = new Store({ path: dir });
  stores.push(s);
  return s;
}

function open(name: string, s: Store, options: ConsumerGroupOptions = {}): ConsumerGroup {
  const group = new ConsumerGroup(name, s, options);
  groups.push(group);
  return group;
}

let sessions = 0;
function session(member: string, options: { named?: boolean; maxInFlight?: number } = {}): Session {
  const named = options.named ?? true;
  return {
    id: `s${++sessions}`,
    member,
    named,
    maxInFlight: options.maxInFlight ?? 100,
    inFlight: 0,
    scanPos: 0,
    epoch: 0,
    wake() {},
  };
}

/** Everything the session is given now, by rollout id. */
function drain(group: ConsumerGroup, s: Session): string[] {
  const out: string[] = [];
  for (let lease = group.next(s); lease; lease = group.next(s)) out.push(lease.rollout.id);
  return out;
}

/** As the stream delivers: the leases are written before the rollouts are sent. */
async function deliver(group: ConsumerGroup, s: Session): Promise<string[]> {
  const ids = drain(group, s);
  await group.durable();
  return ids;
}

async function finished(s: Store, specs: Array<[id: string, group: string]>): Promise<Map<string, number>> {
  const cursors = new Map<string, number>();
  for (const [id, group] of specs) cursors.set(id, await putSyntheticRollout(s, { id, group, reward: 1 }));
  return cursors;
}

describe("consumer group state across restarts", () => {
  test("leases and acks survive the group's re-creation on the same store; a member back gets its own again", async () => {
    const s = store();
    let group = open("cores", s);
    const a = session("a");
    const b = session("b");
    group.join(a);
    const c = await finished(s, [
      ["a1", "g1"],
      ["a2", "g1"],
    ]);
    assert.deepEqual(await deliver(group, a), ["a1", "a2"]);
    group.join(b);
    for (const [id, cursor] of await finished(s, [
      ["b1", "g2"],
      ["c1", "g3"],
    ]))
      c.set(id, cursor);
    assert.deepEqual(await deliver(group, b), ["b1", "c1"]);
    group.ack([c.get("c1")!]); // above the committed cursor (a1 is not acked)
    await group.persist();

    group = open("cores", s); // the gateway restarted
    assert.deepEqual(
      {
        leased: group.status().leased,
        ackedAhead: group.status().ackedAhead,
        absent: group.status().absent.map((m) => [m.member, m.leases]),
      },
      {
        leased: 3,
        ackedAhead: 1,
        absent: [
          ["a", 2],
          ["b", 1],
        ],
      },
    );
    const b2 = session("b");
    assert.deepEqual(group.join(b2, { held: [c.get("b1")!] }), []);
    assert.deepEqual(drain(group, b2), [], "a's rollouts wait for a; c1 stays acked");
    for (const [id, cursor] of await finished(s, [
      ["n1", "g5"],
      ["a3", "g1"],
    ]))
      c.set(id, cursor);
    assert.deepEqual(drain(group, b2), ["n1"], "a new group goes to whoever asks; a's group waits for a");
    const a2 = session("a");
    assert.deepEqual(group.join(a2, { held: [c.get("a1")!] }), []);
    assert.deepEqual(
      drain(group, a2),
      ["a2", "a3"],
      "a2 (not claimed) is sent to a again, with its group's new rollout",
    );
    assert.equal(a2.inFlight, 3);
    group.ack([c.get("a1")!, c.get("a2")!, c.get("b1")!]);
    assert.equal(group.committed, c.get("c1")!, "the persisted ack of c1 counted");
  });

  test("a member back after the old 5 s rejoin grace still gets its rollouts, trained ones included; no other member gets them", async () => {
    const clock = manualClock();
    const s = store();
    const first = open("cores", s, { clock: clock.now });
    const a = session("a");
    first.join(a);
    const c = await finished(s, [
      ["y1", "g0"],
      ["y2", "g0"],
      ["x1", "g1"],
      ["x2", "g1"],
    ]);
    assert.deepEqual(await deliver(first, a), ["y1", "y2", "x1", "x2"]);
    for (const [id, cursor] of await finished(s, [
      ["x3", "g1"],
      ["o1", "g9"],
    ]))
      c.set(id, cursor);
    // a trained g0 and acked it, but the gateway died before writing the acks (and a restarted, forgetting them).
    first.ack([c.get("y1")!, c.get("y2")!]);

    const group = open("cores", s, { memberTimeoutMs: 60_000, clock: clock.now });
    const b = session("b");
    group.join(b);
    assert.deepEqual(drain(group, b), ["o1"]);
    clock.advance(6_000);
    assert.deepEqual(drain(group, b), [], "6 s later: a's rollouts and its group's new one still wait for a");
    const back = session("a");
    assert.deepEqual(group.join(back, { held: [c.get("x1")!, c.get("x2")!] }), []);
    assert.deepEqual(drain(group, back), ["y1", "y2", "x3"], "sent again to a, which skips and acks what it trained");
    assert.deepEqual(drain(group, b), []);
  });

  test("a member absent past the member timeout: its rollouts and groups go to other members, logged", async () => {
    const s = store();
    const lines: string[] = [];
    const clock = manualClock();
    const first = open("cores", s, { memberTimeoutMs: 200, clock: clock.now });
    const a = session("a");
    first.join(a);
    const c = await finished(s, [
      ["z1", "g7"],
      ["z2", "g7"],
    ]);
    assert.deepEqual(await deliver(first, a), ["z1", "z2"]);

    const group = open("cores", s, { memberTimeoutMs: 200, clock: clock.now, log: (line) => lines.push(line) });
    const b = session("b");
    group.join(b);
    assert.deepEqual(drain(group, b), []);
    clock.advance(199);
    assert.deepEqual(drain(group, b), [], "1 ms before the timeout: still a's");
    clock.advance(51);
    assert.deepEqual(drain(group, b), ["z1", "z2"]);
    assert.equal(lines.length, 1);
    assert.match(
      lines[0]!,
      /member a absent for 0 s: its 2 rollouts go to other members \(at least once.*its 1 groups are released/,
    );
    const late = session("a");
    assert.deepEqual(
      group.join(late, { held: [c.get("z1")!] }),
      [c.get("z1")!],
      "too late: rejected, the member drops it",
    );

    // A session that ends with the gateway up: the same wait, then the same hand-over (of a rollout without a group,
    // held back by its lease alone).
    await finished(s, [["w1", ""]]);
    assert.deepEqual(drain(group, late), ["w1"]);
    group.leave(late);
    assert.deepEqual(drain(group, b), []);
    clock.advance(250);
    assert.deepEqual(drain(group, b), ["w1"]);
  });

  test("a late rollout of a group whose rollouts were all acked goes to the member that had the group, across a restart too", async () => {
    const s = store();
    let group = open("cores", s);
    const a = session("a");
    const b = session("b");
    group.join(a);
    group.join(b);
    const c = await finished(s, [
      ["l1", "gL"],
      ["l2", "gL"],
    ]);
    assert.deepEqual(await deliver(group, a), ["l1", "l2"]);
    group.ack([c.get("l1")!, c.get("l2")!]); // a trained the group (e.g. at its timeout)
    assert.equal(group.committed, c.get("l2")!);
    await finished(s, [["l3", "gL"]]);
    assert.deepEqual(drain(group, b), []);
    assert.deepEqual(await deliver(group, a), ["l3"], "a acks it as late");
    group.ack([group.committed + 1]); // not in the log: ignored
    await group.persist();

    group = open("cores", s);
    const b2 = session("b");
    group.join(b2);
    await finished(s, [["l4", "gL"]]);
    assert.deepEqual(drain(group, b2), []);
    const a2 = session("a");
    group.join(a2);
    assert.deepEqual(drain(group, a2), ["l3", "l4"]);
  });

  test("what is persisted is pruned as the committed cursor advances; acked groups after their retention", async (t) => {
    t.mock.timers.enable({ apis: ["Date"], now: Date.now() });
    const s = store();
    const group = open("cores", s, { groupRetentionMs: 50 });
    const a = session("a");
    group.join(a);
    const c = await finished(s, [
      ["p1", "gP"],
      ["p2", "gP"],
      ["q1", "gQ"],
    ]);
    assert.deepEqual(await deliver(group, a), ["p1", "p2", "q1"]);
    group.ack([c.get("p1")!, c.get("q1")!]);
    await group.persist();
    let state = s.getConsumerState("cores");
    assert.deepEqual([...state.leases], [[c.get("p2")!, "a"]]);
    assert.deepEqual(state.acked, [c.get("q1")!]);
    assert.deepEqual([...state.affinity.keys()].sort(), ["group:gP", "group:gQ"]);
    assert.equal(s.getCursor("cores"), c.get("p1")!);

    group.ack([c.get("p2")!]);
    await group.persist();
    state = s.getConsumerState("cores");
    assert.deepEqual(
      [state.leases.size, state.acked.length, state.affinity.size],
      [0, 0, 2],
      "groups kept for late rollouts",
    );
    assert.equal(s.getCursor("cores"), c.get("q1")!);
    assert.equal(group.persisted, c.get("q1")!);

    t.mock.timers.tick(60); // the next finished rollout's cursor is 60 ms of log time later
    const r = await finished(s, [["r1", ""]]);
    assert.deepEqual(await deliver(group, a), ["r1"]);
    group.ack([r.get("r1")!]);
    await group.persist();
    state = s.getConsumerState("cores");
    assert.deepEqual(
      [state.leases.size, state.acked.length, state.affinity.size],
      [0, 0, 0],
      "the committed cursor passed the retention",
    );
    assert.equal(group.status().groups, 0);
  });

  test("an unnamed member's leases last as long as its session and are not persisted", async () => {
    const s = store();
    let group = open("cores", s);
    const anon = session("ipv4:127.0.0.1:5000", { named: false });
    group.join(anon);
    await finished(s, [
      ["u1", "gU"],
      ["u2", "gU"],
    ]);
    assert.deepEqual(await deliver(group, anon), ["u1", "u2"]);
    await group.persist();
    assert.equal(s.getConsumerState("cores").leases.size, 0);
    group.leave(anon);
    const b = session("b");
    group.join(b);
    assert.deepEqual(drain(group, b), ["u1", "u2"], "released when its session ended");
    await group.durable();

    group = open("cores", s);
    assert.deepEqual(
      group.status().absent.map((m) => [m.member, m.leases]),
      [["b", 2]],
      "b's leases, unlike the unnamed member's, were persisted",
    );
  });

  test("claims: acked, not in the log, or another member's are rejected; an unleased one becomes the member's", async () => {
    const s = store();
    const group = open("cores", s);
    const c = await finished(s, [
      ["r1", ""],
      ["r2", ""],
      ["k1", "gK"],
      ["k2", "gK"],
    ]);
    const a = session("a");
    // Finish cursors are microsecond stamps that can be consecutive (r2 + 1 may be k1's): one below the first is in no log.
    const absent = c.get("r1")! - 1;
    assert.deepEqual(group.join(a, { held: [absent, c.get("k1")!] }), [absent], "not in the log");
    assert.deepEqual(drain(group, a), ["r1", "r2", "k2"]);
    group.ack([c.get("r1")!]);
    const b = session("b");
    assert.deepEqual(group.join(b, { held: [c.get("r1")!, c.get("r2")!, c.get("k2")!] }), [
      c.get("r1")!,
      c.get("r2")!,
      c.get("k2")!,
    ]);
    // Another session of the same member (it reconnected before the gateway noticed the old one ended) takes them over.
    const a2 = session("a");
    assert.deepEqual(group.join(a2, { held: [c.get("r2")!, c.get("k1")!] }), []);
    assert.deepEqual([a.inFlight, a2.inFlight], [1, 2]);
    group.leave(a);
    assert.deepEqual(drain(group, a2), ["k2"], "what the old session had and the member did not claim is sent again");
  });
});

describe("consumer group bound", () => {
  test("at the bound, a waiting lease is still sent to its member, and the rollout the cursor waits for is still leased", async () => {
    const s = store();
    const cursors = await finished(
      s,
      Array.from({ length: 10 }, (_, i) => [`r${i}`, ""] as [string, string]),
    );
    const clock = manualClock();
    const group = open("cores", s, { maxOutstanding: 10, memberTimeoutMs: 50, clock: clock.now });
    const a1 = session("a", { maxInFlight: 1 });
    group.join(a1);
    assert.deepEqual(await deliver(group, a1), ["r0"]);
    const b = session("b", { maxInFlight: 100 });
    group.join(b);
    const toB = await deliver(group, b);
    assert.equal(toB.length, 9);
    group.ack(toB.map((id) => cursors.get(id)!));
    // Full (1 lease + 9 acks). a's session ends before r0 reached it and a comes straight back, holding nothing.
    group.leave(a1);
    const a2 = session("a", { maxInFlight: 1 });
    assert.deepEqual(group.join(a2, { held: [] }), []);
    assert.deepEqual(drain(group, a2), ["r0"], "the waiting lease is sent again at the bound");
    // a leaves again and stays away past its timeout: r0 is released, and b may lease it although the group is full.
    group.leave(a2);
    clock.advance(80);
    assert.deepEqual(await deliver(group, b), ["r0"]);
    group.ack([cursors.get("r0")!]);
    assert.equal(group.committed, cursors.get("r9"));
  });
});

describe("consumer group bound on kept groups", () => {
  test("fully acked groups kept for late rollouts are bounded by maxOutstanding plus maxRetainedGroups (not the default bound)", async () => {
    const s = store();
    const cursors = await finished(
      s,
      Array.from({ length: 12 }, (_, i) => [`g${i}r`, `g${i}`] as [string, string]),
    );
    const group = open("cores", s, { maxOutstanding: 2, maxRetainedGroups: 3 });
    const a = session("a", { maxInFlight: 1 });
    group.join(a);
    for (let i = 0; i < 12; i++) {
      assert.deepEqual(drain(group, a), [`g${i}r`]);
      group.ack([cursors.get(`g${i}r`)!]);
    }
    // Each lease of a new group checks the bound: past 2 + 3 groups, the oldest fully acked ones are forgotten.
    assert.equal(group.status().groups, 5);
    await group.persist();
    assert.deepEqual([...s.getConsumerState("cores").affinity.keys()].sort(), [
      "group:g10",
      "group:g11",
      "group:g7",
      "group:g8",
      "group:g9",
    ]);
  });
});

describe("consumer state persister", () => {
  test("a failed write is reported by durable(), its changes go into the next write, and the group still works", async () => {
    const s = store();
    let failures = 1;
    const real = s.writeConsumerState.bind(s);
    s.writeConsumerState = (consumer, changes) =>
      failures-- > 0 ? Promise.reject(new Error("disk full")) : real(consumer, changes);
    const group = open("cores", s);
    const a = session("a");
    group.join(a);
    const c = await finished(s, [["f1", "gF"]]);
    assert.deepEqual(drain(group, a), ["f1"]);
    await assert.rejects(group.durable(), /disk full/);
    await group.durable(); // the lease written on the second try
    assert.deepEqual([...s.getConsumerState("cores").leases], [[c.get("f1")!, "a"]]);
    group.ack([c.get("f1")!]);
    await group.close();
    assert.equal(s.getCursor("cores"), c.get("f1")!);
    assert.equal(group.persisted, c.get("f1")!);
    await assert.rejects(
      (async () => {
        group.join(session("b"));
        await finished(s, [["f2", ""]]);
        group.next(session("c"));
        await group.durable();
      })(),
      /consumer group cores is closed/,
    );
  });
});
