import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, test } from "node:test";
import { startStack } from "../test/helpers.ts";
import { bwrapForTests } from "../test/require-in-ci.ts";

const ENTRY = new URL("./index.ts", import.meta.url).pathname;
const TASK = new URL("../examples/tasks/fix-add", import.meta.url).pathname;

function rlgate(args: string[]) {
  return spawnSync(process.execPath, ["--import", "tsx", ENTRY, ...args], { encoding: "utf8", timeout: 120_000 });
}

// tsx by its path: a run from another folder (cwd) would not find it by name.
const TSX = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

/** Like rlgate() but without blocking the event loop (for runs that take a while). */
function rlgateAsync(args: string[], cwd?: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", TSX, ENTRY, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
      cwd,
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d));
    child.stderr.on("data", (d: Buffer) => (stderr += d));
    child.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

const scratch = mkdtempSync(join(tmpdir(), "rlgate-run-cli-"));
const unavailable = bwrapForTests(scratch);
rmSync(scratch, { recursive: true, force: true });

describe("rlgate run (command line)", () => {
  test("--help explains the command, its options and where the task format is", () => {
    const help = rlgate(["run", "--help"]);
    assert.equal(help.status, 0);
    for (const flag of [
      "--tasks",
      "--harness",
      "--n",
      "--concurrency",
      "--timeout",
      "--gateway",
      "--sim-script",
      "--memory",
      "--disk",
      "--processes",
      "--cpu",
      "--json",
      "--keep",
    ]) {
      assert.ok(help.stdout.includes(flag), flag);
    }
    assert.match(help.stdout, /docs\/runner\.md/);
    // The options most runs need come first; Kubernetes' and datasets' after them.
    const at = (flag: string) => help.stdout.indexOf(`  ${flag} `);
    for (const late of ["--namespace", "--tools-image", "--dataset"])
      assert.ok(at("--harness") < at(late) && at("-n, --n") < at(late) && at("--gateway") < at(late), late);
    assert.match(help.stdout, /qwen-code,\s+claude-code,\s+codex,\s+opencode,\s+pi/);
  });

  test("a missing task folder or an unknown harness: one sentence, exit 2", () => {
    const missing = rlgate(["run", "--tasks", "/no/such/tasks", "--harness", "qwen-code"]);
    assert.equal(missing.status, 2);
    assert.equal(missing.stderr.trim(), "rlgate run: --tasks /no/such/tasks: no such file or folder");
    const unknown = rlgate(["run", "--tasks", TASK, "--harness", "nosuchcli"]);
    assert.equal(unknown.status, 2);
    assert.match(unknown.stderr, /^rlgate run: unknown harness 'nosuchcli': a preset \(qwen-code/);
    assert.doesNotMatch(unknown.stderr, /\n\s+at /, "no stack trace");
  });

  test("options of its own gateway with --gateway: refused in one sentence that names them, exit 2", () => {
    // Dropped, they would leave every reward 0 (no scripted sim behind the given gateway).
    const r = rlgate([
      "run",
      "--tasks",
      TASK,
      "--harness",
      "qwen-code",
      "--gateway",
      "http://127.0.0.1:9",
      "--sim-script",
      "x.json",
      "--prompts",
      "tokens",
    ]);
    assert.equal(r.status, 2);
    assert.match(
      r.stderr.trim(),
      /^rlgate run: --sim-script, --prompts are for the gateway rlgate run starts itself, not for --gateway: start that gateway with them instead/,
    );
    assert.doesNotMatch(r.stderr, /\n\s+at /, "no stack trace");
    const one = rlgate([
      "run",
      "--tasks",
      TASK,
      "--harness",
      "qwen-code",
      "--gateway",
      "http://127.0.0.1:9",
      "--data",
      "d",
    ]);
    assert.match(one.stderr, /^rlgate run: --data is for the gateway rlgate run starts itself/);
  });

  test("an unreachable --gateway: one sentence, exit 2", { skip: unavailable ?? false }, () => {
    const r = rlgate(["run", "--tasks", TASK, "--harness", "true {prompt}", "--gateway", "http://127.0.0.1:9"]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /rlgate run: gateway http:\/\/127\.0\.0\.1:9 unreachable/);
    assert.match(
      r.stderr,
      /rlgate run: --gateway without --token: the control API of http:\/\/127\.0\.0\.1:9 is open to anything that can reach it/,
    );
  });

  test(
    "a rollout someone else finished first: NOT RECORDED in the table, what the gateway holds in its error, exit 1",
    { skip: unavailable ?? false },
    async () => {
      const stack = await startStack();
      try {
        // The agent calls until its rollout takes no more calls, i.e. until the test has finished it with reward 1.
        const chat = `curl -s -o /dev/null -w '%{http_code}' "$OPENAI_BASE_URL/chat/completions" -H 'content-type: application/json' -d '{"model":"Qwen/Qwen3-8B","messages":[{"role":"user","content":"hi"}],"max_tokens":1}'`;
        const agent = `while [ "$(${chat})" = 200 ]; do sleep 0.2; done`;
        const run = rlgateAsync([
          "run",
          "--tasks",
          TASK,
          "--harness",
          agent,
          "-n",
          "1",
          "--gateway",
          stack.gateway.url,
        ]);
        // A run that ends before its rollout opens (refused at start) is a failure below, not a wait forever.
        let exited = false;
        void run.then(() => (exited = true));
        let finished = false;
        while (!finished && !exited) {
          const { rollouts } = (await (await fetch(`${stack.gateway.url}/api/rollouts?limit=10`)).json()) as any;
          const open = rollouts.find((x: any) => x.status === "open");
          if (open) {
            const res = await fetch(`${stack.gateway.url}/api/rollouts/${open.id}/finish`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ reward: 1, status: "ok" }),
            });
            finished = res.ok;
          } else await new Promise((resolve) => setTimeout(resolve, 100));
        }
        const r = await run;
        assert.equal(r.status, 1, r.stderr);
        const lines = r.stdout.trim().split("\n");
        assert.match(lines[0]!, /status +reward +recorded +calls/);
        assert.match(lines[1]!, /^fix-add#0 +r_\S+ +custom +ok +0 +NO /, "the grader's 0, not recorded");
        assert.match(lines.at(-1)!, /^1 NOT RECORDED: the gateway does not hold the result above \(fix-add#0;/);
        assert.match(
          r.stderr,
          /fix-add#0: ok reward=0 NOT RECORDED .*finishing on the gateway failed \(it holds status ok, reward 1\): /,
        );
        assert.match(r.stderr, /rlgate run: 1 rollout\(s\) NOT RECORDED on the gateway as graded \(exit 1\)/);
        assert.match(r.stderr, new RegExp(`rlgate run: in the UI: ${stack.gateway.url}/ui/#rollout=r_\\S+ `));
      } finally {
        await stack.close();
      }
    },
  );

  test(
    "a run with its own gateway: --json gives each rollout's status, reward, calls and trajectories",
    { skip: unavailable ?? false },
    async () => {
      const fix = `[ "$RLGATE_SAMPLE" = 0 ] && sed -i 's/a - b/a + b/' calc.py; curl -s -o /dev/null "$OPENAI_BASE_URL/chat/completions" -H 'content-type: application/json' -d '{"model":"Qwen/Qwen3-8B","messages":[{"role":"user","content":"hi"}]}'`;
      const cwd = mkdtempSync(join(tmpdir(), "rlgate-run-cwd-"));
      const r = await rlgateAsync(["run", "--tasks", TASK, "--harness", fix, "-n", "2", "--json"], cwd);
      assert.equal(r.status, 0, r.stderr);
      // Its store outlives its gateway, in a folder it names, where rlgate show finds the rollouts.
      const store = /store (\S+) \(kept\)/.exec(r.stderr)?.[1];
      assert.ok(store?.startsWith(join(cwd, ".rlgate", "runs")), r.stderr);
      assert.ok(existsSync(store!));
      const data = store!.slice(cwd.length + 1);
      assert.match(r.stderr, new RegExp(`the rollouts are kept in ${data.replace(/[.]/g, "\\.")}: npx rlgate show`));
      assert.ok(
        r.stderr.includes(`to browse them: npx rlgate serve --data ${data}, then http://127.0.0.1:8700/ui/#rollout=`),
      );
      const results = JSON.parse(r.stdout) as any[];
      assert.deepEqual(
        results.map((x) => [x.task, x.sample, x.harness, x.status, x.reward, x.calls, x.trajectories, x.stage]),
        [
          ["fix-add", 0, "custom", "ok", 1, 1, 1, "done"],
          ["fix-add", 1, "custom", "ok", 0, 1, 1, "done"],
        ],
      );
      assert.match(
        r.stderr,
        /fix-add#0: ok reward=1 calls=1 .* \[\d\/2\]/,
        "plain progress lines when stderr is not a terminal",
      );
      const shown = rlgate(["show", results[0].rolloutId, "--data", store!, "--no-color"]);
      assert.equal(shown.status, 0, shown.stderr);
      const unknown = rlgate(["show", "r_unknown", "--data", store!]);
      assert.equal(unknown.status, 1);
      assert.equal(unknown.stderr.trim(), `rlgate show: no rollout 'r_unknown' in the store at ${store}`);
      rmSync(cwd, { recursive: true, force: true });
    },
  );
});
