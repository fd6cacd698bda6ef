import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HashRing } from "./hash-ring.ts";

const KEYS = Array.from({ length: 20_000 }, (_, i) => `ro_${i.toString(36)}x${(i * 7919).toString(16)}`);
const ringOf = (names: string[]) => new HashRing(names, (name) => name);
const urls = (n: number) => Array.from({ length: n }, (_, i) => `http://10.0.0.${i + 1}:8000`);

describe("hash ring", () => {
  it("spreads keys evenly: each of 3 replicas owns about a third", () => {
    const ring = ringOf(urls(3));
    const counts = new Map<string, number>();
    for (const key of KEYS) counts.set(ring.owner(key)!, (counts.get(ring.owner(key)!) ?? 0) + 1);
    for (const [url, count] of counts) {
      const share = count / KEYS.length;
      assert.ok(share > 0.25 && share < 0.42, `${url} owns ${share}`);
    }
  });

  it("adding a 4th replica moves about 1/4 of the keys, all of them to the new replica", () => {
    const before = ringOf(urls(3));
    const after = ringOf(urls(4));
    let moved = 0;
    for (const key of KEYS) {
      const was = before.owner(key);
      const now = after.owner(key);
      if (was === now) continue;
      moved++;
      assert.equal(now, urls(4)[3], `key ${key} moved between two old replicas`);
    }
    const share = moved / KEYS.length;
    assert.ok(share > 0.18 && share < 0.32, `moved ${share} of the keys`);
  });

  it("removing a replica moves only its own keys, to the next replica on the ring", () => {
    const full = ringOf(urls(4));
    const without = ringOf(urls(4).filter((_, i) => i !== 1));
    for (const key of KEYS) {
      const owners = [...full.walk(key)];
      if (owners[0] !== urls(4)[1]) assert.equal(without.owner(key), owners[0]);
      else assert.equal(without.owner(key), owners[1], "a removed replica's key goes to the next on its walk");
    }
  });

  it("walk visits every member once, owner first; the ring does not depend on the list's order", () => {
    const ring = ringOf(urls(5));
    const shuffled = ringOf([...urls(5)].reverse());
    for (const key of KEYS.slice(0, 500)) {
      const walk = [...ring.walk(key)];
      assert.equal(walk.length, 5);
      assert.equal(new Set(walk).size, 5);
      assert.equal(walk[0], ring.owner(key));
      assert.deepEqual([...shuffled.walk(key)], walk);
    }
  });

  it("an empty ring owns nothing", () => {
    assert.equal(ringOf([]).owner("ro_1"), undefined);
    assert.deepEqual([...ringOf([]).walk("ro_1")], []);
  });
});
