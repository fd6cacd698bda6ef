// npx tsx bench/secrets-redaction.ts
//
// What the body redaction of gateway/secrets.ts costs a call: redactSecrets over request bodies shaped like agent
// calls (2 kB, 330 kB, 2.6 MB of chat JSON), beside the JSON.parse the gateway does of the same body anyway, in one
// run. Best of 5 rounds of N iterations each. Never gates CI.
import { redactSecrets, type KnownSecrets } from "../gateway/secrets.ts";

const withToken: KnownSecrets = { controlToken: "s3cret-control-token", isRolloutKey: () => false };
const keysOnly: KnownSecrets = { controlToken: null, isRolloutKey: () => false };

function bestMicros(iterations: number, run: () => void): number {
  let best = Infinity;
  for (let round = 0; round < 5; round++) {
    const start = performance.now();
    for (let i = 0; i < iterations; i++) run();
    best = Math.min(best, ((performance.now() - start) / iterations) * 1000);
  }
  return best;
}

console.log("body bytes   redact (token + keys)   redact (keys)   JSON.parse   redact / parse");
for (const chars of [2_000, 250_000, 2_000_000]) {
  const content = "x".repeat(chars).replace(/x{50}/g, (run) => `${run} tool_call walk_ `);
  const body = Buffer.from(JSON.stringify({ model: "m", messages: [{ role: "user", content }] }));
  const iterations = Math.max(20, Math.floor(2e8 / body.length));
  const token = bestMicros(iterations, () => redactSecrets(body, withToken));
  const keys = bestMicros(iterations, () => redactSecrets(body, keysOnly));
  const parse = bestMicros(Math.max(5, iterations / 10), () => JSON.parse(body.toString("utf8")));
  console.log(
    `${String(body.length).padStart(10)}   ${token.toFixed(1).padStart(17)} µs   ${keys.toFixed(1).padStart(10)} µs` +
      `   ${parse.toFixed(1).padStart(7)} µs   ${(token / parse).toFixed(3).padStart(10)}`,
  );
}
