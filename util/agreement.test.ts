import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { agreement, k3, percentile } from "./agreement.ts";

describe("agreement figures", () => {
  test("identical series: r = 1, every |Δ| 0, KL 0", () => {
    const a = agreement([-0.1, -2, -0.5, -3], [-0.1, -2, -0.5, -3]);
    assert.equal(a.tokens, 4);
    assert.ok(Math.abs(a.pearson - 1) < 1e-12);
    assert.deepEqual([a.absDiffMean, a.absDiffP50, a.absDiffP99, a.absDiffMax, a.k3Kl], [0, 0, 0, 0, 0]);
  });

  test("figures worked out by hand: a constant shift of 0.5 keeps r = 1 and gives k3 = e^0.5 − 1.5 per token", () => {
    const a = agreement([-1, -2, -3], [-0.5, -1.5, -2.5]);
    assert.ok(Math.abs(a.pearson - 1) < 1e-12);
    assert.equal(a.absDiffMax, 0.5);
    assert.equal(a.absDiffP99, 0.5);
    assert.ok(Math.abs(a.k3Kl - (Math.exp(0.5) - 1.5)) < 1e-12);
    // Anti-correlated series.
    assert.ok(Math.abs(agreement([-1, -2, -3], [-3, -2, -1]).pearson + 1) < 1e-12);
  });

  test("numpy's linear-interpolation percentile; non-finite pairs are left out; no spread gives NaN r", () => {
    assert.equal(percentile([0, 1, 2, 3, 4], 50), 2);
    assert.ok(Math.abs(percentile([0, 1, 2, 3], 99) - 2.97) < 1e-12);
    assert.ok(Number.isNaN(percentile([], 50)));
    const a = agreement([-1, Number.NaN, -2], [-1.5, -1, -2]);
    assert.equal(a.tokens, 2);
    assert.equal(a.absDiffMax, 0.5);
    assert.ok(Number.isNaN(agreement([-1, -1], [-2, -3]).pearson));
    assert.ok(Number.isNaN(agreement([], []).absDiffMean));
    assert.throws(() => agreement([1], [1, 2]), /1 reference logprobs against 2/);
  });

  test("tokens: only the given indexes count, as the same pairs alone would; k3: given values are averaged as they are", () => {
    const reference = [-1, -9, -2, -3, 5];
    const other = [-0.5, 7, -1.5, -3.5, Number.NaN];
    const picked = agreement(reference, other, { tokens: [0, 2, 3, 4] });
    assert.deepEqual(picked, agreement([-1, -2, -3, 5], [-0.5, -1.5, -3.5, Number.NaN]));
    assert.equal(picked.tokens, 3);
    assert.equal(picked.absDiffMax, 0.5);
    const given = agreement(reference, other, { tokens: [0, 2], k3: [0.25, 100, 0.75, 0, 0] });
    assert.equal(given.k3Kl, 0.5);
    assert.equal(given.tokens, 2);
  });

  test("k3 is clamped like the native kernels: d beyond ±20 counts as ±20", () => {
    assert.equal(k3(0, -100), k3(0, -20));
    assert.equal(k3(-1, -1), 0);
    assert.ok(k3(-1, -2) > 0 && k3(-2, -1) > 0);
  });
});
