// `rlgate doctor`: one line per part with ok / warn / fail / skip, exit 1 when a part fails.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { freePort } from "../util/listen.ts";
import { after, before, describe, test } from "node:test";
import { startSim, type SimServer } from "../sim/index.ts";
import {
  checkInstallScripts,
  checkNode,
  checkOpenclaw,
  checkPython,
  checkUpstream,
  checkUpstreams,
  formatChecks,
} from "./doctor-command.ts";

const ROOT = new URL("..", import.meta.url).pathname;
let sim: SimServer;
before(async () => {
  sim = await startSim({ port: 0 });
});
after(async () => {
  await sim?.close();
});

describe("rlgate doctor", () => {
  test("an upstream that answers /v1/models is ok, with its models; with or without /v1 in the URL", async () => {
    for (const url of [sim.url, `${sim.url}/v1/`]) {
      const check = await checkUpstream(url, 30_000);
      assert.equal(check.level, "ok", check.detail);
      assert.match(check.detail, /\/v1\/models: Qwen\/Qwen3-8B$/);
    }
  });

  test("an upstream not listening is a failure that names the address and the reason", async () => {
    const port = await freePort();
    const check = await checkUpstream(`http://127.0.0.1:${port}`, 30_000);
    assert.deepEqual([check.level, check.detail], ["fail", `http://127.0.0.1:${port}/v1/models: ECONNREFUSED`]);
  });

  test("several replicas, from --upstream and an upstreams file: a line each; a bad list is one failed line", async () => {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), "rlgate-doctor-"));
    try {
      const file = join(dir, "upstreams.txt");
      writeFileSync(file, `# replicas\n${sim.url}\nhttp://127.0.0.1:${port}  # drained\n`);
      const checks = await checkUpstreams({ upstream: `${sim.url}, ${sim.url}/`, upstreamsFile: file }, 30_000);
      assert.deepEqual(
        checks.map((c) => [c.level, c.detail.split(":").slice(0, 3).join(":")]),
        [
          ["ok", `${sim.url}/v1/models`],
          ["fail", `http://127.0.0.1:${port}/v1/models`],
        ],
      );
      const bad = await checkUpstreams({ upstream: "vllm-host:8000" }, 1000);
      assert.deepEqual(
        bad.map((c) => c.level),
        ["fail"],
      );
      assert.match(bad[0]!.detail, /not an http\(s\) URL|is not a URL/);
      const missing = await checkUpstreams({ upstreamsFile: join(dir, "none.txt") }, 1000);
      assert.match(missing[0]!.detail, /cannot read the upstreams file/);
      assert.deepEqual(
        (await checkUpstreams({}, 1000)).map((c) => c.level),
        ["skip"],
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("an old Node fails, a Python that cannot import the client warns with the pip command", () => {
    assert.deepEqual(checkNode("18.19.0"), {
      name: "node",
      level: "fail",
      detail: "v18.19.0: rlgate needs Node >= 20.6",
    });
    assert.equal(checkNode("20.6.0").level, "ok");
    assert.equal(checkNode("22.1.0").level, "ok");
    const missing = checkPython("/nonexistent/python3");
    assert.equal(missing.level, "warn");
    assert.match(missing.detail, /did not run .*ENOENT/);
    const plain = checkPython("/usr/bin/python3");
    if (plain.level === "warn")
      assert.match(plain.detail, /No module named 'rlgate_client'.*pip install \.\/clients\/python/);
  });

  test("openclaw: the Node that runs it, by version and path; absent, a warning that says to run npm install", () => {
    const installed = checkOpenclaw();
    if (installed.level === "ok") assert.match(installed.detail, /run by Node v2[4-9]\.\d+\.\d+ at \/.*\/bin\/node$/);
    const empty = mkdtempSync(join(tmpdir(), "rlgate-doctor-openclaw-"));
    try {
      const missing = checkOpenclaw(empty);
      assert.equal(missing.level, "warn");
      assert.match(missing.detail, /not installed .*run npm install/);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  test("install scripts: this checkout's are ok; a stub CLI warns, an unloadable lmdb fails, each says what to do", () => {
    assert.deepEqual(
      checkInstallScripts().map((c) => `${c.level} ${c.name}`),
      ["ok lmdb", "ok esbuild", "ok claude", "ok opencode"],
    );
    const dir = mkdtempSync(join(tmpdir(), "rlgate-doctor-"));
    try {
      const put = (path: string, content: string | Buffer) => {
        mkdirSync(dirname(join(dir, "node_modules", path)), { recursive: true });
        writeFileSync(join(dir, "node_modules", path), content);
      };
      // What npm leaves when a package's install script did not run: lmdb without a binding for this platform, the
      // claude wrapper's placeholder; opencode's binary in place, as its postinstall leaves it.
      put("lmdb/package.json", JSON.stringify({ name: "lmdb", version: "3.5.6", main: "index.cjs" }));
      put("lmdb/index.cjs", 'throw new Error("No native build was found for platform=linux arch=x64");');
      put("@anthropic-ai/claude-code/package.json", JSON.stringify({ name: "@anthropic-ai/claude-code" }));
      put(
        "@anthropic-ai/claude-code/bin/claude.exe",
        'echo "Error: claude native binary not installed." >&2\nexit 1\n',
      );
      put("opencode-ai/package.json", JSON.stringify({ name: "opencode-ai" }));
      put("opencode-ai/bin/opencode.exe", Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]));
      const checks = checkInstallScripts(pathToFileURL(join(dir, "x.js")).href);
      assert.deepEqual(
        checks.map((c) => `${c.level} ${c.name}`),
        ["fail lmdb", "fail esbuild", "warn claude", "ok opencode"],
      );
      assert.match(checks[0]!.detail, /No native build was found.*allowScripts, then npm rebuild lmdb$/);
      assert.match(checks[1]!.detail, /^not installed: tsx needs it to run rlgate; run npm install$/);
      assert.match(
        checks[2]!.detail,
        /postinstall did not run: .*claude\.exe is a stub.*npm rebuild @anthropic-ai\/claude-code$/,
      );
      // Without the harness CLIs (a production install has no dev dependencies) they skip.
      const bare = mkdtempSync(join(tmpdir(), "rlgate-doctor-"));
      try {
        assert.deepEqual(
          checkInstallScripts(pathToFileURL(join(bare, "x.js")).href).map((c) => `${c.level} ${c.name}`),
          ["fail lmdb", "fail esbuild", "skip claude", "skip opencode"],
        );
      } finally {
        rmSync(bare, { recursive: true, force: true });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the command: the reference kernels warn (with why), an unreachable upstream fails, exit code 1", async () => {
    const port = await freePort();
    const run = spawnSync(
      process.execPath,
      ["--import", "tsx", "cli/index.ts", "doctor", "--upstream", `http://127.0.0.1:${port}`, "--timeout", "20s"],
      {
        cwd: ROOT,
        env: { ...process.env, RLGATE_NATIVE: "0" },
        encoding: "utf8",
        timeout: 120_000,
      },
    );
    assert.equal(run.status, 1, run.stderr);
    const lines = run.stdout.trim().split("\n");
    assert.deepEqual(
      lines.map((l) => l.split(/\s+/).slice(0, 2).join(" ")),
      [
        "ok node",
        "warn kernels",
        "skip cuda",
        "ok lmdb",
        "ok esbuild",
        "ok claude",
        "ok opencode",
        "ok openclaw",
        // What this machine has: the part is checked, whichever way it comes out.
        ...["python", "torch", "bubblewrap", "podman"].map((part, i) => `${lines[8 + i]!.split(/\s+/)[0]} ${part}`),
        "fail upstream",
      ],
    );
    assert.match(
      lines[1]!,
      /reference \(TypeScript\): disabled by RLGATE_NATIVE=0; build the addon with a C\+\+ compiler: npm run build:native/,
    );
    assert.match(lines.at(-1)!, /ECONNREFUSED/);
  });

  test("lines are aligned: level, part, detail", () => {
    assert.equal(
      formatChecks([
        { name: "node", level: "ok", detail: "v20" },
        { name: "python client", level: "warn", detail: "x" },
      ]),
      "ok    node           v20\nwarn  python client  x",
    );
  });
});
