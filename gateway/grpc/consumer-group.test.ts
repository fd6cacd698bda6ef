// A consumer group after a restart: members reclaim what they hold (and with it their groups), lost acks come
// back with them, the backlog waits for its holders during the rejoin grace, and late claims are rejected.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, describe, test } from "node:test";
import { Store } from "../../store/store.ts";
import { putSyntheticRollout } from "../../test/grpc-helpers.ts";
import { tempDir } from "../../test/helpers.ts";
import { ConsumerGroup, type Session } from "./consumer-group.ts";

const dirs: string[] = [];
const stores: Store[] = [];
after(async () => {
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

function session(id: string, maxInFlight = 100): Session {
  return { id, member: id, maxInFlight, inFlight: 0, scanPos: 0, epoch: 0, wake() {} };
}

/** Everything the session is given now, by rollout id. */
function drain(group: ConsumerGroup, s: Session): string[] {
  const out: string[] = [];
  for (let lease = group.next(s); lease; lease = group.next(s)) out.push(lease.rollout.id);
  return out;
}

async function finished(s: Store, specs: Array<[id: string, group: string]>): Promise<Map<string, number>> {
  const cursors = new Map<string, number>();
  for (const [id, group] of specs) cursors.set(id, await putSyntheticRollout(s, { id, group, reward: 1 }));
  return cursors;
}

describe("consumer group rejoin", () => {
  test("held rollouts stay their member's with their groups; the backlog waits for its holder; lost acks count", async () => {
    const s = store();
    // Before the "restart": member A held g1 (a1, a2), member B held g2 (b1); c1 was acked but not persisted.
    const c = await finished(s, [["a1", "g1"], ["b1", "g2"], ["a2", "g1"], ["c1", "g3"], ["x1", "g4"]]);
    const group = new ConsumerGroup("cores", s, { rejoinGraceMs: 60_000 });
    const a = session("a");
    assert.deepEqual(group.join(a, { held: [c.get("a1")!, c.get("a2")!], acked: [c.get("c1")!] }), []);
    assert.equal(a.inFlight, 2);
    // b1 (B's) and x1 (no one's, as far as the gateway knows) wait for their holders.
    assert.deepEqual(drain(group, a), []);
    // New rollouts: of A's group to A; of a group nobody may hold, to anyone; of g2 (B's, in the backlog), not yet.
    const more = await finished(s, [["a3", "g1"], ["n1", "g5"], ["b2", "g2"]]);
    assert.deepEqual(drain(group, a), ["a3", "n1"]);
    const b = session("b");
    assert.deepEqual(group.join(b, { held: [c.get("b1")!] }), []);
    assert.deepEqual(drain(group, b), ["b2"], "B's group continues at B");
    // A late claim of a rollout given to A, or of a group A holds: rejected (the member drops them).
    const late = session("late");
    assert.deepEqual(group.join(late, { held: [more.get("n1")!, c.get("x1")!, c.get("c1")!] }), [more.get("n1")!, c.get("c1")!]);
    assert.deepEqual(drain(group, late), [], "x1 was claimed: no one else gets it");
    group.ack([c.get("a1")!, c.get("b1")!, c.get("a2")!]);
    assert.equal(group.committed, c.get("c1")!, "the re-sent ack of c1 counted");
  });

  test("the grace ends when its time is up: unclaimed backlog goes to whoever is there", async () => {
    const s = store();
    await finished(s, [["u1", "g1"], ["u2", "g1"]]);
    const group = new ConsumerGroup("cores", s, { rejoinGraceMs: 200 });
    const a = session("a");
    group.join(a);
    assert.deepEqual(drain(group, a), []);
    await new Promise((r) => setTimeout(r, 250));
    assert.deepEqual(drain(group, a), ["u1", "u2"]);
  });

  test("no backlog, no grace; a claim beyond the committed cursor's log or already acked is rejected", async () => {
    const s = store();
    const group = new ConsumerGroup("cores", s, { rejoinGraceMs: 60_000 });
    const c = await finished(s, [["r1", ""], ["r2", ""]]);
    const a = session("a");
    assert.deepEqual(group.join(a, { held: [c.get("r2")! + 1] }), [c.get("r2")! + 1], "not in the log");
    assert.deepEqual(drain(group, a), ["r1", "r2"]);
    group.ack([c.get("r1")!]);
    assert.deepEqual(group.join(session("b"), { held: [c.get("r1")!, c.get("r2")!] }), [c.get("r1")!, c.get("r2")!]);
  });
});
