// A gateway-only install (docs/deploy.md#a-gateway-only-install): `npm install --omit=dev` of a copy of this tree
// (from npm's cache, which the full install filled) gives a gateway, sim and CLI that work without a devDependency,
// and no production module imports one. tsx, which runs the TypeScript, must be a dependency for this to hold.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { copyWorkingTree, ROOT } from "../scripts/working-tree-copy.ts";

const PACKAGE = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  scripts: Record<string, string>;
};
/** The production folders (the ones `npm run lint:deps` checks) and the launcher. */
const PRODUCTION = [
  ...PACKAGE.scripts["lint:deps"]!.split(/\s+/).filter(
    (w) => existsSync(join(ROOT, w)) && statSync(join(ROOT, w)).isDirectory(),
  ),
  "bin",
];
/** Test code, as .dependency-cruiser.cjs names it. */
const TEST_CODE = /(\.test\.ts$|\/test-support\.ts$|\/test-helpers\.ts$|\/testing\/|\/fixtures\/)/;
/** A value import or re-export (`import type` is erased), a side-effect import, or a dynamic import of a package. */
const IMPORT =
  /^\s*(?:import|export)\s+(?!type\s)(?:[^"';]*?\sfrom\s+)?["']([^"'./][^"']*)["']|import\(\s*["']([^"'./][^"']*)["']\s*\)/gm;

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (name === "node_modules" || name.startsWith(".")) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sourceFiles(path, out);
    else if (/\.(ts|mjs|js)$/.test(name) && !TEST_CODE.test(path)) out.push(path);
  }
  return out;
}

function packageOf(specifier: string): string | null {
  if (specifier.startsWith("node:") || builtinModules.includes(specifier.split("/")[0]!)) return null;
  return specifier.startsWith("@") ? specifier.split("/").slice(0, 2).join("/") : specifier.split("/")[0]!;
}

test("every package production code imports is a dependency, not a devDependency", () => {
  const outside: string[] = [];
  for (const folder of PRODUCTION) {
    for (const file of sourceFiles(join(ROOT, folder))) {
      for (const m of readFileSync(file, "utf8").matchAll(IMPORT)) {
        const name = packageOf(m[1] ?? m[2]!);
        if (name && !(name in PACKAGE.dependencies)) outside.push(`${relative(ROOT, file)} imports ${name}`);
      }
    }
  }
  assert.deepEqual(outside, []);
  assert.ok("tsx" in PACKAGE.dependencies, "bin/rlgate.js runs the CLI through tsx");
});

const work = mkdtempSync(join(tmpdir(), "rlgate-omit-dev-"));
after(() => rmSync(work, { recursive: true, force: true }));

test(
  "npm install --omit=dev gives a gateway and sim that capture a call, without the harness CLIs",
  { timeout: 300_000 },
  async () => {
    copyWorkingTree(work);
    const env = { ...process.env, RLGATE_SKIP_NATIVE: "1" } as NodeJS.ProcessEnv;
    delete env["RLGATE_REQUIRE_NATIVE"]; // the native build is the full install's test; here it would only take time
    const install = spawnSync("npm", ["install", "--omit=dev", "--prefer-offline", "--no-audit", "--no-fund"], {
      cwd: work,
      env,
      encoding: "utf8",
    });
    assert.equal(install.status, 0, `${install.stdout}\n${install.stderr}`);
    // Not every devDependency: a dependency may need one too (@types/node comes with one). The tools and harness CLIs
    // that make the full install 2 GB must be absent.
    for (const dev of ["typescript", "eslint", "@anthropic-ai/claude-code", "@openai/codex", "opencode-ai"])
      assert.ok(!existsSync(join(work, "node_modules", dev)), `${dev} is a devDependency, installed anyway`);

    const serve = spawn(process.execPath, ["bin/rlgate.js", "serve", "--port", "0", "--workers", "1"], {
      cwd: work,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    try {
      let output = "";
      const url = await new Promise<string>((resolve, reject) => {
        const onData = (chunk: Buffer): void => {
          output += chunk.toString();
          const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
          if (m) resolve(m[1]!);
        };
        serve.stdout.on("data", onData);
        serve.stderr.on("data", onData);
        serve.once("exit", (code) => reject(new Error(`serve exited (${code}) before listening:\n${output}`)));
      });
      const created = await fetch(`${url}/api/rollouts`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ group: "omit-dev" }),
      });
      assert.equal(created.status, 201);
      const { id } = (await created.json()) as { id: string };
      const answer = await fetch(`${url}/r/${id}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "Qwen/Qwen3-8B", messages: [{ role: "user", content: "hi" }] }),
      });
      assert.equal(answer.status, 200, await answer.clone().text());
      const calls = (await (await fetch(`${url}/api/rollouts/${id}/calls`)).json()) as {
        calls: { status: string; prompt_token_ids: number[] | null; choices: { token_ids: number[] }[] }[];
      };
      assert.equal(calls.calls.length, 1);
      assert.equal(calls.calls[0]!.status, "ok");
      assert.ok(calls.calls[0]!.prompt_token_ids!.length > 0, "the prompt ids were captured");
      assert.ok(calls.calls[0]!.choices[0]!.token_ids.length > 0, "the sampled ids were captured");

      // The CLI's lazily loaded paths: the reconstruction (show) and the Parquet writer (export).
      await fetch(`${url}/api/rollouts/${id}/finish`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ reward: 1 }),
      });
      const cli = (...args: string[]) =>
        spawnSync(process.execPath, ["bin/rlgate.js", ...args, "--gateway", url], { cwd: work, env, encoding: "utf8" });
      const show = cli("show", id, "--no-color");
      assert.equal(show.status, 0, show.stderr);
      assert.match(show.stdout, /trajectory .* trained/);
      const exported = cli("export", "--group", "omit-dev", "-o", join(work, "out.parquet"));
      assert.equal(exported.status, 0, exported.stderr);
      assert.ok(statSync(join(work, "out.parquet")).size > 0);
    } finally {
      serve.kill("SIGTERM");
      await new Promise((resolve) => (serve.exitCode === null ? serve.once("exit", resolve) : resolve(null)));
    }
  },
);
