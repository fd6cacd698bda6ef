// Prompt id lists read from text: whatever the text, the result is what JSON.parse gives or null (the caller parses
// it then); a list that continues a recent one of the rollout reads alike; memory is bounded.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { readIdList, RecentIdLists, RecentIdListsByRollout } from "./id-list.ts";

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function randomIds(rand: () => number, length: number): number[] {
  return Array.from({ length }, () => {
    const kind = rand();
    if (kind < 0.05) return 0;
    if (kind < 0.08) return Math.floor(rand() * 1e15); // 15 digits at most: JSON.parse reads them exactly
    return Math.floor(rand() * 151_936);
  });
}

/** readIdList on `list` placed inside a larger text: null, or JSON.parse's array and the list's end. */
function assertReadsAsParsed(list: string, recent: RecentIdLists | null): boolean {
  const text = `{"prompt_token_ids":${list},"kv_transfer_params":null}`;
  const at = text.indexOf(":") + 1;
  const read = readIdList(text, at, recent);
  if (read === null) return false;
  const parsed: unknown = JSON.parse(list);
  assert.deepEqual(read.ids, parsed, list);
  assert.equal(read.end, at + list.length, list);
  return true;
}

function mutate(text: string, rand: () => number): string {
  const at = Math.floor(rand() * text.length);
  const chars = ["0", "1", "9", ",", "]", "[", " ", "-", ".", "e", "x", "é", "\u0131", "\n"];
  const c = chars[Math.floor(rand() * chars.length)]!;
  const kind = rand();
  if (kind < 0.33) return text.slice(0, at) + text.slice(at + 1);
  if (kind < 0.66) return text.slice(0, at) + c + text.slice(at);
  return text.slice(0, at) + c + text.slice(at + 1);
}

describe("id lists read from text", () => {
  test("generated lists read as JSON.parse reads them, small and agent-sized", () => {
    const rand = rng(7);
    for (let i = 0; i < 3000; i++) {
      const length = i % 100 === 0 ? 20_000 + Math.floor(rand() * 5000) : Math.floor(rand() * 40);
      assert.ok(assertReadsAsParsed(JSON.stringify(randomIds(rand, length)), null));
    }
  });

  test("mutated lists: JSON.parse's array or declined, never another", () => {
    const rand = rng(8);
    let declined = 0;
    for (let i = 0; i < 20_000; i++) {
      let list = JSON.stringify(randomIds(rand, Math.floor(rand() * 12)));
      for (let k = 1 + Math.floor(rand() * 2); k > 0; k--) list = mutate(list, rand);
      let valid = true;
      try {
        const parsed: unknown = JSON.parse(list);
        valid = Array.isArray(parsed) && parsed.every((v) => Number.isSafeInteger(v) && v >= 0);
      } catch {
        valid = false;
      }
      if (!valid) {
        const text = `{"prompt_token_ids":${list}}`;
        const read = readIdList(text, 20, null);
        // Text JSON.parse refuses (or reads as other values) is never an id list; a valid prefix may be.
        if (read !== null) assert.deepEqual(read.ids, JSON.parse(text.slice(20, read.end)), list);
        else declined++;
      } else if (!assertReadsAsParsed(list, null)) declined++;
    }
    assert.ok(declined > 5000, `declined ${declined}`);
  });

  test("what it declines: spaces, signs, fractions, leading zeros, 16 digits, characters beyond ASCII", () => {
    for (const list of ["[1, 2]", "[-1]", "[1.5]", "[01]", "[1234567890123456]", "[1,]", "[,1]", "[1\u0131]", "[é]"])
      assert.equal(readIdList(`${list},`, 0, null), null, list);
    assert.deepEqual(readIdList("[]", 0, null), { ids: [], end: 2 });
    assert.deepEqual(readIdList("x[0,123456789012345]y", 1, null), { ids: [0, 123456789012345], end: 20 });
  });
});

describe("lists that continue a recent one", () => {
  test("three agents' growing prompts, interleaved, read as JSON.parse reads them", () => {
    const rand = rng(9);
    const recent = new RecentIdLists();
    const agents = [randomIds(rand, 3000), randomIds(rand, 500), randomIds(rand, 1)];
    for (let turn = 0; turn < 300; turn++) {
      const agent = Math.floor(rand() * agents.length);
      const kind = rand();
      let ids = agents[agent]!;
      if (kind < 0.6)
        ids = [...ids, ...randomIds(rand, Math.floor(rand() * 50))]; // the next turn
      else if (kind < 0.7)
        ids = ids.slice(0, Math.floor(rand() * ids.length)); // compacted history
      else if (kind < 0.8 && ids.length > 0 && ids.at(-1)! < 1e13)
        ids = [...ids.slice(0, -1), ids.at(-1)! * 10 + 3]; // its last id longer
      else if (kind < 0.9) {
        ids = [...ids];
        ids[Math.floor(rand() * ids.length)] = 7; // one id changed
      } // else: the same prompt again
      agents[agent] = ids;
      assert.ok(assertReadsAsParsed(JSON.stringify(ids), recent));
    }
  });

  test("a continuation whose new part is not an id list is declined", () => {
    const recent = new RecentIdLists();
    assert.deepEqual(readIdList("[1,2,3]", 0, recent)?.ids, [1, 2, 3]);
    for (const list of ["[1,2,3,]", "[1,2,3,x]", "[1,2,3,04]", "[1,2,3 ,4]"])
      assert.equal(readIdList(list, 0, recent), null, list);
    assert.deepEqual(readIdList("[1,2,34]", 0, recent)?.ids, [1, 2, 34]);
    assert.deepEqual(readIdList("[1,2,3,4]", 0, recent)?.ids, [1, 2, 3, 4]);
    assert.deepEqual(readIdList("[1,2]", 0, recent)?.ids, [1, 2]);
  });

  test("arrays handed out are the caller's: changing one changes no later read", () => {
    const recent = new RecentIdLists();
    const first = readIdList("[5,6,7]", 0, recent)!.ids;
    first[0] = 0;
    assert.deepEqual(readIdList("[5,6,7,8]", 0, recent)!.ids, [5, 6, 7, 8]);
    const second = readIdList("[5,6,7,8]", 0, recent)!.ids;
    second.push(9);
    assert.deepEqual(readIdList("[5,6,7,8]", 0, recent)!.ids, [5, 6, 7, 8]);
  });

  test("rollouts' lists are bounded by memory: the least recently used go", () => {
    const byRollout = new RecentIdListsByRollout(200_000);
    const list = JSON.stringify(randomIds(rng(10), 5000)); // ~30 kB of text and 40 kB of ids
    for (let r = 0; r < 10; r++) readIdList(list, 0, byRollout.of(`r${r}`));
    const sizes = Array.from({ length: 10 }, (_, r) => byRollout.of(`r${r}`)!.size);
    // The rollouts read first were let go (a new, empty one comes back), the recent ones kept.
    assert.equal(sizes[0], 1);
    assert.ok(sizes[9]! > 60_000, String(sizes[9]));
    assert.equal(byRollout.of(null), null);
  });
});
