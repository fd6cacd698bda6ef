// `rlgate run`: tasks × n rollouts of a harness CLI, each in a bubblewrap sandbox, graded where the agent cannot
// tamper, finished on a gateway with reward and status. Without --gateway it starts one of its own, with the sim.
import { Command, InvalidArgumentError, Option } from "commander";
import { relative, resolve } from "node:path";
import { PROMPT_MODES } from "../gateway/prompts/index.ts";
import { branchSummary } from "../runner/branch.ts";
import { BranchPointError, parseBranchAt, type BranchAt } from "../runner/branch-points.ts";
import { resolveHarness, type Harness } from "../runner/harnesses.ts";
import { Progress, summaryTable } from "../runner/progress.ts";
import { DATASETS, loadDataset, type DatasetKind } from "../runner/datasets.ts";
import { DEFAULT_TIMEOUT_SEC, runTasks } from "../runner/run.ts";
import { DEFAULT_LIMITS } from "../runner/sandbox.ts";
import { loadTasks, type Task } from "../runner/task.ts";
import { startRunGateway, type RunGateway } from "./run-gateway.ts";
import { rolloutUiUrl } from "../ui/rollout-link.ts";

function positive(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError("expected a positive integer");
  return n;
}

/** vLLM's default --max-logprobs is the most a server takes by default. */
function topK(value: string): number {
  const n = positive(value);
  if (n > 20) throw new InvalidArgumentError("expected 1..20 (vLLM's default --max-logprobs is 20)");
  return n;
}

function seconds(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("expected a number of seconds > 0");
  return n;
}

function bytes(value: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(k|m|g)?i?b?$/i.exec(value.trim());
  if (!match) throw new InvalidArgumentError("expected a size such as 4g, 512m or 1073741824");
  const scale = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[(match[2] ?? "").toLowerCase() as ""];
  return Math.floor(Number(match[1]) * scale);
}

function branchAt(value: string): BranchAt {
  try {
    return parseBranchAt(value);
  } catch (error) {
    if (error instanceof BranchPointError) throw new InvalidArgumentError(error.message);
    throw error;
  }
}

// Options in the order --help lists them: what most runs need first, Kubernetes and datasets last.
export function runCommand(): Command {
  return new Command("run")
    .summary("run tasks n times with a harness CLI, each rollout in a sandbox, graded with hidden tests")
    .description(
      "For each task and each of its n rollouts: create the rollout on the gateway (group = the task), run the " +
        "harness in a bubblewrap sandbox whose workspace is an overlay over the task image and whose only way out is " +
        "the gateway, grade it in a fresh sandbox (hidden tests copied in, edits to test paths reverted), and finish " +
        "it with reward and status (ok, timeout, infra_error). With --sandbox podman, tasks that name an OCI image " +
        "run in containers instead (SWE-bench-style datasets with --dataset swebench). Task format and limits: " +
        "docs/runner.md.",
    )
    .requiredOption(
      "--tasks <dir|file>",
      "a task folder, its task.json, or a folder of task folders; with --dataset: the dataset's file",
    )
    .addOption(
      new Option(
        "--sandbox <kind>",
        "bwrap: folder tasks in bubblewrap sandboxes (no daemon); podman: tasks that name an OCI image, each rollout in a container (rootful podman, runc); kubernetes: image tasks, each rollout a Pod on the cluster of your kubeconfig (docs/deploy.md#kubernetes)",
      )
        .choices(["bwrap", "podman", "kubernetes"])
        .default("bwrap"),
    )
    .requiredOption(
      "--harness <name|template>",
      "a preset (qwen-code, claude-code, codex, opencode, pi, openclaw; openclaw-responses and openclaw-messages: OpenClaw on the Responses or Anthropic Messages API) or a shell command with {prompt} (also {base_url}, {anthropic_base_url}, {model}, {rollout})",
    )
    .option("-n, --n <n>", "rollouts per task (the group size)", positive, 4)
    .option("--concurrency <k>", "rollouts running at once", positive, 2)
    .option(
      "--timeout <s>",
      `harness time limit per rollout, in seconds (default: the task's task.json timeout, else ${DEFAULT_TIMEOUT_SEC})`,
      seconds,
    )
    .option("--gateway <url>", "a running gateway (rlgate serve); default: one of its own with the built-in sim")
    .option("--token <token>", "control API token of --gateway", process.env.RLGATE_TOKEN)
    .option(
      "--env <name=value>",
      "a variable for the harness, set after the preset's (e.g. QWEN_CODE_NO_RELAUNCH=1); repeatable",
      (value: string, previous: Record<string, string> | undefined) => {
        const eq = value.indexOf("=");
        if (eq < 1) throw new InvalidArgumentError("expected NAME=VALUE");
        return { ...previous, [value.slice(0, eq)]: value.slice(eq + 1) };
      },
    )
    .option("--generation <g>", "policy version: recorded on each rollout (metadata.generation), groups named TASK@G")
    .option(
      "--round <n>",
      "training round given to every rollout (control API round; e.g. the training step): the RL core groups rollouts by task and round, so rounds never mix",
      positive,
    )
    .option("--model <name>", "model name given to the harness (default: the one the gateway's upstream serves)")
    .option("--sim-script <file>", "without --gateway: the sim plays this scripted policy (rlgate sim --script)")
    .option(
      "--data <dir>",
      "without --gateway: the store of its own gateway, kept after the run (default: a new folder under .rlgate/runs)",
    )
    .option(
      "--model-dir <dir>",
      "without --gateway: the model's Hugging Face files, as rlgate serve --upstream sim --model-dir: its gateway and sim use that chat family (Qwen3-Coder, Llama 3.x, gpt-oss, DeepSeek V3.1; default Qwen3, built in); the sim writes tool calls in its syntax",
    )
    .addOption(
      new Option(
        "--prompts <mode>",
        "without --gateway: its gateway's prompt mode, as rlgate serve --prompts (tokens: branch points at token positions)",
      )
        .choices([...PROMPT_MODES])
        .default("messages"),
    )
    .addOption(
      new Option(
        "--memory <size>",
        "memory per sandbox: all its processes' resident memory plus its in-RAM files (/tmp, /dev/shm), and each process's data segment",
      )
        .argParser(bytes)
        .default(DEFAULT_LIMITS.memoryBytes, `${DEFAULT_LIMITS.memoryBytes / 1024 ** 3}g`),
    )
    .addOption(
      new Option(
        "--disk <size>",
        "disk per rollout: what its agent writes (workspace changes, home; with podman also the container's root) is on a filesystem of that size of its own, writes past it fail with ENOSPC (bwrap without root: a watchdog stops the sandbox past it)",
      )
        .argParser(bytes)
        .default(DEFAULT_LIMITS.diskBytes, `${DEFAULT_LIMITS.diskBytes! / 1024 ** 3}g`),
    )
    .option("--processes <n>", "processes and threads per sandbox", positive, DEFAULT_LIMITS.processes)
    .option("--cpu <s>", "CPU seconds per process in a sandbox", positive, DEFAULT_LIMITS.cpuSeconds)
    .option(
      "--mount-ro <dir>",
      "a folder every sandbox sees read-only at the same path, its bin/ on PATH (a harness CLI installed outside /usr); repeatable",
      (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
    )
    .option("--work-dir <dir>", "where task images and rollout folders go (default: the system's temporary folder)")
    .option("--keep", "keep the task images and rollout folders (upper layers, logs) instead of removing them", false)
    .option(
      "--branch <K>",
      "after each rollout (the backbone), K branches of it: the harness runs again in a fresh sandbox, the gateway answers the calls before a decision point with the backbone's answers and samples from there (docs/runner.md#branching); groups hold n × (1 + K)",
      positive,
    )
    .addOption(
      new Option(
        "--branch-at <how>",
        "decision points: entropy (the calls whose sampled tokens were least likely), uniform (spread over the calls), or calls=i,j (0-based call positions); in --prompts tokens also token positions: tokens:entropy (the least likely sampled tokens), tokens:uniform, or tokens=i:p,j:q (call i, token p)",
      )
        .argParser(branchAt)
        .default(parseBranchAt("entropy"), "entropy"),
    )
    .option(
      "--entropy-top-k <k>",
      "with --branch-at entropy or tokens:entropy: the backbone's calls ask the upstream for the k most likely tokens at each position (1..20), and the gateway records each sampled token's entropy from them (default 5)",
      topK,
    )
    .addOption(
      new Option(
        "--on-divergence <what>",
        "a branch whose prompt differs from the backbone's before its point (a tool's output changed): sample on from there, or drop it (finished aborted, never trained)",
      )
        .choices(["sample", "drop"])
        .default("sample"),
    )
    .option("--namespace <ns>", "with --sandbox kubernetes: the namespace of rollout Pods", "rlgate")
    .option(
      "--tools-image <ref>",
      "with --sandbox kubernetes: the rlgate image Pods copy node and the harness CLIs from (docs/deploy/kubernetes/Containerfile)",
    )
    .option(
      "--gateway-service <host:port>",
      "with --sandbox kubernetes: the gateway as rollout Pods reach it (default: the host and port of --gateway)",
    )
    .option(
      "--gateway-labels <k=v,...>",
      "with --sandbox kubernetes: labels of the gateway's Pods, the one place rollout Pods may connect to",
      "app.kubernetes.io/name=rlgate-gateway",
    )
    .addOption(
      new Option(
        "--dataset <format>",
        "read --tasks as a dataset: swebench = JSONL rows {instance_id, image, problem_statement, FAIL_TO_PASS, PASS_TO_PASS, test_patch?, test_cmd?} (reward 1 when all those tests pass); needs --sandbox podman or kubernetes",
      ).choices([...DATASETS]),
    )
    .option("--image-template <ref>", "with --dataset: the image of rows without one, {instance_id} replaced")
    .option("--json", "print the results as JSON on stdout (one array) instead of the summary table", false)
    .action(async (opts, command: Command) => {
      let tasks: Task[];
      let harness: Harness;
      try {
        tasks = opts.dataset
          ? loadDataset(opts.dataset as DatasetKind, opts.tasks, { imageTemplate: opts.imageTemplate })
          : loadTasks(opts.tasks);
        harness = resolveHarness(opts.harness);
        const unavailable = harness.unavailable?.();
        if (unavailable) throw new Error(`harness ${harness.name}: ${unavailable}`);
        // A harness that needs more than the default memory (OpenClaw's worker threads) gets it unless --memory says.
        if (harness.minMemoryBytes && command.getOptionValueSource("memory") === "default")
          opts.memory = Math.max(opts.memory, harness.minMemoryBytes);
      } catch (error) {
        console.error(`rlgate run: ${(error as Error).message}`);
        process.exitCode = 2;
        return;
      }
      // These shape the gateway run starts itself: with --gateway they would be dropped (every reward 0), so refused.
      const ownGatewayOnly = ["simScript", "modelDir", "prompts", "data"].filter(
        (name) => command.getOptionValueSource(name) === "cli",
      );
      if (opts.gateway && ownGatewayOnly.length) {
        const flags = ownGatewayOnly.map((name) => `--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`);
        console.error(
          `rlgate run: ${flags.join(", ")} ${flags.length > 1 ? "are" : "is"} for the gateway rlgate run starts itself, not for --gateway: ` +
            "start that gateway with them instead (rlgate serve --model-dir, --prompts, --data; a scripted sim: rlgate sim --script, then rlgate serve --upstream), or drop --gateway",
        );
        process.exitCode = 2;
        return;
      }
      let gateway: RunGateway | null = null;
      let gatewayUrl: string = opts.gateway;
      let token: string | undefined = opts.token;
      if (!gatewayUrl) {
        try {
          gateway = await startRunGateway({
            simScript: opts.simScript,
            data: opts.data,
            modelDir: opts.modelDir,
            prompts: opts.prompts,
          });
        } catch (error) {
          // A model directory the family was read from can still lack its tokenizer: said in one sentence.
          console.error(`rlgate run: ${(error as Error).message}`);
          process.exitCode = 2;
          return;
        }
        console.error(
          `rlgate run: gateway ${gateway.url} with ${gateway.description}, store ${gateway.dataDir} (kept)`,
        );
        gatewayUrl = gateway.url;
        token = gateway.token;
      } else if (!token) {
        console.error(
          `rlgate run: --gateway without --token: the control API of ${gatewayUrl} is open to anything that can reach it (start it with rlgate serve --token, and pass --token)`,
        );
      }
      const ac = new AbortController();
      const onSignal = () => ac.abort();
      process.once("SIGINT", onSignal);
      process.once("SIGTERM", onSignal);
      const progress = new Progress(tasks.length * opts.n * (1 + (opts.branch ?? 0)));
      try {
        const results = await runTasks({
          tasks,
          sandbox: opts.sandbox,
          kubernetes:
            opts.sandbox === "kubernetes"
              ? {
                  namespace: opts.namespace,
                  toolsImage: opts.toolsImage ?? "",
                  gatewayService: opts.gatewayService ?? new URL(gatewayUrl).host,
                  gatewayLabels: Object.fromEntries(
                    String(opts.gatewayLabels)
                      .split(",")
                      .map((kv) => kv.split("=") as [string, string]),
                  ),
                }
              : undefined,
          harness,
          n: opts.n,
          concurrency: opts.concurrency,
          timeoutSec: opts.timeout,
          gatewayUrl,
          token,
          model: opts.model,
          generation: opts.generation,
          round: opts.round,
          env: opts.env,
          limits: { memoryBytes: opts.memory, processes: opts.processes, cpuSeconds: opts.cpu, diskBytes: opts.disk },
          workDir: opts.workDir ? resolve(opts.workDir) : undefined,
          keep: opts.keep,
          mountReadOnly: (opts.mountRo ?? []).map((d: string) => resolve(d)),
          signal: ac.signal,
          events: progress.events(),
          ...(opts.branch
            ? {
                branching: {
                  k: opts.branch,
                  at: opts.branchAt,
                  onDivergence: opts.onDivergence,
                  ...(opts.entropyTopK === undefined ? {} : { entropyTopK: opts.entropyTopK }),
                },
              }
            : {}),
        });
        progress.close();
        if (opts.json) console.log(JSON.stringify(results, null, 2));
        else console.log([summaryTable(results), branchSummary(results)].filter(Boolean).join("\n"));
        const first = results.find((r) => r.rolloutId)?.rolloutId;
        // Its own gateway stops below: keptStoreNote says how to open them then.
        if (first && !gateway)
          console.error(`rlgate run: in the UI: ${rolloutUiUrl(gatewayUrl, first)} (any rollout above: #rollout=ID)`);
        // The gateway holds another result than the grader's (or none): what trains on it would be wrong.
        const unrecorded = results.filter((r) => !r.recorded).length;
        if (unrecorded) {
          console.error(`rlgate run: ${unrecorded} rollout(s) NOT RECORDED on the gateway as graded (exit 1)`);
          process.exitCode = 1;
        }
      } catch (error) {
        progress.close();
        console.error(`rlgate run: ${error instanceof Error ? error.message : String(error)}`);
        process.exitCode = 2;
      } finally {
        process.off("SIGINT", onSignal);
        process.off("SIGTERM", onSignal);
        await gateway?.close();
        if (gateway) console.error(keptStoreNote(gateway.dataDir));
      }
    });
}

/** What the run's own gateway leaves and how to use it, once it is gone (relative paths stay short). */
function keptStoreNote(dir: string): string {
  const rel = relative(process.cwd(), dir);
  const data = rel && !rel.startsWith("..") ? rel : dir;
  return (
    `rlgate run: its gateway has stopped; the rollouts are kept in ${data}: ` +
    `npx rlgate show <rolloutId> --data ${data}; to browse them: npx rlgate serve --data ${data}, then ` +
    `http://127.0.0.1:8700/ui/#rollout=<rolloutId>; to train on them: npx rlgate replay deliver --data ${data} --to-core HOST:PORT ` +
    "(or run with --gateway, a rlgate serve that a rlgate core reads)"
  );
}
