// TLS on the gRPC link with certificates made here by openssl (a CA, a server certificate for 127.0.0.1, a
// client certificate): the gateway's stream (configured from the environment, as `rlgate serve` is), the core's
// trainer service with and without mutual TLS, the TypeScript and Python clients, and the loopback-only default.
import assert from "node:assert/strict";
import { execFile, execFileSync, spawnSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { TrainerClient, TrajectoryConsumer, type RolloutMessage } from "../clients/ts/index.ts";
import type { Gateway } from "../gateway/index.ts";
import { startCore, type Core } from "../rl-core/core/index.ts";
import { channelCredentials, serverCredentials } from "../protocol/index.ts";
import { putSyntheticRollout, startGrpcGateway, trainerPython } from "./grpc-helpers.ts";
import { ROOT, tempDir, until } from "./helpers.ts";
import { requireInCi } from "./require-in-ci.ts";

const openssl = spawnSync("openssl", ["version"]).status === 0;
const dir = tempDir("tls");
const pem = (name: string) => join(dir, name);

/** A CA, and certificates it signs: `server` for 127.0.0.1 / localhost, `client` for client authentication. */
function makeCertificates(): void {
  const run = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  run("req", "-x509", ...ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=rlgate test CA");
  writeFileSync(pem("server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
  writeFileSync(pem("client.ext"), "extendedKeyUsage=clientAuth\n");
  for (const [name, cn] of [
    ["server", "localhost"],
    ["client", "trainer"],
  ] as const) {
    run("req", ...ec, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${cn}`);
    run(
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-set_serial",
      name === "server" ? "1" : "2",
      "-days",
      "2",
      "-out",
      `${name}.pem`,
      "-extfile",
      `${name}.ext`,
    );
  }
}

async function firstRollout(consumer: TrajectoryConsumer, got: RolloutMessage[], states: string[]): Promise<string> {
  consumer.start();
  try {
    return await until(
      () => (got.length ? "rollout" : states.some((s) => /UNAVAILABLE/.test(s)) ? "unavailable" : undefined),
      15_000,
      "a rollout or a refusal",
    );
  } finally {
    await consumer.close();
  }
}

describe(
  "TLS on the gRPC link",
  { skip: requireInCi("openssl", openssl ? null : "openssl is not installed: no certificates to test TLS with") },
  () => {
    let gw: Gateway;
    const cores: Core[] = [];
    before(async () => {
      makeCertificates();
      gw = await startGrpcGateway({
        dataDir: tempDir("tls-gw"),
        grpcTls: { cert: pem("server.pem"), key: pem("server.key") },
      });
      await putSyntheticRollout(gw.context.store, { id: "t0", group: "T", metadata: { group_size: 1 }, reward: 1 });
    });
    after(async () => {
      for (const c of cores) await c.close();
      await gw?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    test("the gateway's stream: a consumer trusting the CA reads it, a plaintext one is refused", async () => {
      for (const [tls, expected] of [
        [undefined, "unavailable"],
        [{ ca: pem("ca.pem") }, "rollout"],
      ] as const) {
        const got: RolloutMessage[] = [];
        const states: string[] = [];
        const consumer = new TrajectoryConsumer({
          address: gw.grpc!.address,
          consumerGroup: "probe",
          tls,
          onRollout: (m) => void got.push(m),
          onConnection: (_, detail) => void states.push(detail),
        });
        assert.equal(await firstRollout(consumer, got, states), expected, `consumer with ${tls ? "the CA" : "no TLS"}`);
      }
    });

    test("the core reads the gateway over TLS and serves trainers over TLS; mutual TLS wants the client's certificate", async () => {
      const core = await startCore({
        gateways: [gw.grpc!.address],
        gatewayTls: { ca: pem("ca.pem") },
        tls: { cert: pem("server.pem"), key: pem("server.key") },
        port: 0,
        metricsPort: null,
        dataDir: tempDir("tls-core"),
        batchTimeoutMs: 100,
      });
      cores.push(core);
      const trainer = new TrainerClient(core.address, { tls: { ca: pem("ca.pem") }, deadlineMs: 10_000 });
      const ac = new AbortController();
      for await (const b of trainer.batches({ signal: ac.signal })) {
        assert.deepEqual(
          b.rowInfo.map((r) => r.rolloutId),
          ["t0"],
        );
        await trainer.ack([b.batchId]);
        ac.abort();
      }
      trainer.close();
      const plain = new TrainerClient(core.address, { deadlineMs: 3000 });
      await assert.rejects(plain.status(), /UNAVAILABLE|DEADLINE_EXCEEDED/);
      plain.close();

      const mutual = await startCore({
        gateways: [gw.grpc!.address],
        gatewayTls: { ca: pem("ca.pem"), serverName: "localhost" },
        tls: { cert: pem("server.pem"), key: pem("server.key"), ca: pem("ca.pem") },
        consumerGroup: "mutual",
        port: 0,
        metricsPort: null,
        dataDir: tempDir("tls-core-mutual"),
      });
      cores.push(mutual);
      const anonymous = new TrainerClient(mutual.address, { tls: { ca: pem("ca.pem") }, deadlineMs: 3000 });
      await assert.rejects(anonymous.status(), /UNAVAILABLE|DEADLINE_EXCEEDED/);
      anonymous.close();
      const known = new TrainerClient(mutual.address, {
        tls: { ca: pem("ca.pem"), cert: pem("client.pem"), key: pem("client.key") },
      });
      assert.equal((await known.status()).estimator, "grpo");
      known.close();

      const python = trainerPython();
      if (!python) return; // the Python client needs grpcio and numpy (test/e2e/python-trainer says how)
      const script = [
        "import sys; sys.path.insert(0, sys.argv[1])",
        "from rlgate_client import TrainerClient",
        "with TrainerClient(sys.argv[2], tls_ca=sys.argv[3], tls_cert=sys.argv[4], tls_key=sys.argv[5]) as c: print(c.status().estimator)",
        "import grpc",
        "try:",
        "    TrainerClient(sys.argv[2], tls_ca=sys.argv[3], deadline_s=3).status(); print('anonymous allowed')",
        "except grpc.RpcError as e: print('anonymous', e.code().name)",
      ].join("\n");
      const args = [join(ROOT, "clients/python"), mutual.address, pem("ca.pem"), pem("client.pem"), pem("client.key")];
      // Asynchronously: the core answering it lives in this process.
      const stdout = await new Promise<string>((resolve, reject) =>
        execFile(python, ["-c", script, ...args], { encoding: "utf8", timeout: 60_000 }, (error, out, err) =>
          error ? reject(new Error(err || error.message)) : resolve(out),
        ),
      );
      assert.deepEqual(stdout.trim().split("\n"), ["grpo", "anonymous UNAVAILABLE"]);
    });

    test("plaintext is the default only on loopback", async () => {
      await assert.rejects(
        startCore({
          gateways: [gw.grpc!.address],
          host: "0.0.0.0",
          token: "t",
          port: 0,
          metricsPort: null,
          dataDir: tempDir("tls-open"),
        }),
        /refusing to serve the trainer service on 0\.0\.0\.0 without TLS/,
      );
      assert.throws(() => serverCredentials("10.0.0.1", {}), /without TLS/);
      assert.equal(serverCredentials("10.0.0.1", { insecure: true })._isSecure(), false);
      assert.equal(channelCredentials("127.0.0.1:8702").credentials._isSecure(), false);
      assert.equal(channelCredentials("[::1]:8702").credentials._isSecure(), false);
      assert.equal(
        channelCredentials("trainer-host:8702").credentials._isSecure(),
        true,
        "beyond loopback: TLS, the system's roots",
      );
      assert.equal(channelCredentials("trainer-host:8702", { insecure: true }).credentials._isSecure(), false);
      assert.throws(
        () => serverCredentials("127.0.0.1", { cert: pem("server.pem") }),
        /both a certificate and its key/,
      );
    });
  },
);
