// bench:policy-updates — the load figure for weight updates (docs/weight-updates.md): 100 updates under 32
// concurrent rollouts (abort, wait and keep mode in turn, each landing on answers in flight), driven the way a trainer
// drives them — through an RL core's gRPC PausePolicy / ResumePolicy, which the core relays to the gateway's control
// API (`--via http` posts to the gateway directly). Prints calls lost or failed, aborts a harness saw, tokens without
// a version or with another than the one that sampled them (test/token-version-check.ts), and the time each held
// call waited. Sim (vLLM flavour, tokens mode, 1 ms per token) and gateway run
// in this process; bounded by --timeout.
//
//   npm run bench:policy-updates [-- --updates 100 --rollouts 32 --via core|http --timeout 600]
import { rmSync } from "node:fs";
import { parseArgs } from "node:util";
import { TrainerClient } from "../clients/ts/index.ts";
import { startCore } from "../rl-core/core/index.ts";
import { postJson, startStack, tempDir } from "../test/helpers.ts";
import { describeLoad, policyUpdateLoad } from "../test/policy-update-load.ts";

const { values: args } = parseArgs({
  options: {
    updates: { type: "string", default: "100" },
    rollouts: { type: "string", default: "32" },
    via: { type: "string", default: "core" },
    timeout: { type: "string", default: "600" },
  },
});
if (args.via !== "core" && args.via !== "http") throw new Error(`--via core or http, not ${args.via}`);
const timer = setTimeout(
  () => {
    console.error(`bench:policy-updates: not done within --timeout ${args.timeout} s`);
    process.exit(1);
  },
  Number(args.timeout) * 1000,
);

const SIM_SEED = 11;
const stack = await startStack({ sim: { seed: SIM_SEED, interTokenMs: 1 }, gateway: { prompts: "tokens" } });
const dataDir = tempDir("bench-policy-core");
const core = await startCore({ gateways: [], gatewayApis: [stack.gateway.url], port: 0, metricsPort: null, dataDir });
const trainer = new TrainerClient(core.address);
const http = async (action: string, body: object) => {
  const res = await postJson(`${stack.gateway.url}/api/policy/${action}`, body);
  if (res.status !== 200) throw new Error(`${action}: ${res.status} ${res.text}`);
};
try {
  const figures = await policyUpdateLoad(stack, {
    updates: Number(args.updates),
    rollouts: Number(args.rollouts),
    simSeed: SIM_SEED,
    update: async (mode, version) => {
      if (args.via === "http") {
        await http("pause", { mode });
        await http("resume", { version });
      } else {
        await trainer.pausePolicy({ mode });
        await trainer.resumePolicy(version);
      }
    },
  });
  const state = (await (await fetch(`${stack.gateway.url}/api/policy`)).json()) as { pauses: number; version: string };
  console.log(
    `bench:policy-updates (via ${args.via === "core" ? "the core's gRPC PausePolicy / ResumePolicy" : "HTTP"})`,
  );
  console.log(`  ${describeLoad(figures)}`);
  console.log(
    `  gateway: ${state.pauses} pauses, version ${state.version}; core's current version ${core.currentVersion || "-"}`,
  );
  const ok =
    figures.lost === 0 &&
    figures.failed === 0 &&
    figures.abortsSeen === 0 &&
    figures.untagged === 0 &&
    figures.mismatched === 0;
  if (!ok) process.exitCode = 1;
} finally {
  trainer.close();
  await core.close();
  await stack.close();
  rmSync(dataDir, { recursive: true, force: true });
  clearTimeout(timer);
}
