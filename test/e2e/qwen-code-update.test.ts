// End to end (issue 44): the real Qwen Code CLI runs one prompt through rlgate (tokens prompt mode) in front of the
// simulated vLLM while weights are updated under it: each of its first two generations is caught running by a pause
// (abort, then keep) and a resume with a new version. Qwen must not notice: it exits 0, its shell tool ran, its final
// answer is the scripted one; every call is ok, aborted answers were continued, and every sampled token has a version.
// The session (prompt, script, settings) is test/e2e/qwen-code-session.ts, as qwen-code.test.ts runs it.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import { killGroup } from "../../runner/harness-local.ts";
import { createRollout, postJson, rolloutCalls, startStack, tempDir, type Stack } from "../helpers.ts";
import { requireInCi } from "../require-in-ci.ts";
import {
  FINAL_TEXT,
  PROMPT,
  PROOF_FILE,
  PROOF_TEXT,
  QWEN_CLI,
  QWEN_PRESENT,
  QWEN_SETTINGS,
  QWEN_TIMEOUT_MS,
  SCRIPT,
} from "./qwen-code-session.ts";

const cleanup: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const step of cleanup.reverse()) await step();
});

test(
  "Qwen Code through two weight updates that land mid-answer (abort, keep): one answer each, nothing lost",
  {
    timeout: QWEN_TIMEOUT_MS + 60_000,
    skip: requireInCi("the qwen CLI (a devDependency: npm install)", QWEN_PRESENT ? null : `qwen absent (${QWEN_CLI})`),
  },
  async () => {
    const stack: Stack = await startStack({
      sim: { script: SCRIPT, interTokenMs: 10 },
      gateway: { prompts: "tokens" },
    });
    cleanup.push(() => stack.close());
    const rollout = await createRollout(stack.gateway.url, { harness: "qwen-code", policy_version: "0" });
    const dir = tempDir("qwen-update");
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const workspace = join(dir, "workspace");
    const home = join(dir, "home");
    const tmp = join(dir, "tmp");
    for (const d of [workspace, join(home, ".qwen"), tmp]) mkdirSync(d, { recursive: true });
    writeFileSync(join(home, ".qwen", "settings.json"), JSON.stringify(QWEN_SETTINGS, null, 2));

    // The updates: each of the first two generations, once running in the sim, meets a pause and a resume.
    const modes = ["abort", "keep"] as const;
    let updates = 0;
    const updating: Promise<void>[] = [];
    stack.sim.events.on("request", (record: { path: string }) => {
      if (record.path !== "/v1/completions" || updates >= modes.length) return;
      const mode = modes[updates++]!;
      const version = String(updates);
      updating.push(
        (async () => {
          while (stack.sim.weights.running === 0) await new Promise((r) => setImmediate(r));
          assert.equal((await postJson(`${stack.gateway.url}/api/policy/pause`, { mode })).status, 200);
          assert.equal((await postJson(`${stack.gateway.url}/api/policy/resume`, { version })).status, 200);
        })(),
      );
    });

    const env: NodeJS.ProcessEnv = {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      HOME: home,
      TMPDIR: tmp,
      TERM: "dumb",
      NO_COLOR: "1",
      QWEN_CODE_SYSTEM_SETTINGS_PATH: join(dir, "no-system-settings.json"),
      QWEN_CODE_SYSTEM_DEFAULTS_PATH: join(dir, "no-system-defaults.json"),
      QWEN_CODE_DISABLE_PRECONNECT: "1",
      QWEN_DISABLE_AUTO_TITLE: "1",
      OPENAI_BASE_URL: rollout.base_urls.openai,
      OPENAI_API_KEY: "sk-rlgate-e2e",
      OPENAI_MODEL: "Qwen/Qwen3-8B",
    };
    const proc: ChildProcess = spawn(
      process.execPath,
      [QWEN_CLI, "-p", PROMPT, "--yolo", "--auth-type", "openai", "-o", "json"],
      { cwd: workspace, env, stdio: ["ignore", "pipe", "pipe"], detached: true },
    );
    cleanup.push(() => killGroup(proc));
    let stdout = "";
    let stderr = "";
    proc.stdout!.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    proc.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const timer = setTimeout(() => killGroup(proc), QWEN_TIMEOUT_MS);
    const code = await new Promise<number | null>((resolve) => proc.on("close", (c) => resolve(c)));
    clearTimeout(timer);
    await Promise.all(updating);

    const calls = (await rolloutCalls(stack.gateway.url, rollout.id)).sort((a, b) => a.seq - b.seq);
    const diag = `qwen exit ${code}\n${stdout.slice(-3000)}\n${stderr.slice(-3000)}\n${calls
      .map((c) => `#${c.seq} ${c.status} ${c.error ?? ""} ${JSON.stringify(c.policyUpdate ?? {})}`)
      .join("\n")}`;
    assert.equal(code, 0, diag);
    assert.equal(readFileSync(join(workspace, PROOF_FILE), "utf8"), `${PROOF_TEXT}\n`, diag);
    const result = (JSON.parse(stdout) as any[]).at(-1);
    assert.equal(result.is_error, false, diag);
    assert.equal(result.result.trim(), FINAL_TEXT, diag);
    assert.equal(updates, 2, diag);
    for (const call of calls) {
      assert.equal(call.status, "ok", diag);
      assert.notEqual(call.choices[0]!.finishReason, "abort", diag);
      const runs = call.policyUpdate?.versions ?? [{ start: 0, version: call.policyVersion ?? null }];
      assert.equal(runs[0]!.start, 0, diag);
      assert.ok(
        runs.every((r) => r.version !== null),
        `every sampled token has a version\n${diag}`,
      );
    }
    // Every answer the sim aborted was continued by the gateway.
    const aborts = stack.sim.weights.log.filter((e) => e.event === "abort").length;
    const continued = calls.reduce((n, c) => n + (c.policyUpdate?.continued ?? 0), 0);
    assert.equal(continued, aborts, diag);
    console.log(
      `qwen through updates: ${calls.length} calls, ${aborts} aborted and continued, versions ` +
        calls.map((c) => JSON.stringify(c.policyUpdate?.versions ?? c.policyVersion)).join(" "),
    );
  },
);
