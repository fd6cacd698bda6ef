// npm run fuzz: the fuzz suite of the tests, longer. RLGATE_FUZZ_INPUTS inputs (default 100,000), RLGATE_FUZZ_SEED
// (default 11): prints inputs, answers by status, memory before and after, and every broken promise; exits 1 on any.
import { SingleBar, Presets } from "cli-progress";
import { GEMINI_MODEL_MAP } from "../test/fuzz/inputs.ts";
import { formatFigures, runFuzz } from "../test/fuzz/run.ts";
import { startStack } from "../test/helpers.ts";

const count = Number(process.env.RLGATE_FUZZ_INPUTS ?? 100_000);
const seed = Number(process.env.RLGATE_FUZZ_SEED ?? 11);
if (!Number.isSafeInteger(count) || count < 1 || !Number.isSafeInteger(seed)) {
  console.error("RLGATE_FUZZ_INPUTS must be a positive integer and RLGATE_FUZZ_SEED an integer");
  process.exit(2);
}
const stack = await startStack({ gateway: { modelMap: GEMINI_MODEL_MAP } });
const bar = new SingleBar(
  { format: "fuzz {bar} {value}/{total} inputs | {eta_formatted} left", etaBuffer: 2000 },
  Presets.shades_classic,
);
bar.start(count, 0);
try {
  const figures = await runFuzz({ gateway: stack.gateway, seed, count, onProgress: (done) => bar.update(done) });
  bar.stop();
  console.log(formatFigures(figures));
  process.exitCode = figures.failures.length ? 1 : 0;
} finally {
  bar.stop();
  await stack.close();
}
