// `rlgate doctor`: what this installation gives, one line per part (Node, native kernels, CUDA, the dependencies whose
// install scripts rlgate needs, the Python trainer client, an upstream's reachability), each ok / warn / fail with what
// to do. Exits 1 when a part fails.
import { spawnSync } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync, readSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Command } from "commander";
import { parseUpstreamList, readUpstreamsFile } from "../gateway/upstream/upstream-list.ts";
import { openclawRuntime } from "../runner/openclaw.ts";
import { DEFAULT_PYTHON } from "./default-python.ts";
import { checkSandboxes } from "./doctor-sandboxes.ts";
import { duration } from "./option-parsers.ts";

export type Level = "ok" | "warn" | "fail" | "skip";

export interface Check {
  name: string;
  level: Level;
  detail: string;
}

const MIN_NODE = [20, 6] as const;

export function checkNode(version = process.versions.node): Check {
  const [major = 0, minor = 0] = version.split(".").map(Number);
  const ok = major > MIN_NODE[0] || (major === MIN_NODE[0] && minor >= MIN_NODE[1]);
  return ok
    ? { name: "node", level: "ok", detail: `v${version}` }
    : { name: "node", level: "fail", detail: `v${version}: rlgate needs Node >= ${MIN_NODE.join(".")}` };
}

/** The native kernels and CUDA, as the one loader of the addon found them. */
export async function checkKernels(): Promise<Check[]> {
  const { nativeStatus } = await import("../rl-core/kernels/index.ts");
  const addon: Check = nativeStatus.loaded
    ? {
        name: "kernels",
        level: "ok",
        detail: `native-cpu (${nativeStatus.simd}, ${nativeStatus.hardwareThreads} threads) from ${nativeStatus.path}`,
      }
    : {
        name: "kernels",
        level: "warn",
        detail: `reference (TypeScript): ${nativeStatus.error}; build the addon with a C++ compiler: npm run build:native`,
      };
  let cuda: Check;
  if (!nativeStatus.loaded) cuda = { name: "cuda", level: "skip", detail: "needs the native addon" };
  else if (nativeStatus.cudaLibrary === "absent")
    cuda = {
      name: "cuda",
      level: "warn",
      detail: "CUDA kernels not built (no nvcc when the addon was built): CPU kernels only",
    };
  else if (nativeStatus.cudaLibrary === "broken")
    cuda = {
      name: "cuda",
      level: "fail",
      detail: "rlgate_cuda.so is there but does not load: rebuild with npm run build:native",
    };
  else if (nativeStatus.cudaDevices === 0)
    cuda = {
      name: "cuda",
      level: "warn",
      detail: "CUDA kernels built, no GPU visible (or RLGATE_CUDA=0): CPU kernels run",
    };
  else cuda = { name: "cuda", level: "ok", detail: `native-cuda, ${nativeStatus.cudaDevices} device(s)` };
  return [addon, cuda];
}

/** Whether the file starts like a native executable (ELF, Mach-O, PE), not like the shell stub a package ships. */
function nativeExecutable(path: string): boolean {
  const head = Buffer.alloc(4);
  const fd = openSync(path, "r");
  try {
    readSync(fd, head, 0, 4, 0);
  } finally {
    closeSync(fd);
  }
  const magic = head.readUInt32BE(0);
  return (
    magic === 0x7f454c46 || // ELF
    [0xfeedface, 0xfeedfacf, 0xcefaedfe, 0xcffaedfe, 0xcafebabe].includes(magic) || // Mach-O
    head.subarray(0, 2).toString("latin1") === "MZ" // PE
  );
}

/**
 * The dependencies whose install scripts rlgate needs (package.json `allowScripts` allows them; docs/deploy.md says
 * why each, and why the others are denied), each checked by what its script leaves behind: lmdb's native binding
 * loads (the store), esbuild transforms (tsx runs the CLI with it), and the `claude` and `opencode` commands are the
 * native binaries their postinstall puts in place of a stub (the e2e tests and `npm run harness-matrix` run them; they
 * are dev dependencies, so absent from a production install: skip). `from` is where modules resolve from.
 */
export function checkInstallScripts(from: string = import.meta.url): Check[] {
  const require = createRequire(from);
  const fix = (pkg: string) => `allow it in package.json allowScripts, then npm rebuild ${pkg}`;
  const broken = (error: unknown, pkg: string, need: string, via = pkg): string =>
    (error as { code?: string }).code === "MODULE_NOT_FOUND" &&
    [pkg, via].some((name) => firstLine(error).includes(`'${name}'`))
      ? `not installed: ${need}; run npm install`
      : `does not load (${firstLine(error)}): ${need}; ${fix(pkg)}`;
  const versionOf = (entry: string): string =>
    (JSON.parse(readFileSync(join(packageRoot(entry), "package.json"), "utf8")) as { version: string }).version;
  const checks: Check[] = [];
  try {
    const entry = require.resolve("lmdb");
    require(entry);
    checks.push({ name: "lmdb", level: "ok", detail: `${versionOf(entry)}, its native binding loads` });
  } catch (error) {
    const need = "the store needs it (its install script builds the binding where no prebuilt one fits)";
    checks.push({ name: "lmdb", level: "fail", detail: broken(error, "lmdb", need) });
  }
  try {
    // esbuild as tsx finds it (tsx depends on it; rlgate does not import it).
    const fromTsx = createRequire(require.resolve("tsx"));
    const esbuild = fromTsx("esbuild") as { version: string; transformSync(code: string): unknown };
    esbuild.transformSync("");
    checks.push({
      name: "esbuild",
      level: "ok",
      detail: `${esbuild.version}, its binary runs (tsx runs rlgate with it)`,
    });
  } catch (error) {
    checks.push({
      name: "esbuild",
      level: "fail",
      detail: broken(error, "esbuild", "tsx needs it to run rlgate", "tsx"),
    });
  }
  for (const [name, pkg, bin] of [
    ["claude", "@anthropic-ai/claude-code", "bin/claude.exe"],
    ["opencode", "opencode-ai", "bin/opencode.exe"],
  ] as const) {
    let path: string;
    try {
      path = join(dirname(require.resolve(`${pkg}/package.json`)), bin);
    } catch {
      checks.push({
        name,
        level: "skip",
        detail: `${pkg} not installed (a dev dependency: e2e tests, harness-matrix)`,
      });
      continue;
    }
    let native: boolean;
    try {
      native = nativeExecutable(path);
    } catch (error) {
      native = false;
      path = `${path} (${firstLine(error)})`;
    }
    checks.push(
      native
        ? { name, level: "ok", detail: `native binary at ${path}` }
        : {
            name,
            level: "warn",
            detail: `${pkg}'s postinstall did not run: ${path} is a stub, so its e2e test fails; ${fix(pkg)}`,
          },
    );
  }
  return checks;
}

/**
 * OpenClaw (`rlgate run --harness openclaw`) and the Node that runs it: npm install puts both in node_modules/.openclaw
 * (scripts/install-openclaw.mjs); that Node must start, since OpenClaw refuses anything below 24.16.
 */
export function checkOpenclaw(home?: string): Check {
  const runtime = openclawRuntime(home);
  if ("error" in runtime) return { name: "openclaw", level: "warn", detail: `${runtime.error} (--harness openclaw)` };
  const probe = spawnSync(runtime.node, ["--version"], { encoding: "utf8", timeout: 30_000 });
  if (probe.status !== 0)
    return {
      name: "openclaw",
      level: "warn",
      detail: `${runtime.node} does not run (${probe.error?.message ?? probe.stderr.trim()}): rm -rf node_modules/.openclaw, then npm install`,
    };
  return {
    name: "openclaw",
    level: "ok",
    detail: `${runtime.version}, run by Node ${probe.stdout.trim()} at ${runtime.node}`,
  };
}

/** The folder of the package that `entry` (a resolved module file) belongs to. */
function packageRoot(entry: string): string {
  let dir = dirname(entry);
  while (!existsSync(join(dir, "package.json")) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split("\n")[0]!;
}

/** A virtual environment's folder stands for its interpreter (`--python .venv`). */
export function pythonOf(path: string): string {
  return existsSync(join(path, "bin", "python")) ? join(path, "bin", "python") : path;
}

// Imports the client and loads its generated gRPC modules, as a trainer does on its first batch: an install whose
// modules refuse this protobuf or grpcio imports `rlgate_client` fine and fails only here.
const PROBE = "import rlgate_client; from rlgate_client import _protos; _protos.load(); print(rlgate_client.__file__)";

/** Whether `python` can import the trainer client (`pip install ./clients/python`) and load its gRPC modules. */
export function checkPython(path: string): Check {
  const python = pythonOf(path);
  const probe = spawnSync(python, ["-c", PROBE], { encoding: "utf8", timeout: 30_000 });
  if (probe.error)
    return {
      name: "python client",
      level: "warn",
      detail: `${python} did not run (${probe.error.message}); --python PATH`,
    };
  if (probe.status === 0)
    return { name: "python client", level: "ok", detail: `rlgate_client from ${probe.stdout.trim()}` };
  const last = probe.stderr.trim().split("\n").at(-1) ?? `exit ${probe.status}`;
  // Not installed: a trainer may run elsewhere. Installed but not loading: the trainer would die on start.
  return /No module named 'rlgate_client'/.test(last)
    ? {
        name: "python client",
        level: "warn",
        detail: `not importable by ${python} (${last}): pip install ./clients/python`,
      }
    : { name: "python client", level: "fail", detail: `installed in ${python} but broken: ${last}` };
}

/** Whether `python` has torch (rlgate-torch-trainer and the adapters' tensors need it; the client does not). */
export function checkTorch(path: string): Check {
  const python = pythonOf(path);
  const probe = spawnSync(python, ["-c", "import torch; print(torch.__version__)"], {
    encoding: "utf8",
    timeout: 60_000,
  });
  if (probe.status === 0) return { name: "torch", level: "ok", detail: `${probe.stdout.trim()} in ${python}` };
  return {
    name: "torch",
    level: "warn",
    detail: `not importable by ${python}: rlgate-torch-trainer and the adapters' tensors need it (Debian: apt-get install python3-torch)`,
  };
}

/** Whether an inference server answers its OpenAI-style model list. */
export async function checkUpstream(url: string, timeoutMs: number): Promise<Check> {
  const target = `${url.replace(/\/+$/, "").replace(/\/v1$/, "")}/v1/models`;
  let res: Response;
  try {
    res = await fetch(target, { signal: AbortSignal.timeout(timeoutMs) });
  } catch (error) {
    const e = error as Error & { cause?: { code?: string; message?: string } };
    const why =
      e.name === "TimeoutError" ? `no answer within ${timeoutMs} ms` : (e.cause?.code ?? e.cause?.message ?? e.message);
    return { name: "upstream", level: "fail", detail: `${target}: ${why}` };
  }
  const body = (await res.json().catch(() => null)) as { data?: Array<{ id?: unknown }> } | null;
  if (!res.ok)
    return {
      name: "upstream",
      level: "warn",
      detail: `${target} answered HTTP ${res.status}: reachable, but not an OpenAI-style server?`,
    };
  const models = (body?.data ?? []).map((m) => String(m.id)).join(", ");
  return { name: "upstream", level: "ok", detail: `${target}: ${models || "no models listed"}` };
}

/**
 * Every replica of `--upstream A,B,…` and of an upstreams file, checked at once: a line each. A list that cannot be
 * read is one failed line that says why.
 */
export async function checkUpstreams(
  options: { upstream?: string; upstreamsFile?: string },
  timeoutMs: number,
): Promise<Check[]> {
  let urls: string[];
  try {
    urls = [
      ...new Set([
        ...(options.upstream ? parseUpstreamList(options.upstream) : []),
        ...(options.upstreamsFile ? readUpstreamsFile(options.upstreamsFile) : []),
      ]),
    ];
  } catch (error) {
    return [{ name: "upstream", level: "fail", detail: (error as Error).message }];
  }
  if (urls.length === 0) return [{ name: "upstream", level: "skip", detail: "not checked (--upstream URL)" }];
  return Promise.all(urls.map((url) => checkUpstream(url, timeoutMs)));
}

export function formatChecks(checks: readonly Check[]): string {
  const width = Math.max(...checks.map((c) => c.name.length));
  return checks.map((c) => `${c.level.padEnd(4)}  ${c.name.padEnd(width)}  ${c.detail}`).join("\n");
}

export function doctorCommand(): Command {
  return new Command("doctor")
    .summary(
      "check what this installation gives: Node, native kernels, CUDA, install scripts, Python client and torch, sandboxes, upstream",
    )
    .description(
      "Checks each part rlgate can use and prints one line per part: ok, warn (works, with less: e.g. the TypeScript " +
        "kernels instead of the native ones) or fail (will not work), with what to do. Exits 1 when a part fails.",
    )
    .option(
      "--upstream <url[,url…]>",
      "also check that inference servers answer GET /v1/models (e.g. http://vllm-host:8000; several replicas: a line each)",
    )
    .option("--upstreams-file <file>", "also check every replica an upstreams file lists (as rlgate serve reads it)")
    .option("--python <path>", "the Python (or virtual environment folder) that runs your trainer", DEFAULT_PYTHON)
    .option(
      "--timeout <duration>",
      "how long to wait for the upstream (500ms, 5s; plain numbers are ms)",
      duration,
      5000,
    )
    .action(async (options: { upstream?: string; upstreamsFile?: string; python: string; timeout: number }) => {
      const checks = [
        checkNode(),
        ...(await checkKernels()),
        ...checkInstallScripts(),
        checkOpenclaw(),
        checkPython(options.python),
        checkTorch(options.python),
        ...checkSandboxes(),
      ];
      checks.push(...(await checkUpstreams(options, options.timeout)));
      console.log(formatChecks(checks));
      process.exitCode = checks.some((c) => c.level === "fail") ? 1 : 0;
    });
}
