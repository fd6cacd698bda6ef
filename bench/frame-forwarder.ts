// A forwarder made of rlgate's own HTTP frame and nothing of its capture: the gateway's server options, body reader,
// upstream client (undici's handler interface through `forward`, one UpstreamCall a call) and the relay's write
// pattern (the upstream's head passed on as `harnessResponseHeaders` with rlgate's two headers, flushed early on a
// stream, one harness write per read of the upstream's socket, the read with `[DONE]` leaving with the end). No request parsing, no splice, no event split
// or scan, no record, no commit, no metrics. Against the bare http-proxy forwarder it measures what the frame costs;
// against `rlgate serve`, what capture costs (bench/gateway-cpu.ts --frame). A measurement tool, not a mode of rlgate.
//
//   tsx bench/frame-forwarder.ts <upstream-url>   (prints "listening on http://127.0.0.1:PORT"; send it the ids body)
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { readBody } from "../gateway/body.ts";
import { forward, watchHarnessDisconnect } from "../gateway/forward.ts";
import { harnessResponseHeaders } from "../gateway/headers.ts";
import { Upstream } from "../gateway/upstream/client.ts";
import { UpstreamCall } from "../gateway/upstream/upstream-call.ts";

const target = process.argv[2];
if (!target) {
  console.error("usage: frame-forwarder <upstream-url>");
  process.exit(2);
}
const ctx = { upstream: new Upstream({ urls: [target] }), config: { controlToken: null } };
let seq = 0;

async function relay(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await readBody(req, 64 << 20);
  const call = new UpstreamCall();
  watchHarnessDisconnect(res, () => call.abort());
  const upstream = await forward(
    ctx,
    { path: req.url ?? "/", headers: req.headers, dropAuthorization: false, rolloutId: null },
    body,
    call,
  );
  const headers = harnessResponseHeaders(upstream.headers);
  headers["x-rlgate-call"] = String(++seq);
  headers["x-rlgate-overhead-ms"] = "0.000";
  const stream = String(upstream.headers["content-type"] ?? "").includes("text/event-stream");
  if (!stream) {
    const raw = await upstream.readAll();
    headers["content-length"] = raw.length;
    res.writeHead(upstream.statusCode, headers);
    res.end(raw);
    return;
  }
  res.writeHead(upstream.statusCode, headers);
  let wroteBody = false;
  let ending = false;
  setImmediate(() => {
    if (!wroteBody && !ending && !res.writableEnded) res.flushHeaders();
  });
  // As rlgate's relay: what one socket read brings leaves in one write once the read is handled, and the read that
  // carries `[DONE]` leaves with the end.
  const pending: Buffer[] = [];
  let flushQueued = false;
  const flush = () => {
    flushQueued = false;
    if (ending || pending.length === 0) return;
    wroteBody = true;
    res.write(pending.length === 1 ? pending[0] : Buffer.concat(pending));
    pending.length = 0;
  };
  await upstream.pump((chunk) => {
    pending.push(chunk);
    if (chunk.includes(DONE)) ending = true;
    if (!flushQueued) {
      flushQueued = true;
      process.nextTick(flush);
    }
  });
  res.end(pending.length === 0 ? undefined : Buffer.concat(pending));
}

const DONE = "data: [DONE]";

const server = createServer({ keepAliveTimeout: 65_000, requireHostHeader: false }, (req, res) => {
  relay(req, res).catch(() => res.destroy());
});
server.listen(0, "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}`);
});
process.on("SIGTERM", () => process.exit(0));
