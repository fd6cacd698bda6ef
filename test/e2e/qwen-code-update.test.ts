// End to end (issue 44): the real Qwen Code CLI runs one prompt through rlgate (tokens prompt mode) in front of the
// simulated vLLM while weights are updated under it: each of its first two generations is caught running by a pause
// (abort, then keep) and a resume with a new version. Qwen must not notice: it exits 0, its shell tool ran, its final
// answer is the scripted one; every call is ok, aborted answers were continued, and every sampled token has a version.
// The session (prompt, script, settings) is test/e2e/qwen-code-session.ts, as qwen-code.test.ts runs it.
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import { harnessDirs, killLiveRuns, runCli } from "../../runner/harness-local.ts";
import { QWEN_CODE } from "../../runner/harnesses/qwen-code.ts";
import { createRollout, postJson, rolloutCalls, startStack, type Stack } from "../helpers.ts";
import { cliSkip, launch } from "./harnesses.ts";
import { FINAL_TEXT, PROMPT, PROOF_FILE, PROOF_TEXT, QWEN_TIMEOUT_MS, SCRIPT } from "./qwen-code-session.ts";

const cleanup: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const step of cleanup.reverse()) await step();
});

test(
  "Qwen Code through two weight updates that land mid-answer (abort, keep): one answer each, nothing lost",
  {
    timeout: QWEN_TIMEOUT_MS + 60_000,
    skip: cliSkip(QWEN_CODE),
  },
  async () => {
    const stack: Stack = await startStack({
      sim: { script: SCRIPT, interTokenMs: 10 },
      gateway: { prompts: "tokens" },
    });
    cleanup.push(() => stack.close());
    const rollout = await createRollout(stack.gateway.url, { harness: "qwen-code", policy_version: "0" });
    const dirs = harnessDirs("qwen-update");
    cleanup.push(() => rmSync(dirs.dir, { recursive: true, force: true }));

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

    // The registry's Qwen Code launch (its settings and switches), its answer as JSON.
    const qwen = launch(QWEN_CODE, dirs, rollout, PROMPT, { model: "Qwen/Qwen3-8B" });
    cleanup.push(killLiveRuns);
    const { code, stdout, stderr } = await runCli(qwen.command, [...qwen.args, "-o", "json"], {
      cwd: dirs.workspace,
      env: qwen.env,
      timeoutMs: QWEN_TIMEOUT_MS,
    });
    await Promise.all(updating);

    const calls = (await rolloutCalls(stack.gateway.url, rollout.id)).sort((a, b) => a.seq - b.seq);
    const diag = `qwen exit ${code}\n${stdout.slice(-3000)}\n${stderr.slice(-3000)}\n${calls
      .map((c) => `#${c.seq} ${c.status} ${c.error ?? ""} ${JSON.stringify(c.policyUpdate ?? {})}`)
      .join("\n")}`;
    assert.equal(code, 0, diag);
    assert.equal(readFileSync(join(dirs.workspace, PROOF_FILE), "utf8"), `${PROOF_TEXT}\n`, diag);
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
