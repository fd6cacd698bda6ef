// The gateway's per-call counters and histograms (gateway/call-metrics.ts) must be indistinguishable from prom-client's
// in everything that reads them: the /metrics text, the JSON workers' figures are summed from, and resets.
import assert from "node:assert/strict";
import { test } from "node:test";
import { AggregatorRegistry, Counter, Histogram, Registry } from "prom-client";
import { CallCounter, CallHistogram } from "./call-metrics.ts";

const BUCKETS = [0.001, 0.01, 0.1, 1];
const SPEC = { name: "t_latency_seconds", help: "latency", labelNames: ["api", "status"] as const };
const COUNTER = { name: "t_calls_total", help: "calls", labelNames: ["api"] as const };

/** The same observations into prom-client's metrics and into ours, each in a registry of its own. */
function observedBoth(observations: [api: string, status: string, seconds: number][]): [Registry, Registry] {
  const theirs = new Registry();
  const ours = new Registry();
  const histogram = new Histogram({ ...SPEC, buckets: BUCKETS, registers: [theirs] });
  const counter = new Counter({ ...COUNTER, registers: [theirs] });
  const callHistogram = new CallHistogram(ours, { ...SPEC, buckets: BUCKETS });
  const callCounter = new CallCounter(ours, COUNTER);
  for (const [api, status, seconds] of observations) {
    histogram.observe({ api, status }, seconds);
    counter.inc({ api }, 2);
    callHistogram.observe({ api, status }, seconds);
    callCounter.inc({ api }, 2);
  }
  return [theirs, ours];
}

const OBSERVATIONS: [string, string, number][] = [
  ["chat", "ok", 0.0004],
  ["chat", "ok", 0.001], // on a bound: counted in that bucket
  ["chat", "error", 0.05],
  ["messages", "ok", 3], // above every bound: only +Inf
  ["chat", "ok", 0.2],
];

test("the /metrics text and its JSON are prom-client's, series for series", async () => {
  const [theirs, ours] = observedBoth(OBSERVATIONS);
  assert.equal(await ours.metrics(), await theirs.metrics());
  assert.deepEqual(figures(await ours.getMetricsAsJSON()), figures(await theirs.getMetricsAsJSON()));
});

/** What a reader takes from the JSON: each metric's kind and its values (prom-client adds empty exemplars). */
function figures(metrics: Awaited<ReturnType<Registry["getMetricsAsJSON"]>>) {
  return metrics.map(({ name, help, type, aggregator, values }) => ({
    ...{ name, help, type, aggregator },
    values: values.map((entry) => {
      const { labels, value, metricName } = entry as typeof entry & { metricName?: string };
      return { labels, value, metricName };
    }),
  }));
}

test("workers' figures sum the same way (AggregatorRegistry)", async () => {
  const [theirsA, oursA] = observedBoth(OBSERVATIONS);
  const [theirsB, oursB] = observedBoth(OBSERVATIONS.slice(2));
  const theirs = AggregatorRegistry.aggregate([await theirsA.getMetricsAsJSON(), await theirsB.getMetricsAsJSON()]);
  const ours = AggregatorRegistry.aggregate([await oursA.getMetricsAsJSON(), await oursB.getMetricsAsJSON()]);
  assert.equal(await ours.metrics(), await theirs.metrics());
  assert.match(await ours.metrics(), /t_calls_total\{api="chat"\} 12/);
});

test("a reset empties every series, as prom-client's does", async () => {
  const [theirs, ours] = observedBoth(OBSERVATIONS);
  theirs.resetMetrics();
  ours.resetMetrics();
  assert.equal(await ours.metrics(), await theirs.metrics());
  assert.doesNotMatch(await ours.metrics(), /api=/);
});

test("a counter refuses to go down and a histogram refuses what is not a number", () => {
  const registry = new Registry();
  const counter = new CallCounter(registry, COUNTER);
  const histogram = new CallHistogram(registry, { ...SPEC, buckets: BUCKETS });
  assert.throws(() => counter.inc({ api: "chat" }, -1), /only goes up/);
  assert.throws(() => histogram.observe({ api: "chat", status: "ok" }, Number.NaN), /not a finite number/);
});
