// `rlgate doctor`: what this installation gives, one line per part (Node, native kernels, CUDA, the Python trainer
// client, an upstream's reachability), each ok / warn / fail with what to do. Exits 1 when a part fails.
import { spawnSync } from "node:child_process";
import { Command } from "commander";
import { parseUpstreamList, readUpstreamsFile } from "../gateway/upstream/upstream-list.ts";
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

/** Whether `python` can import the trainer client (`pip install ./clients/python`). */
export function checkPython(python: string): Check {
  const probe = spawnSync(python, ["-c", "import rlgate_client, sys; print(rlgate_client.__file__)"], {
    encoding: "utf8",
    timeout: 30_000,
  });
  if (probe.error)
    return {
      name: "python client",
      level: "warn",
      detail: `${python} did not run (${probe.error.message}); --python PATH`,
    };
  if (probe.status === 0)
    return { name: "python client", level: "ok", detail: `rlgate_client from ${probe.stdout.trim()}` };
  const last = probe.stderr.trim().split("\n").at(-1) ?? `exit ${probe.status}`;
  return {
    name: "python client",
    level: "warn",
    detail: `not importable by ${python} (${last}): pip install ./clients/python`,
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
    .summary("check what this installation gives: Node, native kernels, CUDA, Python client, upstream")
    .description(
      "Checks each part rlgate can use and prints one line per part: ok, warn (works, with less: e.g. the TypeScript " +
        "kernels instead of the native ones) or fail (will not work), with what to do. Exits 1 when a part fails.",
    )
    .option(
      "--upstream <url[,url…]>",
      "also check that inference servers answer GET /v1/models (e.g. http://vllm-host:8000; several replicas: a line each)",
    )
    .option("--upstreams-file <file>", "also check every replica an upstreams file lists (as rlgate serve reads it)")
    .option("--python <path>", "the Python that runs your trainer", process.env.RLGATE_PYTHON ?? "python3")
    .option(
      "--timeout <duration>",
      "how long to wait for the upstream (500ms, 5s; plain numbers are ms)",
      duration,
      5000,
    )
    .action(async (options: { upstream?: string; upstreamsFile?: string; python: string; timeout: number }) => {
      const checks = [checkNode(), ...(await checkKernels()), checkPython(options.python)];
      checks.push(...(await checkUpstreams(options, options.timeout)));
      console.log(formatChecks(checks));
      process.exitCode = checks.some((c) => c.level === "fail") ? 1 : 0;
    });
}
