// The task format `rlgate run` reads (docs/runner.md): a folder holding
//   task.json     {"verifier": "…", "test_paths"?: [...], "tests_dir"?: "tests", "setup"?: "…", "timeout"?: s, "verifier_timeout"?: s,
//                  "image"?: "OCI image", "workdir"?: "/testbed", "fail_to_pass"?: [...], "pass_to_pass"?: [...]}
//   prompt.md     what the harness is asked
//   workspace/    the files the agent works on (the read-only image every rollout's overlay starts from); with an
//                 `image`, optional: copied over its workdir
//   tests/        hidden tests: copied into the workspace only when grading
// Datasets (runner/datasets.ts) make the same Task without a folder.
import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { z } from "zod";

export class TaskError extends Error {
  readonly code = "RLGATE_BAD_TASK";
}

const relativePath = z
  .string()
  .min(1)
  .refine(
    (p) => !p.startsWith("/") && !p.split("/").includes(".."),
    "must be a relative path inside the workspace, without '..'",
  );

const taskSchema = z
  .object({
    name: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,128}$/, "letters, digits, . _ - (at most 128)")
      .optional(),
    verifier: z.string().min(1),
    tests_dir: relativePath.default("tests"),
    test_paths: z.array(relativePath).optional(),
    setup: z.string().optional(),
    timeout: z.number().positive().optional(),
    verifier_timeout: z.number().positive().default(300),
    image: z.string().min(1).optional(),
    workdir: z
      .string()
      .regex(/^\/[^,:\s]*$/, "an absolute path inside the image (no ',', ':' or blanks)")
      .refine((p) => !p.split("/").includes(".."), "without '..'")
      .optional(),
    fail_to_pass: z.array(z.string().min(1)).optional(),
    pass_to_pass: z.array(z.string().min(1)).optional(),
  })
  .strict();

/** How the reward is read from grading: the verifier's exit status, or named tests in its output (SWE-bench). */
export type RewardRule = { kind: "exit_code" } | { kind: "tests"; failToPass: string[]; passToPass: string[] };

/** Where an image task's workspace is when task.json names none. */
export const DEFAULT_WORKDIR = "/workspace";

export interface Task {
  name: string;
  /** The task's folder, or where a dataset row came from (FILE#line). */
  dir: string;
  prompt: string;
  /** The workspace folder (read-only lower layer of every rollout); with an image, copied over its workdir; null
   * when the image holds the whole workspace. */
  workspace: string | null;
  /** An OCI image the task runs in (`--sandbox podman` or `kubernetes`), or null for a folder task (bwrap). */
  image: string | null;
  /** The workspace's path inside the image. */
  workdir: string;
  /** A patch of hidden tests applied at grading (SWE-bench's test_patch), besides or instead of tests/. */
  testPatch: string | null;
  reward: RewardRule;
  /** Hidden tests, or null when the task has none (the verifier then checks the workspace alone). */
  tests: string | null;
  testsDir: string;
  /** Paths whose agent edits are reverted before grading (tests_dir, plus test_paths). */
  testPaths: string[];
  verifier: string;
  setup: string | null;
  timeoutSec: number | null;
  verifierTimeoutSec: number;
}

export function loadTask(dir: string): Task {
  const root = realpathSync(resolve(dir));
  const file = join(root, "task.json");
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch (cause) {
    throw new TaskError(`${file}: ${(cause as Error).message}`, { cause });
  }
  const parsed = taskSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new TaskError(`${file}: ${issue.path.join(".") || "(top)"}: ${issue.message}`);
  }
  const t = parsed.data;
  const promptFile = join(root, "prompt.md");
  if (!existsSync(promptFile)) throw new TaskError(`${root}: prompt.md is missing (what the harness is asked)`);
  const workspace = join(root, "workspace");
  const hasWorkspace = existsSync(workspace) && statSync(workspace).isDirectory();
  if (!hasWorkspace && !t.image) throw new TaskError(`${root}: workspace/ is missing (or name an "image")`);
  if (t.workdir && !t.image) throw new TaskError(`${file}: workdir: only for a task with an "image"`);
  const tests = join(root, "tests");
  return {
    name: t.name ?? basename(root),
    dir: root,
    prompt: readFileSync(promptFile, "utf8").trim(),
    workspace: hasWorkspace ? workspace : null,
    image: t.image ?? null,
    workdir: t.workdir ?? DEFAULT_WORKDIR,
    testPatch: null,
    reward: rewardRule(t.fail_to_pass, t.pass_to_pass),
    tests: existsSync(tests) ? tests : null,
    testsDir: t.tests_dir,
    testPaths: [...new Set([t.tests_dir, ...(t.test_paths ?? [])])],
    verifier: t.verifier,
    setup: t.setup ?? null,
    timeoutSec: t.timeout ?? null,
    verifierTimeoutSec: t.verifier_timeout,
  };
}

export function rewardRule(failToPass?: string[], passToPass?: string[]): RewardRule {
  if (!failToPass?.length && !passToPass?.length) return { kind: "exit_code" };
  return { kind: "tests", failToPass: failToPass ?? [], passToPass: passToPass ?? [] };
}

/** `--tasks`: a task folder, a task.json, or a folder whose sub-folders are tasks. */
export function loadTasks(path: string): Task[] {
  const abs = resolve(path);
  if (!existsSync(abs)) throw new TaskError(`--tasks ${path}: no such file or folder`);
  if (statSync(abs).isFile()) {
    if (basename(abs) !== "task.json") throw new TaskError(`--tasks ${path}: expected a task folder or its task.json`);
    return [loadTask(join(abs, ".."))];
  }
  if (existsSync(join(abs, "task.json"))) return [loadTask(abs)];
  const tasks = readdirSync(abs)
    .filter((name) => existsSync(join(abs, name, "task.json")))
    .sort()
    .map((name) => loadTask(join(abs, name)));
  if (tasks.length === 0) throw new TaskError(`--tasks ${path}: no task.json in it or in its sub-folders`);
  const names = new Set<string>();
  for (const t of tasks) {
    if (names.has(t.name))
      throw new TaskError(`two tasks are named '${t.name}': names must differ (they are the groups)`);
    names.add(t.name);
  }
  return tasks;
}
