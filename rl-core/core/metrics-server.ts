// The core's /metrics (Prometheus) and /healthz over plain HTTP.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { dialAddress } from "../../protocol/index.ts";
import type { CoreMetrics } from "./metrics.ts";
import { listen } from "../../util/listen.ts";

export interface MetricsServer {
  url: string;
  close(): Promise<void>;
}

export async function startMetricsServer(metrics: CoreMetrics, host: string, port: number): Promise<MetricsServer> {
  const http: Server = createServer((req, res) => {
    if (req.url === "/metrics") {
      metrics.registry.metrics().then(
        (body) => {
          res.writeHead(200, { "content-type": metrics.registry.contentType });
          res.end(body);
        },
        (error) => res.writeHead(500, { "content-type": "text/plain" }).end(String(error)),
      );
    } else if (req.url === "/healthz") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ ok: true }));
    } else {
      res.writeHead(404).end();
    }
  });
  await listen(http, { port, host });
  return {
    url: `http://${dialAddress(host, (http.address() as AddressInfo).port)}/metrics`,
    close: () => new Promise<void>((resolve) => http.close(() => resolve())),
  };
}
