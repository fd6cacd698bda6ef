// The live UI in real headless Chromium: a rollout appears while a harness session runs, opening it draws its prefix
// tree with breaks marked, clicking a branch shows that trajectory's tokens, a retried call shows as a dead leaf, and
// the page asks for the control token when the gateway has one; a trainer's logprob report shows as a point of the
// agreement charts, and a replay score run in the replay table. Screenshots go to .scratch/ui-screenshots/.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Browser, chromiumAvailable, CHROMIUM, type Page } from "./browser.ts";
import { TrainerClient } from "../clients/ts/index.ts";
import { startCore } from "../rl-core/core/index.ts";
import { startSim } from "../sim/index.ts";
import { playAgent, postJson, ROOT, runCli, startStack, tempDir, TOOLS, type Stack } from "./helpers.ts";

const TOKEN = "ui-browser-token";
const SHOTS = join(ROOT, ".scratch", "ui-screenshots");
const auth = { authorization: `Bearer ${TOKEN}` };

async function createRollout(gatewayUrl: string, body: Record<string, unknown>) {
  const res = await postJson(`${gatewayUrl}/api/rollouts`, body, auth);
  assert.equal(res.status, 201, res.text);
  return res.json as { id: string; key: string; base_urls: { openai: string } };
}

describe("live UI in headless Chromium", () => {
  let stack: Stack;
  let browser: Browser;
  let page: Page;

  before(async () => {
    assert.ok(chromiumAvailable(), `${CHROMIUM} is missing: apt-get install -y chromium (.ci/run installs it)`);
    mkdirSync(SHOTS, { recursive: true });
    // History repair off: the harness below drops its reasoning, and the re-serialization breaks are what is drawn.
    stack = await startStack({
      sim: { seed: 7 },
      gateway: { controlToken: TOKEN, repairHistory: false, grpcPort: 0 },
    });
    browser = await Browser.launch();
    page = await browser.newPage(1600, 1000);
  });
  after(async () => {
    await browser?.close();
    await stack?.close();
  });

  test("without the token the page asks for it, and connects once it is given", async () => {
    await page.goto(`${stack.gateway.url}/ui/`);
    await page.waitFor("!document.querySelector('#token-form').hidden");
    assert.equal(await page.evaluate("document.querySelector('#conn').textContent"), "needs token");
    await page.type("#token-input", TOKEN);
    await page.click("#token-form button");
    await page.waitFor("document.querySelector('#conn').textContent === 'live'");
    assert.equal(await page.evaluate("document.querySelector('#token-form').hidden"), true);
  });

  test("a rollout appears in the table while its harness session runs, and its call count follows", async () => {
    const rollout = await createRollout(stack.gateway.url, {
      group: "g-live",
      harness: "scripted-agent",
      task: "count files",
    });
    const row = `#rollouts tbody tr[data-id="${rollout.id}"]`;
    await page.waitFor(`document.querySelector('${row}')`);
    // The harness session, one call at a time: after each call the page shows it, without a reload, while the
    // session goes on. The harness drops its reasoning from the history it sends back, so the history is
    // re-serialized (breaks).
    const messages: Array<Record<string, unknown>> = [
      { role: "system", content: "You are a coding agent." },
      { role: "user", content: "How many files are here?" },
    ];
    for (let turn = 0; turn < 3; turn++) {
      const res = await postJson(
        `${rollout.base_urls.openai}/chat/completions`,
        { messages, tools: TOOLS },
        { authorization: `Bearer ${rollout.key}` },
      );
      assert.equal(res.status, 200, res.text);
      const message = res.json.choices[0].message;
      messages.push({
        role: "assistant",
        content: message.tool_calls ? null : message.content,
        ...(message.tool_calls ? { tool_calls: message.tool_calls } : {}),
      });
      for (const call of message.tool_calls ?? [])
        messages.push({ role: "tool", tool_call_id: call.id, content: `out ${turn}` });
      await page.waitFor(`document.querySelector('${row} td:nth-child(6)').textContent === '${turn + 1}'`);
      if (turn === 0) await page.screenshot(join(SHOTS, "1-rollout-live.png"));
    }
    await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 1 }, auth);
    await page.waitFor(`document.querySelector('${row} .status').textContent === 'ok'`);
    // The reconstruction's figures reach the row: three trajectories, two re-serialization breaks.
    await page.waitFor(`document.querySelector('${row} td:nth-child(7)').textContent === '3'`);
    assert.equal(await page.evaluate(`document.querySelector('${row} td:nth-child(8)').textContent`), "2");
    // The filter hides rows that do not match.
    await page.type("#filter", "no-such-group");
    await page.waitFor(`!document.querySelector('${row}')`);
    const filter = (text: string) =>
      page.evaluate(
        `(() => { const f = document.querySelector('#filter'); f.value = '${text}'; f.dispatchEvent(new Event('input')); })()`,
      );
    await filter("g-live");
    await page.waitFor(`document.querySelector('${row}')`);
    assert.equal(await page.evaluate("document.querySelectorAll('#rollouts tbody tr').length"), 1);
    await filter("");

    // Opening it draws the tree: one box per call, the two breaks marked with their kind.
    await page.click(row);
    await page.waitFor(
      `document.querySelectorAll('#tree .node[data-call]').length === 3 && document.querySelector('#tree .node.leaf[data-trajectory^="${rollout.id}:"]')`,
    );
    assert.equal(await page.evaluate("document.querySelectorAll('#tree [data-break=reserialization]').length"), 2);
    assert.equal(
      await page.evaluate("document.querySelectorAll('#tree .edge.break[data-kind=reserialization]').length"),
      2,
    );
    assert.equal(await page.evaluate("document.querySelectorAll('#tree .node.leaf').length"), 3);

    // Clicking a branch (the second leaf) shows that trajectory's tokens: every sampled position, coloured, with text.
    const trajectories = (
      (await (
        await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}/trajectories`, { headers: auth })
      ).json()) as any
    ).trajectories;
    const second = trajectories[1];
    await page.click(`#tree .node[data-trajectory="${second.trajectory_id}"]`);
    await page.waitFor(
      `document.querySelector('#tokens-title').dataset.trajectory === '${second.trajectory_id}' && document.querySelectorAll('#tokens .tok').length > 0`,
    );
    const sampledPositions = second.spans.reduce((n: number, s: any) => n + s.end - s.start, 0);
    assert.equal(await page.evaluate("document.querySelectorAll('#tokens .tok.sampled').length"), sampledPositions);
    const trainedShown = await page.evaluate(
      "[...document.querySelectorAll('#tokens .tok')].filter((t) => t.dataset.mask === '1').length",
    );
    assert.equal(trainedShown, second.loss_mask.filter((m: number) => m === 1).length);
    assert.ok(
      await page.evaluate(
        "[...document.querySelectorAll('#tokens .tok.sampled')].every((t) => t.style.background !== '')",
      ),
      "sampled tokens are coloured",
    );
    await page.hover("#tokens .tok.sampled.trained");
    const tip = await page.waitFor<string>(
      "!document.querySelector('#tip').hidden && document.querySelector('#tip').textContent",
    );
    assert.match(
      tip,
      /id \d+ {2}position \d+\nsampled by call #\d: trained \(mask 1\)\nlogprob -?\d+\.\d{4} {2}p \d\.\d{3}/,
    );
    // The call inspector shows what the harness sent and what rlgate forwarded.
    await page.waitFor("document.querySelector('#inspector-body details')");
    const inspector = await page.evaluate<string>("document.querySelector('#inspector-body').textContent");
    assert.match(inspector, /request as received/);
    assert.match(inspector, /request as forwarded/);
    assert.match(inspector, /added by rlgate when forwarding: .*return_token_ids/);
    await page.screenshot(join(SHOTS, "2-tree-and-tokens.png"));
    await page.evaluate("document.querySelector('input[name=colour][value=mask]').click()");
    await page.waitFor("document.querySelector('#tokens-legend').textContent.includes('trained here (mask 1)')");
    await page.screenshot(join(SHOTS, "3-loss-mask.png"));
    assert.deepEqual(page.errors, []);
  });

  test("a retried call leaves a dead leaf, drawn as one, with the retry marked", async () => {
    const rollout = await createRollout(stack.gateway.url, { group: "g-retry", harness: "retrying-agent" });
    const headers = { authorization: `Bearer ${rollout.key}` };
    const first = {
      messages: [
        { role: "system", content: "You are a coding agent." },
        { role: "user", content: "How many files are here?" },
      ],
      tools: TOOLS,
    };
    // The same prompt twice with different sampling seeds: the first answer is abandoned.
    assert.equal(
      (await postJson(`${rollout.base_urls.openai}/chat/completions`, { ...first, seed: 11 }, headers)).status,
      200,
    );
    await playAgent(rollout.base_urls.openai, 2, true, headers);
    await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 0 }, auth);
    await page.click(`#rollouts tbody tr[data-id="${rollout.id}"]`);
    await page.waitFor(`document.querySelector('#tree .node.leaf[data-trajectory^="${rollout.id}:"]')`);
    assert.equal(await page.evaluate("document.querySelectorAll('#tree .node[data-fate=dead]').length"), 1);
    assert.equal(await page.evaluate("document.querySelectorAll('#tree [data-break=retry]').length"), 1);
    await page.click("#tree .node[data-fate=dead]");
    await page.waitFor("document.querySelector('#tokens').textContent.includes('A dead leaf')");
    await page.screenshot(join(SHOTS, "4-dead-leaf.png"));
    assert.deepEqual(page.errors, []);
  });

  test("a trainer's logprob report shows as points of the agreement charts; a replay score run in the replay table", async () => {
    assert.equal(
      await page.evaluate("document.querySelector('#agreement-empty').hidden"),
      false,
      "before any report the panel says how figures get there",
    );
    // Two harnesses in one group, then a core and a trainer that reports its logprobs three times, drifting more.
    for (const harness of ["qwen-code", "claude-code"]) {
      const rollout = await createRollout(stack.gateway.url, {
        group: "g-agree",
        harness,
        metadata: { group_size: 2 },
      });
      await playAgent(rollout.base_urls.openai, 2, true, { authorization: `Bearer ${rollout.key}` });
      await postJson(
        `${stack.gateway.url}/api/rollouts/${rollout.id}/finish`,
        { reward: harness === "qwen-code" ? 1 : 0 },
        auth,
      );
    }
    const core = await startCore({
      gateways: [stack.gateway.grpc!.address],
      gatewayToken: TOKEN,
      port: 0,
      dataDir: tempDir("core-ui"),
      batchTimeoutMs: 100,
    });
    const trainer = new TrainerClient(core.address);
    try {
      const ac = new AbortController();
      let batch;
      for await (const b of trainer.batches({ signal: ac.signal })) {
        batch = b;
        ac.abort();
      }
      for (const [i, drift] of [0.02, 0.05, 0.12].entries()) {
        const mine = batch!.logprobs.map((lp, t) => lp - (drift * ((t * 7919) % 13)) / 13);
        await trainer.reportLogprobs(batch!.batchId, mine, { ack: i === 2 });
        // One point per harness and one for all of them, per report.
        await page.waitFor(`document.querySelectorAll('#chart-pearson .agreement-point').length === ${3 * (i + 1)}`);
      }
    } finally {
      trainer.close();
      await core.close();
    }
    assert.equal(await page.evaluate("document.querySelector('#agreement-empty').hidden"), true);
    const legend = await page.evaluate<string>("document.querySelector('#agreement-legend').textContent");
    assert.equal(legend, "all harnessesclaude-codeqwen-code");
    const latest = await page.evaluate<string>("document.querySelector('#agreement-latest').textContent");
    assert.match(
      latest,
      /^latest report, all harnesses \(.*, batch \d+, \d+ tokens\): r 0\.\d{4} · p99 \|Δlogp\| 0\.\d+/,
    );
    assert.equal(await page.evaluate("document.querySelectorAll('#chart-p99 .agreement-point').length"), 9);
    assert.equal(await page.evaluate("document.querySelectorAll('#chart-k3 polyline').length"), 3);

    // A replay run against a noisier server: its row appears, and the drift chart draws one bar per completion.
    const noisy = await startSim({ port: 0, seed: 7, logprobNoise: 0.3 });
    try {
      const run = await runCli([
        "replay",
        "score",
        "--group",
        "g-agree",
        "--upstream",
        noisy.url,
        "--gateway",
        stack.gateway.url,
        "--token",
        TOKEN,
        "--max-p99",
        "0.05",
        "--json",
      ]);
      assert.equal(run.code, 3, run.stderr);
      const completions = JSON.parse(run.stdout).completions.length;
      await page.waitFor("document.querySelectorAll('#replay-table tbody tr').length === 1");
      const row = await page.evaluate<string>("document.querySelector('#replay-table tbody tr').textContent");
      assert.ok(row.includes(`${noisy.url.replace(/^http:\/\//, "")}2${completions}`), row);
      assert.match(row, /drift > 0\.05/);
      await page.waitFor(`document.querySelectorAll('#chart-drift .drift-bar').length === ${completions}`);
    } finally {
      await noisy.close();
    }
    await page.evaluate("window.scrollTo(0, 0)");
    await page.screenshot(join(SHOTS, "5-agreement-and-replays.png"));
    assert.deepEqual(page.errors, []);
  });
});
