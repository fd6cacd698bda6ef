// Datasets as tasks (`rlgate run --dataset swebench --tasks FILE.jsonl`). SWE-bench-style JSONL: one instance a line,
//   {"instance_id", "image", "problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS", "test_patch"?, "test_cmd"?, "workdir"?}
// FAIL_TO_PASS / PASS_TO_PASS are lists of test ids, or (as in SWE-bench's published rows) JSON strings of such
// lists. Each row becomes an image task: the prompt is the problem statement, the hidden tests are the test patch
// (applied at grading, the files it touches reverted first), and the reward is 1 when every FAIL_TO_PASS and
// PASS_TO_PASS test passed in the test command's output (runner/datasets-test-log.ts).
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { z } from "zod";
import { rewardRule, TaskError, type Task } from "./task.ts";

export const DATASETS = ["swebench"] as const;
export type DatasetKind = (typeof DATASETS)[number];

/** SWE-bench images keep the repository at /testbed. */
export const SWEBENCH_WORKDIR = "/testbed";
/** Without a test_cmd, pytest over the files the test patch touches, with the `-rA` summary the log parser reads. */
export const DEFAULT_TEST_CMD = "python -m pytest -rA {test_files}";

const testList = z.union([
  z.array(z.string()),
  z.string().transform((text, ctx) => {
    try {
      const list: unknown = JSON.parse(text);
      if (Array.isArray(list) && list.every((t) => typeof t === "string")) return list as string[];
    } catch {
      /* said below */
    }
    ctx.addIssue({ code: "custom", message: "expected a list of test ids, or a JSON string of one" });
    return z.NEVER;
  }),
]);

const rowSchema = z
  .object({
    instance_id: z.string().regex(/^[A-Za-z0-9._-]{1,128}$/, "letters, digits, . _ - (at most 128)"),
    image: z.string().min(1).optional(),
    problem_statement: z.string().min(1),
    FAIL_TO_PASS: testList,
    PASS_TO_PASS: testList.default([]),
    test_patch: z.string().optional(),
    test_cmd: z.string().min(1).optional(),
    workdir: z
      .string()
      .regex(/^\/[^,:\s]*$/, "an absolute path without ',', ':' or blanks")
      .optional(),
  })
  .passthrough();

/** The files a unified diff touches (its `diff --git a/X b/Y` lines, Y). */
export function patchedFiles(patch: string): string[] {
  const files = new Set<string>();
  for (const m of patch.matchAll(/^diff --git a\/\S+ b\/(\S+)$/gm)) files.add(m[1]!);
  return [...files];
}

export interface DatasetOptions {
  /** The image of rows without one, with {instance_id} replaced (e.g. a registry's naming scheme). */
  imageTemplate?: string;
}

export function loadSwebench(file: string, options: DatasetOptions = {}): Task[] {
  const path = resolve(file);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (cause) {
    throw new TaskError(`--tasks ${file}: ${(cause as Error).message}`, { cause });
  }
  const tasks: Task[] = [];
  const names = new Set<string>();
  for (const [i, line] of text.split("\n").entries()) {
    if (!line.trim()) continue;
    const where = `${file}:${i + 1}`;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch (cause) {
      throw new TaskError(`${where}: not JSON: ${(cause as Error).message}`, { cause });
    }
    const parsed = rowSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new TaskError(`${where}: ${issue.path.join(".") || "(row)"}: ${issue.message}`);
    }
    const row = parsed.data;
    const image = row.image ?? options.imageTemplate?.replaceAll("{instance_id}", row.instance_id);
    if (!image) throw new TaskError(`${where}: no "image" (or give --image-template)`);
    if (names.has(row.instance_id)) throw new TaskError(`${where}: instance ${row.instance_id} appears twice`);
    names.add(row.instance_id);
    const testFiles = row.test_patch ? patchedFiles(row.test_patch) : [];
    const quoted = testFiles.map((f) => `'${f.replaceAll("'", "'\\''")}'`).join(" ");
    tasks.push({
      name: row.instance_id,
      dir: where,
      prompt: row.problem_statement.trim(),
      workspace: null,
      image,
      workdir: row.workdir ?? SWEBENCH_WORKDIR,
      testPatch: row.test_patch ?? null,
      reward: rewardRule(row.FAIL_TO_PASS, row.PASS_TO_PASS),
      tests: null,
      testsDir: "tests",
      testPaths: testFiles,
      verifier: (row.test_cmd ?? DEFAULT_TEST_CMD).replaceAll("{test_files}", quoted),
      setup: null,
      timeoutSec: null,
      verifierTimeoutSec: 1800,
    });
  }
  if (tasks.length === 0) throw new TaskError(`--tasks ${file}: no instances in it`);
  return tasks;
}

export function loadDataset(kind: DatasetKind, file: string, options: DatasetOptions = {}): Task[] {
  switch (kind) {
    case "swebench":
      return loadSwebench(file, options);
  }
}
