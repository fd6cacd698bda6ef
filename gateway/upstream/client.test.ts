import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Upstream } from "./client.ts";

// Nothing is sent: routing decisions only (pools connect lazily).
const URLS = ["http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"];

describe("upstream routing", () => {
  it("a rollout always gets the same replica; an ejected one hands it to the next on the ring, and gets it back", async () => {
    const upstream = new Upstream({ urls: URLS });
    try {
      const own = upstream.pick("ro_abc")!;
      for (let i = 0; i < 10; i++) assert.equal(upstream.pick("ro_abc"), own);
      own.failed("connect", "ECONNREFUSED");
      assert.equal(own.healthy, false);
      const next = upstream.pick("ro_abc")!;
      assert.notEqual(next, own);
      assert.equal(upstream.pick("ro_abc"), next, "the moved rollout stays on its new replica");
      own.checked(true, "ok");
      own.checked(true, "ok");
      assert.equal(upstream.pick("ro_abc"), own);
    } finally {
      await upstream.close();
    }
  });

  it("without a rollout: the replica with the fewest requests in flight", async () => {
    const upstream = new Upstream({ urls: URLS });
    try {
      const [a, b, c] = upstream.replicas;
      a!.inFlight = 3;
      b!.inFlight = 1;
      c!.inFlight = 2;
      assert.equal(upstream.pick(null), b);
      b!.failed("connect", "ECONNREFUSED");
      assert.equal(upstream.pick(null), c, "an ejected replica is passed over");
    } finally {
      await upstream.close();
    }
  });

  it("every replica ejected: calls still go to their own; each tried replica is excluded", async () => {
    const upstream = new Upstream({ urls: URLS });
    try {
      const own = upstream.pick("ro_x")!;
      for (const r of upstream.replicas) r.failed("connect", "ECONNREFUSED");
      assert.equal(upstream.pick("ro_x"), own);
      const tried = new Set(upstream.replicas);
      assert.equal(upstream.pick("ro_x", tried), null);
    } finally {
      await upstream.close();
    }
  });

  it("a streak of 5 failed answers ejects; a success in between resets the streak", async () => {
    const upstream = new Upstream({ urls: URLS });
    try {
      const [a] = upstream.replicas;
      for (let i = 0; i < 4; i++) a!.failed("answer", "HTTP 503");
      a!.succeeded();
      for (let i = 0; i < 4; i++) a!.failed("answer", "HTTP 503");
      assert.equal(a!.healthy, true);
      a!.failed("answer", "HTTP 503");
      assert.equal(a!.healthy, false);
      assert.match(a!.ejectedBecause!, /5 failed requests in a row, the last: HTTP 503/);
      assert.equal(a!.errors, 9);
    } finally {
      await upstream.close();
    }
  });

  it("round-robin (the bench's baseline) ignores rollouts", async () => {
    const upstream = new Upstream({ urls: URLS, routing: "round-robin" });
    try {
      const picks = Array.from({ length: 6 }, () => upstream.pick("ro_same")!.url);
      assert.deepEqual(picks, [...URLS, ...URLS]);
    } finally {
      await upstream.close();
    }
  });

  it("a new list keeps the replicas (and figures) it still names", async () => {
    const upstream = new Upstream({ urls: URLS });
    try {
      const [a] = upstream.replicas;
      a!.requests = 7;
      upstream.setUrls([URLS[0]!, "http://127.0.0.1:4"]);
      assert.deepEqual(upstream.urls, [URLS[0], "http://127.0.0.1:4"]);
      assert.equal(upstream.replicas[0], a);
      assert.equal(upstream.replicas[0]!.requests, 7);
    } finally {
      await upstream.close();
    }
  });
});
