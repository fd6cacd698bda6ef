// How a streamed call's events reach the harness: what one read of the upstream's socket brings leaves in one write
// (undici hands the relay each HTTP chunk of it, often one event each), the read that ends the stream leaves with
// `[DONE]` once the record is committed, and events the upstream sends while it is still generating are never held.
import assert from "node:assert/strict";
import { connect, createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { startGateway, type Gateway } from "../gateway/index.ts";
import { startSim } from "../sim/server.ts";
import { createRollout, rolloutCalls, tempDir } from "./helpers.ts";

const BODY = JSON.stringify({
  model: "Qwen/Qwen3-8B",
  stream: true,
  max_tokens: 8,
  messages: [{ role: "user", content: "hi" }],
});

/** The sim's answer to BODY as rlgate asks for it (ids and logprobs), split into its events. */
async function simEvents(): Promise<string[]> {
  const sim = await startSim({ port: 0 });
  try {
    const res = await fetch(`${sim.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...JSON.parse(BODY), return_token_ids: true, logprobs: true }),
    });
    return (await res.text()).split(/(?<=\n\n)/).filter((event) => event.length > 0);
  } finally {
    await sim.close();
  }
}

const HEAD = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n";
const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;

/** An upstream that answers every request with `answer(socket)` (the request itself is read and ignored). */
async function rawUpstream(answer: (socket: Socket) => void): Promise<{ url: string; server: Server }> {
  const server = createServer((socket) => {
    let request = "";
    socket.on("data", (data) => {
      request += data.toString("latin1");
      const headEnd = request.indexOf("\r\n\r\n");
      if (headEnd < 0) return;
      const length = Number(/content-length: *(\d+)/i.exec(request.slice(0, headEnd))?.[1] ?? 0);
      if (request.length - headEnd - 4 < length) return;
      request = "";
      answer(socket);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/**
 * Sends BODY to `path` on a raw socket and reads the chunked answer: `onData` sees the body as it grows; resolves
 * with the body's HTTP chunks (the harness sees a socket write of the gateway's as one or more of them).
 */
function harnessCall(url: string, path: string, onData: (body: string) => void = () => {}): Promise<string[]> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), "127.0.0.1");
    let raw = "";
    const chunks: string[] = [];
    socket.on("data", (data) => {
      raw += data.toString("utf8");
      const headEnd = raw.indexOf("\r\n\r\n");
      if (headEnd < 0) return;
      let at = headEnd + 4;
      chunks.length = 0;
      for (;;) {
        const lineEnd = raw.indexOf("\r\n", at);
        if (lineEnd < 0) break;
        const size = parseInt(raw.slice(at, lineEnd), 16);
        if (size === 0) {
          socket.end();
          return resolve(chunks);
        }
        if (raw.length < lineEnd + 2 + size + 2) break;
        chunks.push(raw.slice(lineEnd + 2, lineEnd + 2 + size));
        at = lineEnd + 2 + size + 2;
      }
      onData(chunks.join(""));
    });
    socket.on("error", reject);
    socket.write(
      `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(BODY)}\r\n\r\n${BODY}`,
    );
  });
}

describe("streamed relay writes", () => {
  let events: string[];
  before(async () => {
    events = await simEvents();
    assert.ok(events.length >= 5 && events.at(-1) === "data: [DONE]\n\n", "the sim's stream ends with [DONE]");
  });

  let gateway: Gateway | null = null;
  let upstream: Server | null = null;
  after(async () => {
    await gateway?.close();
    upstream?.close();
  });

  async function stack(answer: (socket: Socket) => void): Promise<{ url: string; rollout: string }> {
    await gateway?.close();
    upstream?.close();
    const raw = await rawUpstream(answer);
    upstream = raw.server;
    gateway = await startGateway({ upstream: raw.url, port: 0, dataDir: tempDir("relay-writes") });
    return { url: gateway.url, rollout: (await createRollout(gateway.url)).id };
  }

  let wholeRead = "";
  test("a stream that arrives in one read leaves in one write, [DONE] included, after the commit", async () => {
    const { url, rollout } = await stack((socket) => socket.write(HEAD + events.map(chunk).join("") + "0\r\n\r\n"));
    const chunks = await harnessCall(url, `/r/${rollout}/v1/chat/completions`);
    assert.equal(chunks.length, 1, `one HTTP chunk, not one per event (${chunks.length})`);
    wholeRead = chunks[0]!;
    assert.ok(wholeRead.endsWith("data: [DONE]\n\n"));
    assert.ok(
      !wholeRead.includes('"token_ids":[') && !wholeRead.includes('"logprob":'),
      "fields rlgate asked for are nulled",
    );
    const [call] = await rolloutCalls(url, rollout);
    assert.equal(call?.status, "ok");
    assert.ok((call?.choices[0]?.tokenIds.length ?? 0) > 0);
  });

  test("events the upstream sends while it is still generating reach the harness before it finishes", async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const { url, rollout } = await stack((socket) => {
      socket.write(HEAD + events.slice(0, 4).map(chunk).join(""));
      void released.then(() => socket.write(events.slice(4).map(chunk).join("") + "0\r\n\r\n"));
    });
    const stalled = setTimeout(() => release(), 10_000);
    let early = false;
    const chunks = await harnessCall(url, `/r/${rollout}/v1/chat/completions`, (body) => {
      if (!early && body.includes("data: ")) {
        early = true;
        release();
      }
    });
    clearTimeout(stalled);
    assert.ok(early, "events arrived while the upstream waited for the harness to see them");
    assert.ok(chunks.length >= 2, "the events sent before the pause left before the rest");
    assert.equal(chunks.join(""), wholeRead, "the harness gets the same bytes however the upstream's reads fall");
    assert.equal((await rolloutCalls(url, rollout))[0]?.status, "ok");
  });
});
