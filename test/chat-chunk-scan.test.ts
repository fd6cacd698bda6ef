// The streamed chat chunk scan against JSON.parse: over the sim's real streams and many generated and mutated chunks,
// the scan's object equals the parsed chunk (logprob entries reduced to their number, key order and -0 included) or
// the scan declines. Then whole streams relayed with and without the scan give the harness and the record the same.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { NativeStreamEvents } from "../gateway/relay/native-events.ts";
import { SseParser } from "../gateway/sse-parser.ts";
import { parseChatResponseScanned, parseReadingPromptIds, scanChatChunk } from "../gateway/upstream/chat-chunk-scan.ts";
import type { Json } from "../gateway/upstream/fields.ts";
import type { ApiCodec, HarnessWants } from "../gateway/upstream/flavor.ts";
import { RecentIdLists } from "../gateway/upstream/id-list.ts";
import { vllmFlavor } from "../gateway/upstream/vllm.ts";
import { startSim, type SimServer } from "../sim/index.ts";

/** What the scan promises: the parsed chunk with each logprob entry reduced to `{ logprob }`. */
function reduced(parsed: Json): Json {
  const choices = Array.isArray(parsed["choices"]) ? (parsed["choices"] as Json[]) : [];
  for (const choice of choices) {
    const logprobs = choice["logprobs"] as Json | null;
    if (logprobs && Array.isArray(logprobs["content"])) {
      choice["logprobs"] = { content: (logprobs["content"] as Json[]).map((e) => ({ logprob: e["logprob"] })) };
    }
  }
  return parsed;
}

const WANTS: HarnessWants[] = [
  { promptTokenIds: false, tokenIds: false, logprobs: false },
  { promptTokenIds: true, tokenIds: true, logprobs: false },
  { promptTokenIds: true, tokenIds: false, logprobs: false },
  { promptTokenIds: false, tokenIds: true, logprobs: false },
];

/** JSON.parse of a text a scan accepted: it must parse. */
function parseAccepted(text: string): Json {
  try {
    return JSON.parse(text) as Json;
  } catch {
    assert.fail(`the scan accepted text JSON.parse refuses: ${text}`);
  }
}

/** What a scan read equals the parsed text with its entries reduced, key order included. */
function assertReduced(scanned: Json, parsed: Json, text: string): void {
  const expected = reduced(parsed);
  assert.deepStrictEqual(scanned, expected, text);
  assert.equal(JSON.stringify(scanned), JSON.stringify(expected), `key order: ${text}`);
}

/** Prompt id lists the scans compare with (one rollout's): every check reads through them. */
const RECENT = new RecentIdLists();

/** Checks one text through the vLLM codec's scan for `wants`; returns whether the scan accepted it. */
function check(text: string, wants: HarnessWants = WANTS[0]!): boolean {
  const scanned = vllmFlavor.chat.scanChunk!(text, wants, RECENT);
  if (scanned === null) return false;
  const parsed = parseAccepted(text);
  // The harness's text first: harnessChunk may change the parsed object.
  assert.equal(scanned.harnessText, vllmFlavor.chat.harnessChunk(text, structuredClone(parsed), wants), text);
  assertReduced(scanned.chunk, parsed, text);
  return true;
}

/** A small deterministic generator (the failures must be reproducible). */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const PIECES = [
  "a",
  "é",
  "世界",
  "🎉",
  '"',
  "\\",
  "\n",
  "\t",
  "\u0000",
  "\u001f",
  "\u2028",
  "]}",
  "{[",
  "/",
  "\ud800",
  " ",
];
/** A JSON string token, written the way JSON.stringify does or with escapes it does not use. */
function stringToken(rand: () => number): string {
  let value = "";
  const n = Math.floor(rand() * 6);
  for (let i = 0; i < n; i++) value += PIECES[Math.floor(rand() * PIECES.length)];
  const token = JSON.stringify(value);
  return rand() < 0.3 ? token.replace(/[a/]/g, (c) => (c === "a" ? "\\u0061" : "\\/")) : token;
}
const NUMBERS = ["-0.0", "-0", "0", "-9999.0", "1e-05", "-1.5E+2", "-0.47322380542755127", "-1e400", "12", "-3.0e-7"];
function numberToken(rand: () => number): string {
  return rand() < 0.5 ? NUMBERS[Math.floor(rand() * NUMBERS.length)]! : String(-rand() * 20);
}
function intsToken(rand: () => number): string {
  const n = Math.floor(rand() * 4);
  return `[${Array.from({ length: n }, () => Math.floor(rand() * 200_000)).join(",")}]`;
}
function entry(rand: () => number, top: boolean): string {
  const base = `{"token":${stringToken(rand)},"logprob":${numberToken(rand)},"bytes":${rand() < 0.1 ? "null" : intsToken(rand)}`;
  if (top) return `${base}}`;
  const tops = Array.from({ length: Math.floor(rand() * 3) }, () => entry(rand, true)).join(",");
  return `${base},"top_logprobs":[${tops}]}`;
}
function toolCalls(rand: () => number): string {
  const fns = [
    `{"name":${stringToken(rand)}}`,
    `{"arguments":${stringToken(rand)}}`,
    `{"name":${stringToken(rand)},"arguments":${stringToken(rand)}}`,
    "{}",
    `{"arguments":${stringToken(rand)},"name":${stringToken(rand)}}`,
  ];
  const call = (i: number) => {
    const named = rand() < 0.4 ? `"id":${stringToken(rand)},"type":${stringToken(rand)},` : "";
    return `{${named}"index":${i},"function":${fns[Math.floor(rand() * fns.length)]}}`;
  };
  return Array.from({ length: 1 + Math.floor(rand() * 2) }, (_, i) => call(i)).join(",");
}
function choice(rand: () => number, index: number): string {
  const deltas = [
    "{}",
    `{"role":"assistant","content":""}`,
    `{"content":${stringToken(rand)}}`,
    `{"reasoning_content":${stringToken(rand)}}`,
    `{"role":${stringToken(rand)},"reasoning_content":${stringToken(rand)}}`,
    // vLLM >= 0.17 streams reasoning as `reasoning`; 0.12–0.16 could write both names (declined, then parsed).
    `{"reasoning":${stringToken(rand)}}`,
    `{"role":${stringToken(rand)},"reasoning":${stringToken(rand)}}`,
    `{"reasoning":${stringToken(rand)},"reasoning_content":${stringToken(rand)}}`,
    `{"tool_calls":[${toolCalls(rand)}]}`,
    `{"tool_calls":[${toolCalls(rand)}]}`,
    `{"content":null,"tool_calls":[${toolCalls(rand)}]}`,
  ];
  const delta = deltas[Math.floor(rand() * deltas.length)];
  const entries = Array.from({ length: 1 + Math.floor(rand() * 2) }, () => entry(rand, false)).join(",");
  const logprobs = rand() < 0.2 ? "null" : rand() < 0.1 ? `{"content":[]}` : `{"content":[${entries}]}`;
  const finish = rand() < 0.7 ? "null" : stringToken(rand);
  let out = `{"index":${index},"delta":${delta},"logprobs":${logprobs},"finish_reason":${finish}`;
  if (rand() < 0.4) out += `,"stop_reason":${rand() < 0.5 ? "null" : rand() < 0.5 ? "151645" : stringToken(rand)}`;
  if (rand() < 0.8) out += `,"token_ids":${intsToken(rand)}`;
  return `${out}}`;
}
function chunk(rand: () => number): string {
  const choices = Array.from({ length: Math.floor(rand() * 3) }, (_, i) => choice(rand, i)).join(",");
  let out = `{"id":${stringToken(rand)},"object":"chat.completion.chunk","created":${Math.floor(rand() * 2e9)},`;
  out += `"model":${stringToken(rand)},"choices":[${choices}]`;
  if (rand() < 0.3) out += `,"prompt_token_ids":${rand() < 0.2 ? "null" : intsToken(rand)}`;
  if (rand() < 0.2) out += `,"usage":null`;
  return `${out}}`;
}
/** One edit of a valid text: what a broken or unexpected upstream could send. */
function mutate(text: string, rand: () => number): string {
  const at = Math.floor(rand() * text.length);
  const chars = ['"', "\\", ",", "}", "]", "{", "[", " ", "0", "-", "e", ".", ":", "\n", "x", "\u0001"];
  const c = chars[Math.floor(rand() * chars.length)]!;
  const kind = rand();
  if (kind < 0.33) return text.slice(0, at) + text.slice(at + 1);
  if (kind < 0.66) return text.slice(0, at) + c + text.slice(at);
  return text.slice(0, at) + c + text.slice(at + 1);
}

test("generated chunks: the scan equals JSON.parse (entries reduced) or declines", () => {
  const rand = rng(18);
  let accepted = 0;
  for (let i = 0; i < 20_000; i++) if (check(chunk(rand), WANTS[i % WANTS.length])) accepted++;
  // Most generated chunks are in vLLM's layout; the others (a null content beside tool calls...) are declined.
  assert.ok(accepted > 10_000, `accepted ${accepted}`);
});

/** How many of `count` texts `make` writes, each edited once or twice, `accepts` (which checks each) refused. */
function refusedMutations(
  seed: number,
  count: number,
  make: (rand: () => number) => string,
  accepts: (text: string, i: number) => boolean,
): number {
  const rand = rng(seed);
  let refused = 0;
  for (let i = 0; i < count; i++) {
    let text = make(rand);
    for (let k = 1 + Math.floor(rand() * 2); k > 0; k--) text = mutate(text, rand);
    if (!accepts(text, i)) refused++;
  }
  return refused;
}

test("mutated chunks: never a result JSON.parse would not give", () => {
  assert.ok(refusedMutations(19, 30_000, chunk, (text, i) => check(text, WANTS[i % WANTS.length])) > 0);
});

test("chunks of interleaved streams, their heads compared with the last one read: as JSON.parse, generated and mutated", () => {
  // A head is the text up to the choices' `[`: a string's quotes are escaped, so the key is found where it stands.
  const headOf = (text: string) => text.slice(0, text.indexOf('"choices":[') + '"choices":['.length);
  const rand = rng(23);
  const heads = [chunk(rand), chunk(rand), chunk(rand)].map(headOf);
  let accepted = 0;
  for (let i = 0; i < 10_000; i++) {
    const own = chunk(rand);
    let text = heads[Math.floor(rand() * heads.length)] + own.slice(headOf(own).length);
    if (rand() < 0.3) text = mutate(text, rand);
    if (check(text, WANTS[i % WANTS.length])) accepted++;
  }
  assert.ok(accepted > 4_000, `accepted ${accepted}`);
});

/** parseReadingPromptIds gives what JSON.parse gives (key order included), or throws where it throws. */
function assertParsedAlike(text: string): void {
  let expected: unknown;
  try {
    expected = JSON.parse(text);
  } catch {
    assert.throws(() => parseReadingPromptIds(text, RECENT), text);
    return;
  }
  const read = parseReadingPromptIds(text, RECENT);
  assert.deepStrictEqual(read, expected, text);
  assert.equal(JSON.stringify(read), JSON.stringify(expected), `key order: ${text}`);
}

/** `count` texts `make` writes, each checked by assertParsedAlike as written and once edited once or twice. */
function assertParsedAlikeOver(seed: number, count: number, make: (rand: () => number) => string): void {
  const rand = rng(seed);
  for (let i = 0; i < count; i++) {
    let text = make(rand);
    assertParsedAlike(text);
    for (let k = 1 + Math.floor(rand() * 2); k > 0; k--) text = mutate(text, rand);
    assertParsedAlike(text);
  }
}

test("chunks parsed whole with their prompt ids read apart: as JSON.parse, generated and mutated", () => {
  assertParsedAlikeOver(31, 10_000, chunk);
  // The key inside a choice as well as at the top: each keeps its own value.
  assertParsedAlike('{"choices":[{"x":1,"prompt_token_ids":[1,2]}],"prompt_token_ids":[3,4]}');
  assertParsedAlike('{"choices":[{"x":1,"prompt_token_ids":[1,2]}]}');
  assertParsedAlike('{"a":1,"prompt_token_ids":[3,4],"b":{"prompt_token_ids":null}}');
  assertParsedAlike('{"prompt_token_ids":null,"b":{"c":1,"prompt_token_ids":[1,2]}}');
  assertParsedAlike('{"a":1,"kv_transfer_params":{"prompt_token_ids":[1,2]}}');
  // A completion's prompt ids are its one choice's.
  const completion = '{"id":"c","choices":[{"index":0,"text":"hi","prompt_token_ids":[5,6,7],"token_ids":[8]}]}';
  assertParsedAlike(completion);
  const read = parseReadingPromptIds(completion, RECENT) as { choices: Array<{ prompt_token_ids: number[] }> };
  assert.deepEqual(read.choices[0]!.prompt_token_ids, [5, 6, 7]);
});

test("a reasoning delta is read under either name, as JSON.parse reads it", () => {
  const text = (key: string) =>
    `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"${key}":"hm"},"logprobs":null,"finish_reason":null,"token_ids":[7]}]}`;
  for (const key of ["reasoning", "reasoning_content"]) {
    assert.ok(check(text(key)), key);
    const delta = (scanChatChunk(text(key), { tokenIds: true, promptTokenIds: true })!.chunk["choices"] as Json[])[0]![
      "delta"
    ];
    assert.deepStrictEqual(delta, { [key]: "hm" });
  }
});

test("what the scan declines: whitespace, other keys, duplicate keys, usage, errors", () => {
  const ok = '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[]}';
  assert.ok(check(ok));
  assertDeclined([
    ok.replace(",", ", "),
    ok.replace('"choices":[]', '"choices":[],"system_fingerprint":"x"'),
    ok.replace('"model":"m"', '"model":"m","model":"n"'),
    ok.replace("[]}", '[],"usage":{"prompt_tokens":1}}'),
    '{"error":{"message":"boom"}}',
    ok.replace('"created":1', '"created":1.5'),
    ok.replace('"created":1', '"created":12345678901234567'),
    ok + " ",
    ok.slice(0, -1),
  ]);
});

function assertDeclined(texts: string[]): void {
  for (const text of texts) assert.equal(scanChatChunk(text, { tokenIds: true, promptTokenIds: true }), null, text);
}

test("a chunk carrying routed experts is declined: the assembler skips their look-up for scanned chunks", () => {
  const choice = '{"index":0,"delta":{"content":"a"},"logprobs":null,"finish_reason":null,"token_ids":[5]}';
  const ok = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[${choice}]}`;
  assert.ok(check(ok));
  assertDeclined([
    ok.replace('"token_ids":[5]}', '"token_ids":[5],"routed_experts":"AAAA"}'),
    ok.replace('"token_ids":[5]}', '"token_ids":[5],"sglext":{"routed_experts":"AAAA"}}'),
    ok.replace("]}]}", ']}],"sglext":{"routed_experts":"AAAA"}}'),
    ok.replace("]}]}", ']}],"sgl_ext":{"routed_experts":"AAAA"}}'),
  ]);
});

describe("the sim's streams relayed with and without the scan", () => {
  let sim: SimServer;
  test("a harness that asked for logprobs gets them parsed: the scan is not used", () => {
    const text = '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[]}';
    assert.equal(vllmFlavor.chat.scanChunk!(text, { promptTokenIds: false, tokenIds: false, logprobs: true }), null);
    assert.notEqual(vllmFlavor.chat.scanChunk!(text, WANTS[0]!), null);
  });
  let legacySim: SimServer;
  before(async () => {
    sim = await startSim({ port: 0 });
    legacySim = await startSim({ port: 0, reasoningField: "reasoning_content" });
  });
  after(async () => {
    await sim.close();
    await legacySim.close();
  });

  const withoutScan: ApiCodec = { ...vllmFlavor.chat, scanChunk: undefined };
  const SHELL = { type: "function", function: { name: "shell", parameters: { type: "object" } } };
  const requests: Record<string, Json> = {
    plain: {},
    tools: { tools: [SHELL] },
    top: { top_logprobs: 2 },
    two: { n: 2 },
    usage: { stream_options: { include_usage: true } },
  };

  function relay(codec: ApiCodec, stream: Buffer, size: number, wants: HarnessWants) {
    const parser = new SseParser();
    const events = new NativeStreamEvents(codec, wants, () => {});
    let out = "";
    for (let i = 0; i < stream.length; i += size) out += events.relay(parser.push(stream.subarray(i, i + size))) ?? "";
    const response = events.assembler.assembled();
    codec.stripWhole(response, wants);
    return { out, response, captures: events.assembler.captures(), prompt: events.assembler.promptTokenIds };
  }

  const cases = Object.entries(requests).map(([name, extra]) => ({ name, extra, legacy: false }));
  cases.push({ name: "reasoning_content (vLLM <= 0.16)", extra: {}, legacy: true });
  for (const { name, extra, legacy } of cases) {
    test(name, async () => {
      const server = legacy ? legacySim : sim;
      const body = {
        model: "Qwen/Qwen3-8B",
        messages: [{ role: "user", content: `What is in this directory? (${name})` }],
        stream: true,
        return_token_ids: true,
        logprobs: true,
        ...extra,
      };
      const res = await fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const stream = Buffer.from(await res.arrayBuffer());
      const reasoningKey = server === sim ? '"reasoning":' : '"reasoning_content":';
      assert.ok(stream.toString().includes(reasoningKey), reasoningKey);
      // Every chunk the sim writes is in the scan's layout but the final usage object, which is parsed.
      const declined: string[] = [];
      for (const event of new SseParser().push(stream)) {
        const data = event.data;
        if (data === null || data === "[DONE]") continue;
        if (!WANTS.every((w) => check(data, w))) declined.push(data);
      }
      assert.deepStrictEqual(
        declined.filter((data) => !data.includes('"usage":{')),
        [],
      );
      for (const wants of [...WANTS, { promptTokenIds: false, tokenIds: false, logprobs: true }]) {
        for (const size of [stream.length, 1, 7, 100]) {
          assert.deepStrictEqual(relay(vllmFlavor.chat, stream, size, wants), relay(withoutScan, stream, size, wants));
        }
      }
    });
  }
});

describe("whole responses: logprob entries scanned, the rest parsed", () => {
  /** Checks one whole response's text; returns whether the scan accepted it. */
  function checkWhole(text: string): boolean {
    const scanned = parseChatResponseScanned(text, RECENT);
    if (scanned === null) return false;
    assertReduced(scanned, parseAccepted(text), text);
    return true;
  }
  function plainEntry(rand: () => number): string {
    return `{"token":${stringToken(rand)},"logprob":${numberToken(rand)},"bytes":${rand() < 0.1 ? "null" : intsToken(rand)},"top_logprobs":[]}`;
  }
  function wholeChoice(rand: () => number, index: number): string {
    const messages = [
      `{"role":"assistant","content":${stringToken(rand)},"refusal":null,"tool_calls":[]}`,
      `{"role":"assistant","reasoning":${stringToken(rand)},"content":null,"tool_calls":[{"id":${stringToken(rand)},"type":"function","function":{"name":${stringToken(rand)},"arguments":${stringToken(rand)}}}]}`,
      `{"role":"assistant","content":${stringToken(rand)},"logprobs":${stringToken(rand)}}`,
    ];
    const n = Math.floor(rand() * 4);
    const entries = Array.from({ length: n }, () => (rand() < 0.9 ? plainEntry(rand) : entry(rand, false))).join(",");
    const logprobs = rand() < 0.05 ? "null" : `{"content":[${entries}]}`;
    const ids = rand() < 0.9 ? n : Math.floor(rand() * 4);
    const idsText = `[${Array.from({ length: ids }, () => Math.floor(rand() * 200_000)).join(",")}]`;
    const message = messages[Math.floor(rand() * messages.length)];
    let out = `{"index":${index},"message":${message},"logprobs":${logprobs},"finish_reason":"stop","stop_reason":null`;
    if (rand() < 0.9) out += `,"token_ids":${idsText}`;
    return `${out}}`;
  }
  function whole(rand: () => number): string {
    const choices = Array.from({ length: Math.floor(rand() * 3) }, (_, i) => wholeChoice(rand, i)).join(",");
    return (
      `{"id":${stringToken(rand)},"object":"chat.completion","created":1,"model":"m","choices":[${choices}],` +
      `"usage":{"prompt_tokens":3,"total_tokens":5,"completion_tokens":2},"prompt_logprobs":null,"prompt_token_ids":${intsToken(rand)}}`
    );
  }

  test("generated responses: the scan equals JSON.parse (entries reduced) or declines", () => {
    const rand = rng(27);
    let accepted = 0;
    for (let i = 0; i < 10_000; i++) if (checkWhole(whole(rand))) accepted++;
    // Declined: no choices, a message with a key named logprobs, top alternatives, ids and entries of other counts.
    assert.ok(accepted > 2_000, `accepted ${accepted}`);
  });

  test("responses parsed whole with their prompt ids read apart: as JSON.parse, generated and mutated", () => {
    assertParsedAlikeOver(32, 5_000, whole);
  });

  test("mutated responses: never a result JSON.parse would not give", () => {
    assert.ok(refusedMutations(28, 20_000, whole, checkWhole) > 0);
  });

  test("what it declines: top alternatives, a repeated logprobs key, entries and ids of different counts", () => {
    const head = '{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[';
    const entryText = '{"token":"a","logprob":-0.5,"bytes":[97],"top_logprobs":[]}';
    const ok = `${head}{"index":0,"message":{"content":"a"},"logprobs":{"content":[${entryText}]},"token_ids":[64]}]}`;
    assert.ok(checkWhole(ok));
    const top = '{"token":"a","logprob":-0.5,"bytes":[97],"top_logprobs":[{"token":"b","logprob":-1,"bytes":[98]}]}';
    for (const declined of [
      ok.replace(entryText, top),
      ok.replace('"token_ids":[64]', '"token_ids":[64],"logprobs":null'),
      ok.replace('"token_ids":[64]', '"token_ids":[64,65]'),
      `${head}]}`,
    ])
      assert.equal(parseChatResponseScanned(declined), null, declined);
  });

  let sim: SimServer;
  before(async () => {
    sim = await startSim({ port: 0 });
  });
  after(async () => {
    await sim.close();
  });
  const SHELL = { type: "function", function: { name: "shell", parameters: { type: "object" } } };
  for (const [name, extra] of Object.entries<Json>({ plain: {}, tools: { tools: [SHELL] }, two: { n: 2 } })) {
    test(`the sim's ${name} response: capture and the harness's bytes as when parsed`, async () => {
      const res = await fetch(`${sim.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "Qwen/Qwen3-8B",
          messages: [{ role: "user", content: `What is in this directory? (${name})` }],
          return_token_ids: true,
          logprobs: true,
          ...extra,
        }),
      });
      const text = await res.text();
      for (const wants of WANTS) {
        const scanned = vllmFlavor.chat.parseWhole!(text, wants);
        assert.ok(scanned, "the sim's response is in the scan's layout");
        const parsed = JSON.parse(text) as Json;
        assert.deepStrictEqual(vllmFlavor.chat.captureWhole(scanned), vllmFlavor.chat.captureWhole(parsed));
        vllmFlavor.chat.stripWhole(scanned, wants);
        vllmFlavor.chat.stripWhole(parsed, wants);
        assert.equal(JSON.stringify(scanned), JSON.stringify(parsed));
      }
      assert.equal(vllmFlavor.chat.parseWhole!(text, { ...WANTS[0]!, logprobs: true }), null, "logprobs asked: parsed");
    });
  }
});
