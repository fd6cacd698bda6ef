// The live UI's report routes: training–inference agreement as RL cores report it, and `rlgate replay score` runs.
//   GET  /api/agreement?limit=N   the newest agreement records (one per trainer logprob report), oldest first
//   GET  /api/replays?limit=N     the newest replay runs without their per-call figures
//   GET  /api/replays/{id}        one run with its per-call figures
//   POST /api/replays             a run's report (what `rlgate replay score --gateway URL` sends)
import type { IncomingMessage } from "node:http";
import { z } from "zod";
import type { AgreementRecord, ReplayRecord, ReplaySummary } from "../store/reports.ts";
import { MAX_REPLAY_CALLS } from "../store/reports.ts";
import { fromSnakeCase } from "../util/json-case.ts";

export interface UiReports {
  listAgreement(limit: number): AgreementRecord[];
  listReplays(limit: number): ReplaySummary[];
  getReplay(id: number): ReplayRecord | undefined;
  putReplay(record: Omit<ReplayRecord, "id">): Promise<ReplayRecord>;
}

type Reply = (status: number, value: unknown) => void;
type Fail = (status: number, code: string, message: string) => void;

const MAX_REPLAY_BODY = 32 << 20;
const figure = z.number().nullable();
const text = z.string().max(2000);
const figures = z.object({
  harness: text,
  tokens: z.number().int().nonnegative(),
  pearson: figure,
  k3Kl: figure,
  absDiffMean: figure,
  absDiffP50: figure,
  absDiffP99: figure,
  absDiffMax: figure,
});
const replayBody = z.object({
  at: z.number().positive(),
  kind: z.literal("score"),
  upstream: text,
  source: text,
  selection: text,
  rollouts: z.number().int().nonnegative(),
  completions: z.number().int().nonnegative(),
  threshold: z.number(),
  maxP99: figure,
  overall: figures,
  byHarness: z.array(figures).max(1000),
  skipped: z.number().int().nonnegative(),
  errors: z.number().int().nonnegative(),
  exitCode: z.number().int(),
  verdict: z.enum(["ok", "drift", "error"]),
  calls: z
    .array(
      z.object({
        rolloutId: text,
        callSeq: z.number(),
        choiceIndex: z.number().int(),
        harness: text,
        tokens: z.number().int().nonnegative(),
        pearson: figure,
        absDiffP99: figure,
        absDiffMax: figure,
        k3Kl: figure,
      }),
    )
    .max(MAX_REPLAY_CALLS),
});

function limitOf(url: URL, fallback: number, max: number): number {
  const n = Number(url.searchParams.get("limit") ?? fallback);
  return Number.isInteger(n) && n > 0 ? Math.min(n, max) : fallback;
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_REPLAY_BODY) throw new RangeError(`body over ${MAX_REPLAY_BODY} bytes`);
    chunks.push(chunk as Buffer);
  }
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

export const isReportPath = (path: string) =>
  path === "/api/agreement" || path === "/api/replays" || path.startsWith("/api/replays/");

/** Answers a report route (the caller checked the token). */
export async function handleReport(
  reports: UiReports,
  req: IncomingMessage,
  url: URL,
  reply: Reply,
  fail: Fail,
): Promise<void> {
  const path = url.pathname;
  if (path === "/api/agreement" && req.method === "GET")
    return reply(200, { points: reports.listAgreement(limitOf(url, 2000, 10_000)) });
  if (path === "/api/replays" && req.method === "GET")
    return reply(200, { replays: reports.listReplays(limitOf(url, 100, 1000)) });
  if (path === "/api/replays" && req.method === "POST") {
    let body: unknown;
    try {
      body = fromSnakeCase(await readBody(req));
    } catch (error) {
      return fail(400, "RLGATE_BAD_REQUEST", `the body must be a replay report as JSON (${(error as Error).message})`);
    }
    const parsed = replayBody.safeParse(body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      return fail(400, "RLGATE_BAD_REQUEST", `replay report: ${issue.path.join(".") || "body"}: ${issue.message}`);
    }
    const stored = await reports.putReplay(parsed.data);
    return reply(201, { id: stored.id });
  }
  const id = path.startsWith("/api/replays/") ? Number(path.slice("/api/replays/".length)) : NaN;
  if (req.method === "GET" && Number.isSafeInteger(id)) {
    const replay = reports.getReplay(id);
    return replay ? reply(200, replay) : fail(404, "RLGATE_NOT_FOUND", `no replay run ${id}`);
  }
  return fail(405, "RLGATE_BAD_REQUEST", `${req.method} ${path} is not served`);
}
