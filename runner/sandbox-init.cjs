// Runs first inside a sandbox (plain CommonJS: no tsx, no rlgate code in there). It listens on 127.0.0.1:PORT in the
// sandbox's own network namespace and pipes each connection to the Unix socket of the runner's bridge, so a harness
// reaches the gateway at http://127.0.0.1:PORT; then it runs the harness command and exits as it exits.
// Under Kubernetes the target is HOST:PORT (the gateway's Service) instead of a socket path.
// usage: node sandbox-init.cjs PORT SOCKET|HOST:PORT -- COMMAND ARGS...
"use strict";
const net = require("node:net");
const { spawn } = require("node:child_process");

const [port, socketPath, dashes, ...command] = process.argv.slice(2);
if (!port || !socketPath || dashes !== "--" || command.length === 0) {
  process.stderr.write("usage: node sandbox-init.cjs PORT SOCKET -- COMMAND ARGS...\n");
  process.exit(2);
}

const hostPort = /^([^/][^:]*):(\d+)$/.exec(socketPath);
const target = hostPort ? { host: hostPort[1], port: Number(hostPort[2]) } : { path: socketPath };

const server = net.createServer((inside) => {
  const outside = net.connect(target);
  inside.pipe(outside);
  outside.pipe(inside);
  inside.on("error", () => outside.destroy());
  outside.on("error", () => inside.destroy());
});
server.on("error", (error) => {
  process.stderr.write(`rlgate sandbox: cannot listen on 127.0.0.1:${port}: ${error.message}\n`);
  process.exit(126);
});
server.listen(Number(port), "127.0.0.1", () => {
  const child = spawn(command[0], command.slice(1), { stdio: "inherit" });
  child.on("error", (error) => {
    process.stderr.write(`rlgate sandbox: cannot run ${command[0]}: ${error.message}\n`);
    process.exit(127);
  });
  child.on("exit", (code, signal) =>
    process.exit(code ?? 128 + (signal ? require("node:os").constants.signals[signal] : 0)),
  );
});
