// The baseline forwarder for bench:gateway: a bare http-proxy with no parsing and no capture.
// Usage: tsx bench/bare-forwarder.ts <upstream-url>   (prints "listening on http://127.0.0.1:PORT")
import { createServer } from "node:http";
import { Agent } from "node:http";
import httpProxy from "http-proxy";

const target = process.argv[2];
if (!target) {
  console.error("usage: bare-forwarder <upstream-url>");
  process.exit(2);
}
const proxy = httpProxy.createProxyServer({ target, agent: new Agent({ keepAlive: true, maxSockets: 256 }) });
proxy.on("error", (_error, _req, res) => {
  (res as import("node:http").ServerResponse).destroy();
});
const server = createServer((req, res) => proxy.web(req, res));
server.listen(0, "127.0.0.1", () => {
  const address = server.address() as import("node:net").AddressInfo;
  console.log(`listening on http://127.0.0.1:${address.port}`);
});
process.on("SIGTERM", () => process.exit(0));
