// Issue 22: group membership is decided once, at intake, from (name, round) and the declared size. Whatever happens
// later — when a group is taken, a timeout, a restart of the core — the generation a rollout belongs to is the one
// its position in the stream (fill order) or its round gave it; only which *part* of that generation it was trained
// in (the generation itself, or its late rollouts) may depend on timing, and that is recorded for replay.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { seededRandom } from "../../util/seeded-random.ts";
import { DecisionPlan, type Decision } from "./decisions.ts";
import { GroupTracker, type GenerationState, type NameState } from "./groups.ts";
import { pending } from "./test-support.ts";

interface Arrival {
  id: string;
  name: string;
  size: number;
  round?: number;
}

function arrive(tracker: GroupTracker, a: Arrival, at = 0) {
  const assignment = tracker.assign(a.name, a.id, a.size, a.round ?? 0);
  if (assignment.overSize) return { assignment, group: null };
  const group = tracker.add(
    pending(a.id, 1, [], {
      groupKey: assignment.key,
      group: a.name,
      generation: assignment.generation,
      round: assignment.round,
      late: assignment.late,
      declaredSize: assignment.size,
      receivedAt: at,
    }),
  );
  return { assignment, group };
}

describe("issue 22: group membership at intake", () => {
  test("issue 22 item 1: a rollout arriving after its generation filled, before it was taken, opens the next generation", () => {
    const tracker = new GroupTracker({ defaultSize: 0, timeoutMs: 60_000 });
    arrive(tracker, { id: "a", name: "g", size: 2 });
    const { group } = arrive(tracker, { id: "b", name: "g", size: 2 });
    assert.equal(tracker.isComplete(group!), true);
    // The full generation is not taken yet (it waits on the work queue): c must not join it.
    const c = arrive(tracker, { id: "c", name: "g", size: 2 });
    assert.equal(c.assignment.key, "group:g#2");
    assert.equal(group!.members.size, 2);
    assert.deepEqual(
      tracker.due(0).map((d) => d.key),
      ["group:g#1"],
    );
  });

  test("issue 22 item 4: explicit rounds never mix, however they interleave; a round over its size drops the extra", () => {
    const tracker = new GroupTracker({ defaultSize: 0, timeoutMs: 60_000 });
    const order: Arrival[] = [
      { id: "a1", name: "t", size: 2, round: 1 },
      { id: "b1", name: "t", size: 2, round: 2 },
      { id: "b2", name: "t", size: 2, round: 2 },
      { id: "a2", name: "t", size: 2, round: 1 },
      { id: "b3", name: "t", size: 2, round: 2 },
    ];
    const got = order.map((a) => arrive(tracker, a).assignment);
    assert.deepEqual(
      got.map((a) => (a.overSize ? "over_size" : a.key)),
      ["group:t@1", "group:t@2", "group:t@2", "group:t@1", "over_size"],
    );
    assert.deepEqual(
      got.map((a) => a.generation),
      [1, 2, 2, 1, 2],
    );
    assert.deepEqual(
      tracker
        .due(0)
        .map((d) => d.key)
        .sort(),
      ["group:t@1", "group:t@2"],
    );
  });

  test("issue 22 item 4: without rounds, a slot held by a rollout that ends late stays its generation's (no shift of later rounds)", () => {
    const tracker = new GroupTracker({ defaultSize: 0, timeoutMs: 1000 });
    // Round 1: a1 and a2 finish, the third (a3, a dead harness finished by its deadline) comes after round 2 began.
    arrive(tracker, { id: "a1", name: "t", size: 3 }, 0);
    arrive(tracker, { id: "a2", name: "t", size: 3 }, 0);
    tracker.take("group:t#1"); // its timeout
    const late = arrive(tracker, { id: "a3", name: "t", size: 3 }, 2000).assignment;
    assert.deepEqual([late.key, late.generation, late.late, late.size], ["group:t#1+late", 1, true, 1]);
    const round2 = ["b1", "b2", "b3"].map((id) => arrive(tracker, { id, name: "t", size: 3 }, 2000).assignment.key);
    assert.deepEqual(round2, ["group:t#2", "group:t#2", "group:t#2"]);
  });

  test("property: fill order — every rollout's generation is its position in the stream over the size, whatever the timing of takes and restarts", () => {
    for (let seed = 1; seed <= 200; seed++) {
      const rand = seededRandom(seed);
      const names = ["x", "y", "z"].slice(0, 1 + Math.floor(rand() * 3));
      const sizes = new Map(names.map((n) => [n, 1 + Math.floor(rand() * 4)]));
      const stream: Arrival[] = Array.from({ length: 5 + Math.floor(rand() * 40) }, (_, i) => {
        const name = names[Math.floor(rand() * names.length)]!;
        return { id: `r${String(i).padStart(3, "0")}`, name, size: sizes.get(name)! };
      });
      // The reference, from (name, size) and the stream order alone.
      const seen = new Map<string, number>();
      const reference = stream.map((a) => {
        const k = seen.get(a.name) ?? 0;
        seen.set(a.name, k + 1);
        return Math.floor(k / a.size) + 1;
      });

      let names0 = new Map<string, NameState>();
      let gens0 = new Map<string, GenerationState>();
      let tracker = new GroupTracker({ defaultSize: 0, timeoutMs: 1000, names: names0, generations: gens0 });
      const pendingNow = new Map<string, ReturnType<typeof pending>>();
      const parts = new Map<string, string[]>(); // group key → members, over every processed part
      stream.forEach((a, i) => {
        const { assignment } = arrive(tracker, a, i);
        assert.equal(assignment.generation, reference[i], `seed ${seed}: ${a.id} (${a.name}) generation`);
        pendingNow.set(
          a.id,
          pending(a.id, 1, [], {
            groupKey: assignment.key,
            group: a.name,
            generation: assignment.generation,
            late: assignment.late,
            declaredSize: assignment.size,
            receivedAt: i,
          }),
        );
        const r = rand();
        if (r < 0.3) {
          // A timeout: take any pending group, complete or not.
          for (const { key } of tracker.due(Number.MAX_SAFE_INTEGER)) {
            if (rand() < 0.5) continue;
            const g = tracker.take(key)!;
            parts.set(key, [...g.members.keys()]);
            for (const id of g.members.keys()) pendingNow.delete(id);
          }
        } else if (r < 0.4) {
          // A restart: a new tracker from what the store persisted.
          names0 = new Map([...names0].map(([k, v]) => [k, { ...v }]));
          gens0 = new Map([...gens0].map(([k, v]) => [k, { ...v }]));
          tracker = new GroupTracker({ defaultSize: 0, timeoutMs: 1000, names: names0, generations: gens0 });
          for (const p of pendingNow.values()) tracker.add(p);
        } else {
          for (const { key, by } of tracker.due(0)) {
            if (by !== "size") continue;
            const g = tracker.take(key)!;
            parts.set(key, [...g.members.keys()]);
            for (const id of g.members.keys()) pendingNow.delete(id);
          }
        }
      });
      for (const { key } of tracker.due(Number.MAX_SAFE_INTEGER))
        parts.set(key, [...tracker.take(key)!.members.keys()]);
      // Every rollout in exactly one part, of its reference generation; a part never exceeds the size.
      const placed = new Map<string, string>();
      for (const [key, members] of parts) {
        for (const id of members) {
          assert.equal(placed.has(id), false, `seed ${seed}: ${id} twice`);
          placed.set(id, key);
        }
      }
      stream.forEach((a, i) => {
        const key = placed.get(a.id);
        assert.match(key ?? "", new RegExp(`^group:${a.name}#${reference[i]}(\\+late\\d*)?$`), `seed ${seed}: ${a.id}`);
      });
      for (const [key, members] of parts) {
        const name = /^group:(\w)#/.exec(key)![1]!;
        assert.ok(members.length <= sizes.get(name)!, `seed ${seed}: ${key} holds ${members.length}`);
      }
    }
  });

  test("a plan of recorded decisions gives each rollout its recorded group and the batch cuts in order", () => {
    const decisions: Decision[] = [
      { kind: "group", key: "group:t#1", members: ["a", "b"], by: "timeout", at: 1 },
      { kind: "group", key: "group:t@3+late", members: ["c"], by: "size", at: 2 },
      { kind: "group", key: "rollout:d", members: ["d"], by: "size", at: 2 },
      { kind: "batch", batchId: 7, rollouts: ["a", "b"], at: 3 },
      { kind: "batch", batchId: 8, rollouts: ["c"], at: 4 },
    ];
    const plan = new DecisionPlan(decisions);
    assert.deepEqual(
      { ...plan.groupOf("b"), members: undefined },
      { key: "group:t#1", name: "t", generation: 1, round: 0, late: false, members: undefined },
    );
    const c = plan.groupOf("c")!;
    assert.deepEqual([c.generation, c.round, c.late], [3, 3, true]);
    assert.equal(plan.groupOf("d"), undefined);
    assert.equal(plan.isBatched("c"), true);
    assert.equal(plan.isBatched("d"), false);
    assert.equal(plan.peekBatch()!.batchId, 7);
    plan.shiftBatch();
    assert.equal(plan.peekBatch()!.batchId, 8);
  });
});
