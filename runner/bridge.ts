// The sandbox's only way out: an HTTP proxy on a Unix socket in the rollout's directory, bind-mounted into the
// sandbox, that forwards to the gateway the harness calls of this one rollout (paths under /r/{id}/) and refuses the
// rest with a 403 — the control API above all, where an agent could otherwise post its own reward.
import {
  request as httpRequest,
  createServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import { request as httpsRequest } from "node:https";
import { chmodSync } from "node:fs";
import { listen } from "../util/listen.ts";
import { parseRequestTarget } from "../util/request-target.ts";

export interface Bridge {
  path: string;
  /** Requests forwarded and refused so far. */
  stats: { forwarded: number; refused: number };
  close(): Promise<void>;
}

// Hop-by-hop headers are the proxy's own business (RFC 9110 §7.6.1).
const HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer"]);

export async function startBridge(options: {
  socketPath: string;
  gatewayUrl: string;
  rolloutId: string;
  rolloutKey?: string;
}): Promise<Bridge> {
  const target = new URL(options.gatewayUrl);
  const prefix = `/r/${options.rolloutId}/`;
  const send = target.protocol === "https:" ? httpsRequest : httpRequest;
  const stats = { forwarded: 0, refused: 0 };

  const refuse = (res: ServerResponse, message: string) => {
    stats.refused++;
    const body = JSON.stringify({ error: { message, type: "forbidden", code: "RLGATE_SANDBOX_FORBIDDEN" } });
    res.writeHead(403, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    res.end(body);
  };

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    // The path is read as the gateway reads it (util/request-target.ts): one a URL parser would rewrite is refused
    // here too, so that a prefix check on the raw path can never pass a request routed elsewhere.
    const path = req.url ?? "/";
    let routed: string;
    try {
      routed = parseRequestTarget(path).pathname;
    } catch (error) {
      return refuse(res, `from a sandbox only ${prefix}… is reachable: ${(error as Error).message}`);
    }
    if (!path.startsWith(prefix) || !routed.startsWith(prefix))
      return refuse(res, `from a sandbox only ${prefix}… is reachable`);
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !HOP.has(k)) headers[k] = v;
    // The path names the rollout; a header naming another one is dropped, and with a key the gateway checks both.
    delete headers["x-rlgate-rollout"];
    headers["host"] = target.host;
    if (options.rolloutKey) {
      delete headers["x-api-key"];
      headers["authorization"] = `Bearer ${options.rolloutKey}`;
    }
    stats.forwarded++;
    const upstream = send(
      { protocol: target.protocol, hostname: target.hostname, port: target.port, method: req.method, path, headers },
      (up) => {
        const out: Record<string, string | string[]> = {};
        for (const [k, v] of Object.entries(up.headers)) if (v !== undefined && !HOP.has(k)) out[k] = v;
        res.writeHead(up.statusCode ?? 502, out);
        up.pipe(res);
        up.on("error", () => res.destroy());
      },
    );
    upstream.on("error", (error) => {
      if (res.headersSent) return res.destroy();
      const body = JSON.stringify({ error: { message: `gateway unreachable: ${error.message}`, type: "bad_gateway" } });
      res.writeHead(502, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
      res.end(body);
    });
    // A harness that hangs up aborts the gateway request too (and through it the upstream's).
    res.on("close", () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  };

  const server: Server = createServer(handle);
  server.on("clientError", (_e, socket) => socket.destroy());
  await listen(server, { path: options.socketPath });
  // The sandbox's user is not the runner's: the socket must be connectable by it.
  chmodSync(options.socketPath, 0o777);
  return {
    path: options.socketPath,
    stats,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
