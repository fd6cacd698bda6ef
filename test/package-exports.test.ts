// The TypeScript clients are exported from the package with their types: a trainer project that depends on rlgate
// imports `rlgate/client` (and `rlgate/protocol`) by name, type-checks against them and runs them (through tsx), here
// against a real RL core.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import { startCore, type Core } from "../rl-core/core/index.ts";
import { ROOT, startStack, tempDir, type Stack } from "./helpers.ts";

const execFileAsync = promisify(execFile);
const project = tempDir("trainer-project");
const coreDir = tempDir("exports-core");
let stack: Stack;
let core: Core;

before(async () => {
  stack = await startStack({ gateway: { grpcPort: 0 } });
  core = await startCore({ gateways: [stack.gateway.grpc!.address], port: 0, dataDir: coreDir });
  mkdirSync(join(project, "node_modules"));
  symlinkSync(ROOT, join(project, "node_modules", "rlgate")); // as `npm install ../rlgate` would link it
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "my-trainer", type: "module", private: true }));
  writeFileSync(
    join(project, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        allowImportingTsExtensions: true,
        typeRoots: [join(ROOT, "node_modules/@types")],
        types: ["node"],
      },
      files: ["trainer.ts"],
    }),
  );
  writeFileSync(
    join(project, "trainer.ts"),
    `import { TrainerClient, decodeBatch, type CoreStatus } from "rlgate/client";
import { TrajectoryConsumer } from "rlgate";
import { DEFAULT_MAX_MESSAGE_BYTES } from "rlgate/protocol";

export function misuse(): TrainerClient {
  // @ts-expect-error the address is a string: the types are the package's, not any
  return new TrainerClient(8702);
}
const client = new TrainerClient(process.argv[2]!, { deadlineMs: 30_000 });
const status: CoreStatus = await client.status();
client.close();
console.log(JSON.stringify({ gatewaysConnected: status.gatewaysConnected, decode: typeof decodeBatch, consumer: typeof TrajectoryConsumer, max: DEFAULT_MAX_MESSAGE_BYTES }));
`,
  );
});
after(async () => {
  await core?.close();
  await stack?.close();
  for (const dir of [project, coreDir]) rmSync(dir, { recursive: true, force: true });
});

test(
  "a trainer project imports rlgate/client by name: it type-checks and talks to a core",
  { timeout: 180_000 },
  async () => {
    await execFileAsync(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", project], {
      cwd: project,
      timeout: 150_000,
    });
    const tsx = join(ROOT, "node_modules/tsx/dist/cli.mjs");
    const { stdout } = await execFileAsync(process.execPath, [tsx, "trainer.ts", core.address], {
      cwd: project,
      timeout: 60_000,
    });
    const got = JSON.parse(stdout) as { gatewaysConnected: boolean[]; decode: string; consumer: string; max: number };
    assert.deepEqual([got.decode, got.consumer], ["function", "function"]);
    assert.ok(got.max > 0);
    assert.equal(got.gatewaysConnected.length, 1);
  },
);

test("a path the package does not export is refused by name (the exports are the public surface)", async () => {
  writeFileSync(
    join(project, "deep.mjs"),
    `import("rlgate/gateway/index.ts").then(() => console.log("imported"), (e) => console.log(e.code));`,
  );
  const { stdout } = await execFileAsync(process.execPath, ["deep.mjs"], { cwd: project });
  assert.equal(stdout.trim(), "ERR_PACKAGE_PATH_NOT_EXPORTED");
});
