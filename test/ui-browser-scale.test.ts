// The live UI at the scale of a run, in real headless Chromium: with 3,000 rollouts in the store the page says how
// many there are (not the 200 it shows), pages through them, and its search finds a rollout far outside the first
// page (the server searches); its charts, opened after the calls, draw them from the store; a link opens one
// rollout; the weight-update panel follows a pause, a held call and a resume; the table keeps to its panel.
// Screenshots go to .scratch/ui-screenshots/.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Browser, chromiumAvailable, CHROMIUM, type Page } from "./browser.ts";
import { testRolloutRecord } from "../store/test-support.ts";
import { playAgent, postJson, ROOT, startStack, type Stack } from "./helpers.ts";

const TOKEN = "ui-scale-token";
const SHOTS = join(ROOT, ".scratch", "ui-screenshots");
const auth = { authorization: `Bearer ${TOKEN}` };
const SEEDED = 3000;
const PLAYED = 2;
const TURNS = 3;
const T0 = Date.UTC(2026, 0, 1);
const seededId = (i: number) => `seed-${String(i).padStart(4, "0")}`;
const rowIds = (page: Page) =>
  page.evaluate<string[]>("[...document.querySelectorAll('#rollouts tbody tr')].map((tr) => tr.dataset.id)");

describe("live UI at run scale in headless Chromium", () => {
  let stack: Stack;
  let browser: Browser;
  let page: Page;
  const played: string[] = [];

  before(async () => {
    assert.ok(chromiumAvailable(), `${CHROMIUM} is missing: apt-get install -y chromium (.ci/run installs it)`);
    mkdirSync(SHOTS, { recursive: true });
    stack = await startStack({ gateway: { controlToken: TOKEN } });
    // A run's rollouts written through the store (milliseconds); seed-0007 is the needle, 2,990 rollouts down.
    const store = stack.gateway.context.store;
    await Promise.all(
      Array.from({ length: SEEDED }, (_, i) =>
        store.putRollout(
          testRolloutRecord({
            id: seededId(i),
            group:
              i === SEEDED - 1 ? `a group whose name is far too long for its column ${"x".repeat(300)}` : `g-${i % 50}`,
            harness: i === 7 ? "needle-harness" : "qwen-code",
            task: `task ${i}`,
            createdAt: T0 + i,
          }),
        ),
      ),
    );
    // Real calls, finished with rewards, before any page is open: the charts must find them in the store.
    for (let i = 0; i < PLAYED; i++) {
      const res = await postJson(`${stack.gateway.url}/api/rollouts`, { group: "played", harness: "agent" }, auth);
      const rollout = res.json as { id: string; key: string; base_urls: { openai: string } };
      await playAgent(rollout.base_urls.openai, TURNS, true, { authorization: `Bearer ${rollout.key}` });
      await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: i }, auth);
      played.push(rollout.id);
    }
    browser = await Browser.launch();
    page = await browser.newPage(1600, 1000);
    await page.goto(`${stack.gateway.url}/ui/#token=${TOKEN}`);
    await page.waitFor("document.querySelector('#conn').textContent === 'live'");
  });
  after(async () => {
    await browser?.close();
    await stack?.close();
  });

  test("the page shows 200 of the store's 3,002 rollouts, says so, and pages through them", async () => {
    const total = SEEDED + PLAYED;
    await page.waitFor("document.querySelectorAll('#rollouts tbody tr').length === 200");
    assert.match(await page.evaluate<string>("document.querySelector('#counters').textContent"), /^3,002 rollouts · /);
    assert.equal(await page.evaluate("document.querySelector('#page-info').textContent"), `1–200 of 3,002`);
    const first = await rowIds(page);
    assert.deepEqual(first.slice(0, 2), [...played].reverse());
    assert.equal(first[2], seededId(SEEDED - 1));
    await page.click("#page-older");
    await page.waitFor("document.querySelector('#page-info').textContent === '201–400 of 3,002'");
    const second = await rowIds(page);
    assert.equal(second.length, 200);
    assert.equal(second[0], seededId(SEEDED - 1 - 198));
    await page.click("#page-older");
    await page.waitFor("document.querySelector('#page-info').textContent === '401–600 of 3,002'");
    await page.click("#page-newer");
    await page.waitFor("document.querySelector('#page-info').textContent === '201–400 of 3,002'");
    assert.deepEqual(await rowIds(page), second);
    await page.click("#page-newer");
    await page.waitFor(`document.querySelector('#page-info').textContent === '1–200 of ${total.toLocaleString("en")}'`);
    assert.equal(await page.evaluate("document.querySelector('#page-newer').disabled"), true);
  });

  test("the table keeps to its panel: a long group ends in an ellipsis inside it", async () => {
    const spill = await page.evaluate<number>(
      `(() => { const pane = document.querySelector('#rollouts-pane').getBoundingClientRect();
        return Math.max(...[...document.querySelectorAll('#rollouts td, #rollouts th')].map((c) => c.getBoundingClientRect().right - pane.right)); })()`,
    );
    assert.ok(spill <= 0, `a cell ends ${spill}px past the panel`);
    await page.screenshot(join(SHOTS, "6-run-scale.png"));
  });

  test("the search runs on the server: it finds a rollout 2,990 rows down and counts the matches", async () => {
    await page.type("#filter", "needle");
    await page.waitFor(`document.querySelector('#page-info').textContent === '1–1 of 1'`);
    assert.deepEqual(await rowIds(page), [seededId(7)]);
    assert.match(await page.evaluate<string>("document.querySelector('#counters').textContent"), /^1 rollout matches/);
    await page.evaluate(
      "(() => { const f = document.querySelector('#filter'); f.value = 'g-7'; f.dispatchEvent(new Event('input')); })()",
    );
    // g-7 holds every 50th seeded rollout from seed-0007: 60 of them (g-7x groups do not exist).
    await page.waitFor(`document.querySelector('#page-info').textContent === '1–60 of 60'`);
    await page.evaluate(
      "(() => { const f = document.querySelector('#filter'); f.value = ''; f.dispatchEvent(new Event('input')); })()",
    );
    await page.waitFor(`document.querySelector('#page-info').textContent === '1–200 of 3,002'`);
  });

  test("charts opened after the calls draw them from the store", async () => {
    await page.waitFor(`document.querySelector('#chart-calls').dataset.calls === '${PLAYED * TURNS}'`);
    assert.equal(await page.evaluate("document.querySelector('#chart-calls .note')"), null);
    assert.ok((await page.evaluate<number>("document.querySelectorAll('#chart-calls .series-bar').length")) > 0);
    for (const chart of ["#chart-tokens", "#chart-overhead", "#chart-latency"])
      assert.ok(
        (await page.evaluate<number>(`document.querySelectorAll('${chart} .series-line').length`)) >= 1,
        `${chart} draws lines`,
      );
    assert.equal(await page.evaluate("document.querySelector('#chart-reward').dataset.finished"), String(PLAYED));
    // A call made now is added to the charts while the page is open.
    const res = await postJson(`${stack.gateway.url}/api/rollouts`, { group: "live" }, auth);
    const live = res.json as { key: string; base_urls: { openai: string } };
    await playAgent(live.base_urls.openai, 1, true, { authorization: `Bearer ${live.key}` });
    await page.waitFor(`document.querySelector('#chart-calls').dataset.calls === '${PLAYED * TURNS + 1}'`);
    // The newest page took the new rollout and the counts followed; the next page goes on where it left off.
    await page.waitFor("document.querySelector('#page-info').textContent === '1–201 of 3,003'");
    await page.click("#page-older");
    await page.waitFor("document.querySelector('#page-info').textContent === '202–401 of 3,003'");
    assert.equal((await rowIds(page))[0], seededId(SEEDED - 1 - 198));
    await page.click("#page-newer");
    await page.waitFor("document.querySelector('#page-info').textContent === '1–200 of 3,003'");
  });

  test("a rollout's link opens it, also one far outside the page shown", async () => {
    const id = seededId(7);
    await page.goto(`${stack.gateway.url}/ui/#rollout=${id}`);
    await page.waitFor(`document.querySelector('#detail-head h2 .id')?.textContent === '${id}'`);
    assert.match(
      await page.evaluate<string>("document.querySelector('#detail-head .facts').textContent"),
      /harness needle-harness/,
    );
    // Opening another from the table puts it in the address; going back opens the linked one again.
    await page.click(`#rollouts tbody tr[data-id="${played[0]}"]`);
    await page.waitFor(`location.hash === '#rollout=${played[0]}'`);
    await page.waitFor(`document.querySelectorAll('#tree .node[data-call]').length === ${TURNS}`);
    await page.evaluate("history.back()");
    await page.waitFor(`document.querySelector('#detail-head h2 .id')?.textContent === '${id}'`);
    assert.equal(
      await page.evaluate("document.querySelector('#detail-head h2 a.link').getAttribute('href')"),
      `#rollout=${id}`,
    );
  });

  test("the weight-update panel shows a pause, the call it holds, and the resume with its version", async () => {
    await page.waitFor("document.querySelector('#policy').dataset.paused === 'false'");
    assert.equal((await postJson(`${stack.gateway.url}/api/policy/pause`, { mode: "keep" }, auth)).status, 200);
    await page.waitFor("document.querySelector('#policy').dataset.paused === 'true'", 10_000);
    assert.match(await page.evaluate<string>("document.querySelector('#policy').textContent"), /paused \(keep\)/);
    const res = await postJson(`${stack.gateway.url}/api/rollouts`, { group: "held" }, auth);
    const rollout = res.json as { key: string; base_urls: { openai: string } };
    const held = playAgent(rollout.base_urls.openai, 1, true, { authorization: `Bearer ${rollout.key}` });
    await page.waitFor("document.querySelector('#policy .policy-holding b').textContent === '1'", 10_000);
    await page.screenshot(join(SHOTS, "7-policy-paused.png"));
    assert.equal((await postJson(`${stack.gateway.url}/api/policy/resume`, { version: "v2" }, auth)).status, 200);
    await held;
    await page.waitFor("document.querySelector('#policy').dataset.version === 'v2'", 10_000);
    await page.waitFor("document.querySelector('#policy .policy-held b')?.textContent === '1'", 10_000);
    const text = await page.evaluate<string>("document.querySelector('#policy').textContent");
    assert.match(text, /^serving/);
    assert.match(text, /pauses 1/);
    assert.match(text, /held 1 · wait \d/);
    assert.deepEqual(page.errors, []);
  });
});
