// The gateway's metrics: its own under rlgate_, the process's under the standard names dashboards expect.
import assert from "node:assert/strict";
import { test } from "node:test";
import { GatewayMetrics } from "./metrics.ts";

test("process metrics carry the standard names (process_*, nodejs_*), not an rlgate_ prefix", async () => {
  const text = await new GatewayMetrics({ processMetrics: true }).registry.metrics();
  assert.match(text, /^process_cpu_user_seconds_total \d/m);
  assert.match(text, /^process_resident_memory_bytes \d/m);
  assert.match(text, /^nodejs_heap_size_used_bytes \d/m);
  assert.doesNotMatch(text, /rlgate_process_|rlgate_nodejs_/);
  assert.match(text, /^# TYPE rlgate_requests_total counter/m);
  const quiet = await new GatewayMetrics().registry.metrics();
  assert.doesNotMatch(quiet, /process_cpu/, "off unless asked for (tests run several gateways in one process)");
});
