// The task format `rlgate run` reads (docs/runner.md): a folder holding
//   task.json     {"verifier": "…", "test_paths"?: [...], "tests_dir"?: "tests", "setup"?: "…", "timeout"?: s, "verifier_timeout"?: s}
//   prompt.md     what the harness is asked
//   workspace/    the files the agent works on (the read-only image every rollout's overlay starts from)
//   tests/        hidden tests: copied into the workspace only when grading
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
  })
  .strict();

export interface Task {
  name: string;
  dir: string;
  prompt: string;
  /** The workspace folder (read-only lower layer of every rollout). */
  workspace: string;
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
  if (!existsSync(workspace) || !statSync(workspace).isDirectory())
    throw new TaskError(`${root}: workspace/ is missing`);
  const tests = join(root, "tests");
  return {
    name: t.name ?? basename(root),
    dir: root,
    prompt: readFileSync(promptFile, "utf8").trim(),
    workspace,
    tests: existsSync(tests) ? tests : null,
    testsDir: t.tests_dir,
    testPaths: [...new Set([t.tests_dir, ...(t.test_paths ?? [])])],
    verifier: t.verifier,
    setup: t.setup ?? null,
    timeoutSec: t.timeout ?? null,
    verifierTimeoutSec: t.verifier_timeout,
  };
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
