// Fixtures of real harness CLI sessions (issue 28): the calls `npm run harness-matrix -- --save-calls DIR` recorded,
// trimmed to what a golden test reads — each request body as the CLI sent it (and as it went upstream), the prompt
// ids the served model saw and the ids it sampled — gzipped under trajectory/fixtures/. Prompt ids are stored as the
// length shared with the previous call's prompt plus the rest, and each element of a body's arrays (messages, input
// items, tools, system blocks) once in a table the bodies point into, so a session of 14k-token prompts stays small.
// Make one: npx tsx trajectory/testing/cli-fixtures.ts DIR/qwen-code-compaction.json trajectory/fixtures/NAME.json.gz
import { readFileSync, writeFileSync } from "node:fs";
import { gunzipSync, gzipSync } from "node:zlib";
import type { CallRecord } from "../../store/records.ts";
import type { CallTokens } from "../types.ts";

interface FixtureCall {
  seq: number;
  api: string;
  status: CallRecord["status"];
  tools: number | null;
  /** The body as the CLI sent it, and as it went upstream (messages mode: the chat request the upstream rendered). */
  received: unknown;
  forwarded: unknown;
  prompt: CallRecord["prompt"] | null;
  /** Prompt ids: `shared` ids of the previous call's prompt, then `rest`. */
  shared: number;
  rest: number[];
  sampled: number[][];
}

export interface CliFixture {
  harness: string;
  session: string;
  mode: "messages" | "tokens";
  calls: FixtureCall[];
  /** Elements of the bodies' arrays; a body holds `{ $items: [indexes] }` in their place. */
  items: unknown[];
}

/** Puts each element of a body's top-level arrays in `table` (once) and the indexes in the body. */
function packBody(body: unknown, table: Map<string, number>): unknown {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return body;
  return Object.fromEntries(
    Object.entries(body).map(([key, value]) => {
      if (!Array.isArray(value)) return [key, value];
      const $items = value.map((item) => {
        const json = JSON.stringify(item);
        let at = table.get(json);
        if (at === undefined) table.set(json, (at = table.size));
        return at;
      });
      return [key, { $items }];
    }),
  );
}

/** A body as the CLI sent it. */
export function unpackBody(fixture: CliFixture, body: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(body as Record<string, unknown>)) {
    const refs = (value as { $items?: number[] } | null)?.$items;
    out[key] = Array.isArray(refs) ? refs.map((i) => fixture.items[i]) : value;
  }
  return out;
}

function commonPrefix(a: readonly number[], b: readonly number[]): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}

export function toFixture(records: readonly CallRecord[], meta: Omit<CliFixture, "calls" | "items">): CliFixture {
  let previous: readonly number[] = [];
  const table = new Map<string, number>();
  const calls = [...records]
    .sort((a, b) => a.seq - b.seq)
    .map((r) => {
      const ids = r.promptTokenIds ?? [];
      const shared = commonPrefix(previous, ids);
      previous = ids;
      return {
        seq: r.seq,
        api: r.api,
        status: r.status,
        tools: r.tools ?? null,
        received: packBody(JSON.parse(JSON.stringify(r.requestReceived)), table),
        forwarded: packBody(JSON.parse(JSON.stringify(r.requestForwarded)), table),
        prompt: r.prompt ?? null,
        shared,
        rest: ids.slice(shared),
        sampled: r.choices.map((c) => c.tokenIds),
      };
    });
  return { ...meta, calls, items: [...table.keys()].map((json) => JSON.parse(json) as unknown) };
}

export function loadCliFixture(name: string): CliFixture {
  const path = new URL(`../fixtures/${name}.json.gz`, import.meta.url);
  return JSON.parse(gunzipSync(readFileSync(path)).toString("utf8")) as CliFixture;
}

/** The fixture's calls as reconstruction takes them (logprobs were not kept: 0 for every sampled token). */
export function fixtureCalls(fixture: CliFixture): CallTokens[] {
  let previous: number[] = [];
  return fixture.calls.map((call) => {
    const promptIds = [...previous.slice(0, call.shared), ...call.rest];
    previous = promptIds;
    return {
      callSeq: call.seq,
      promptIds,
      choices: call.sampled.map((tokenIds, index) => ({
        index,
        tokenIds,
        logprobs: tokenIds.map(() => 0),
        finishReason: "stop",
      })),
      tokenSource: "upstream",
      tokenIssue: null,
      status: call.status,
      startedAt: 0,
      tools: call.tools,
      policyVersion: null,
      sampling: null,
      routingIssue: null,
    };
  });
}

if (process.argv[1]?.endsWith("cli-fixtures.ts")) {
  const [input, output] = process.argv.slice(2);
  if (!input || !output) {
    process.stderr.write("usage: cli-fixtures.ts <saved-calls.json> <fixture.json.gz>\n");
    process.exit(2);
  }
  const records = JSON.parse(readFileSync(input, "utf8")) as CallRecord[];
  const base = input
    .split("/")
    .pop()!
    .replace(/\.json$/, "");
  const mode = records.some((r) => r.prompt?.mode === "tokens") ? "tokens" : "messages";
  const fixture = toFixture(records, { harness: base, session: base, mode });
  writeFileSync(output, gzipSync(JSON.stringify(fixture), { level: 9 }));
  process.stdout.write(`${output}: ${records.length} calls\n`);
}
