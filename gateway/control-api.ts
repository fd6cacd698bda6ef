// The control API (JSON under /api): rollouts are created by whatever drives the harness, which hands the harness a
// base URL, and finished with a reward and a status. Calls and rollouts can be listed and read.
import { randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import type { CallRecord, RolloutRecord } from "../store/records.ts";
import { rolloutTrainSegments } from "../trajectory/train-segments.ts";
import { ROLLOUT_KEY_PREFIX } from "./attribution.ts";
import { boundedStringify } from "../util/bounded-json.ts";
import { checkControlToken } from "./access.ts";
import { branchInputSchema, branchOf, resolveBranch } from "./branching/spec.ts";
import { checkEntropyTopK } from "./branching/entropy.ts";
import { parseJsonBody, readBody } from "./body.ts";
import type { GatewayContext } from "./context.ts";
import { GatewayError } from "./errors.ts";
import { toSnakeCase } from "../util/json-case.ts";
import { policyRoute } from "./policy/control.ts";
import { rolloutPageRequest } from "./rollout-listing.ts";
import { seriesAnswer } from "./series-route.ts";
import type { RolloutPage } from "../store/rollout-search.ts";

/** The trajectory stream carries the round as a uint32 (0: none given). */
const MAX_ROUND = 2 ** 32 - 1;
const MAX_DEADLINE_S = 365 * 24 * 3600;

const createSchema = z
  .object({
    id: z
      .string()
      .regex(/^[A-Za-z0-9._~-]{1,128}$/, "id may hold letters, digits and . _ ~ - (at most 128)")
      .optional(),
    group: z.string().max(512).nullable().optional(),
    task: z.string().max(512).nullable().optional(),
    harness: z.string().max(512).nullable().optional(),
    metadata: z.record(z.unknown()).optional(),
    /** The policy version serving this rollout's calls (a call's x-rlgate-policy-version header overrides it). */
    policy_version: z
      .union([z.string().max(128), z.number().finite()])
      .nullable()
      .optional(),
    /** The training round (e.g. the step) the rollout belongs to; with `group` it names the RL group. */
    round: z
      .number({ invalid_type_error: "expected a positive integer" })
      .int("expected a positive integer")
      .positive("expected a positive integer")
      .max(MAX_ROUND, `expected a positive integer up to ${MAX_ROUND}`)
      .optional(),
    /** Seconds from creation after which the gateway finishes the rollout, still open, as `timeout`. */
    deadline_s: z
      .number({ invalid_type_error: "expected a positive number of seconds" })
      .positive("expected a positive number of seconds")
      .max(MAX_DEADLINE_S, `expected at most ${MAX_DEADLINE_S} seconds (a year)`)
      .optional(),
    /** A branch of a finished rollout: its calls before `at_call` are answered from it (gateway/branching). */
    branch: branchInputSchema.optional(),
  })
  .strict();

const FINISH_STATUSES = ["ok", "infra_error", "timeout", "aborted"] as const;
const finishSchema = z
  .object({
    reward: z.number().finite().nullable().optional(),
    status: z.enum(FINISH_STATUSES).default("ok"),
    // Merged into the rollout's metadata (key by key): what whoever ran the rollout learned on the way, e.g. the
    // stage `rlgate run` failed in and its log.
    metadata: z.record(z.unknown()).optional(),
  })
  .strict()
  .refine((v) => v.status !== "ok" || typeof v.reward === "number", {
    message: "a rollout finished with status 'ok' needs a numeric 'reward'",
    path: ["reward"],
  });

function validate<T>(schema: z.ZodType<T, z.ZodTypeDef, unknown>, body: unknown): T {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const param = issue.path.join(".");
  throw new GatewayError("RLGATE_BAD_REQUEST", `${param ? `${param}: ` : ""}${issue.message}`, {
    param: param || undefined,
  });
}

function newRolloutId(): string {
  return `r_${Date.now().toString(36)}${randomBytes(6).toString("hex")}`;
}

function newRolloutKey(): string {
  return ROLLOUT_KEY_PREFIX + randomBytes(24).toString("base64url");
}

type CreateInput = z.infer<typeof createSchema>;

/** The new rollout; null when one with this id was created meanwhile (by a concurrent request, on any worker). */
async function createRollout(ctx: GatewayContext, id: string, input: CreateInput): Promise<RolloutRecord | null> {
  try {
    rolloutTrainSegments(input.metadata);
  } catch (error) {
    throw new GatewayError("RLGATE_BAD_REQUEST", `metadata.train_segments: ${(error as Error).message}`, {
      param: "metadata.train_segments",
    });
  }
  checkEntropyTopK(input.metadata);
  const branch = input.branch
    ? resolveBranch(ctx.store, id, input.branch, ctx.tokenPrompts ? "tokens" : "messages")
    : null;
  const createdAt = Date.now();
  const rollout: RolloutRecord = {
    id,
    key: newRolloutKey(),
    group: input.group ?? null,
    task: input.task ?? null,
    harness: input.harness ?? null,
    metadata: branch ? { ...input.metadata, branch } : (input.metadata ?? {}),
    policyVersion:
      input.policy_version === undefined || input.policy_version === null ? null : String(input.policy_version),
    round: input.round ?? null,
    deadlineAt: deadlineOf(ctx, createdAt, input),
    status: "open",
    reward: null,
    createdAt,
    finishedAt: null,
  };
  return (await ctx.store.putNewRollout(rollout)) ? rollout : null;
}

/**
 * When the rollout is due (epoch ms, whole): its own `deadline_s`, else the gateway's --rollout-timeout, else never.
 * Past it the gateway finishes the rollout as `timeout` (rollout-deadlines.ts).
 */
function deadlineOf(ctx: GatewayContext, createdAt: number, input: CreateInput): number | null {
  if (input.deadline_s !== undefined) return createdAt + Math.round(input.deadline_s * 1000);
  return ctx.config.rolloutTimeoutMs > 0 ? createdAt + Math.round(ctx.config.rolloutTimeoutMs) : null;
}

function sameBranch(existing: RolloutRecord, input: CreateInput): boolean {
  const kept = branchOf(existing);
  return kept === null || input.branch === undefined
    ? kept === null && input.branch === undefined
    : kept.of === input.branch.of && kept.at_call === input.branch.at_call && kept.at_token === input.branch.at_token;
}

/** Whether a repeated create asks for the rollout that exists (same group, task, harness and metadata, still open). */
function sameCreation(existing: RolloutRecord, input: CreateInput): boolean {
  return (
    existing.status === "open" &&
    existing.group === (input.group ?? null) &&
    existing.task === (input.task ?? null) &&
    existing.harness === (input.harness ?? null) &&
    (existing.round ?? null) === (input.round ?? null) &&
    (input.deadline_s === undefined ||
      existing.deadlineAt === existing.createdAt + Math.round(input.deadline_s * 1000)) &&
    // A branch's settings were resolved into its metadata on creation (call_seq, seed): its backbone and point, and
    // the rest of the metadata, are compared.
    sameBranch(existing, input) &&
    JSON.stringify(input.branch ? { ...existing.metadata, branch: undefined } : existing.metadata) ===
      JSON.stringify(input.branch ? { ...input.metadata, branch: undefined } : (input.metadata ?? {}))
  );
}

function baseUrls(ctx: GatewayContext, req: IncomingMessage, id: string): { openai: string; anthropic: string } {
  const origin = ctx.config.publicUrl?.replace(/\/+$/, "") ?? `http://${req.headers.host ?? "127.0.0.1"}`;
  return { openai: `${origin}/r/${id}/v1`, anthropic: `${origin}/r/${id}` };
}

/** Every answer in snake_case (util/json-case.ts); records keep their TypeScript names inside. */
function sendJson(res: ServerResponse, status: number, value: unknown): void {
  sendJsonBytes(res, status, Buffer.from(boundedStringify(toSnakeCase(value)))); // what was stored never makes a read fail
}

function sendJsonBytes(res: ServerResponse, status: number, body: Buffer): void {
  res.writeHead(status, { "content-type": "application/json", "content-length": body.length });
  res.end(body);
}

function rolloutView(ctx: GatewayContext, req: IncomingMessage, rollout: RolloutRecord, withKey: boolean) {
  const { key, ...rest } = rollout;
  return {
    ...rest,
    // Always present, also on records written before they existed.
    round: rollout.round ?? null,
    deadlineAt: rollout.deadlineAt ?? null,
    // Where the rollout stands in the finished log (null while open): the exact order rollouts finished in, which
    // replay follows (finished_at is in ms, and many finishes share one).
    finishCursor: ctx.store.finishCursor(rollout.id),
    ...(withKey ? { key } : {}),
    calls: ctx.store.countCalls(rollout.id),
    base_urls: baseUrls(ctx, req, rollout.id),
  };
}

/** A path segment, percent-decoded; a malformed escape (`%`, `%ZZ`, `%E0%A4%A`) is the client's fault: a 400. */
function pathSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new GatewayError(
      "RLGATE_BAD_REQUEST",
      `the path segment '${segment.slice(0, 200)}' has a malformed percent-escape`,
    );
  }
}

function findCall(ctx: GatewayContext, rolloutId: string | null, seqText: string): CallRecord {
  const seq = Number(seqText);
  const call = Number.isSafeInteger(seq) ? ctx.store.getCall(rolloutId, seq) : undefined;
  if (!call) throw new GatewayError("RLGATE_NOT_FOUND", `unknown call '${seqText}'`);
  return call;
}

function requireRollout(ctx: GatewayContext, id: string): RolloutRecord {
  const rollout = ctx.store.getRollout(id);
  if (!rollout) throw new GatewayError("RLGATE_UNKNOWN_ROLLOUT", `unknown rollout '${id}'`);
  return rollout;
}

export async function handleControlApi(
  ctx: GatewayContext,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
): Promise<void> {
  checkControlToken(ctx, req);
  const parts = url.pathname.split("/").filter(Boolean).map(pathSegment); // ["api", ...]
  const method = req.method ?? "GET";

  if (parts[1] === "rollouts" && parts.length === 2) {
    if (method === "POST") {
      const input = validate(createSchema, parseJsonBody(await readBody(req, ctx.config.bodyLimitBytes)));
      const id = input.id ?? newRolloutId();
      const created = await createRollout(ctx, id, input);
      if (!created) throw new GatewayError("RLGATE_BAD_REQUEST", `rollout '${id}' already exists`);
      return sendJson(res, 201, rolloutView(ctx, req, created, true));
    }
    if (method === "GET") {
      let page: RolloutPage;
      try {
        page = ctx.store.pageRollouts(rolloutPageRequest(url));
      } catch (error) {
        if (!(error instanceof RangeError)) throw error;
        throw new GatewayError("RLGATE_BAD_REQUEST", error.message, { param: "cursor" });
      }
      return sendJson(res, 200, { ...page, rollouts: page.rollouts.map((r) => rolloutView(ctx, req, r, false)) });
    }
  }

  if (parts[1] === "rollouts" && parts.length >= 3) {
    const id = parts[2]!;
    // Create with an id the caller chose, named in the path so that a balancer hashing on the rollout id sends the
    // create to the same gateway as the rollout's calls (/r/{id}/...). A repeated PUT of the same rollout (a retry
    // whose answer was lost) answers it again rather than failing.
    if (parts.length === 3 && method === "PUT") {
      const input = validate(createSchema, parseJsonBody(await readBody(req, ctx.config.bodyLimitBytes)));
      if (input.id !== undefined && input.id !== id) {
        throw new GatewayError("RLGATE_BAD_REQUEST", `id: '${input.id}' differs from the path's '${id}'`, {
          param: "id",
        });
      }
      validate(createSchema, { id });
      const created = await createRollout(ctx, id, input);
      if (created) return sendJson(res, 201, rolloutView(ctx, req, created, true));
      // The id is taken (earlier, or just now by a concurrent request on any worker): a repeat of the same create is
      // answered with the rollout, anything else is a conflict.
      const existing = ctx.store.getRollout(id)!;
      if (!sameCreation(existing, input)) {
        throw new GatewayError("RLGATE_CONFLICT", `rollout '${id}' already exists with other settings`);
      }
      return sendJson(res, 200, rolloutView(ctx, req, existing, true));
    }
    if (parts.length === 3 && method === "GET") {
      return sendJson(res, 200, rolloutView(ctx, req, requireRollout(ctx, id), true));
    }
    if (parts.length === 4 && parts[3] === "finish" && method === "POST") {
      const rollout = requireRollout(ctx, id);
      const input = validate(finishSchema, parseJsonBody(await readBody(req, ctx.config.bodyLimitBytes)));
      if (rollout.status !== "open") {
        throw new GatewayError("RLGATE_BAD_REQUEST", `rollout '${id}' is already finished (${rollout.status})`);
      }
      const finished: RolloutRecord = {
        ...rollout,
        status: input.status,
        reward: input.reward ?? null,
        metadata: input.metadata ? { ...rollout.metadata, ...input.metadata } : rollout.metadata,
        finishedAt: Date.now(),
      };
      // Checked again inside the write: another worker (or request) may have finished it since it was read above.
      if ((await ctx.store.finishOpenRollout(finished)) === null) {
        const now = ctx.store.getRollout(id)?.status ?? "finished";
        throw new GatewayError("RLGATE_BAD_REQUEST", `rollout '${id}' is already finished (${now})`);
      }
      // The finish is committed: a summary that cannot be made now is said so, not turned into a failed finish.
      const summary = await ctx.trajectories.summary(finished).then(
        (trajectories) => ({ trajectories }),
        (error: unknown) => ({
          trajectories: null,
          trajectoriesError: error instanceof Error ? error.message : String(error),
        }),
      );
      return sendJson(res, 200, { ...rolloutView(ctx, req, finished, false), ...summary });
    }
    if (parts.length === 4 && parts[3] === "trajectories" && method === "GET") {
      return sendJsonBytes(res, 200, await ctx.trajectories.json(requireRollout(ctx, id)));
    }
    if (parts[3] === "calls" && method === "GET") {
      requireRollout(ctx, id);
      if (parts.length === 4) return sendJsonBytes(res, 200, await ctx.trajectories.calls(id));
      if (parts.length === 5) return sendJson(res, 200, findCall(ctx, id, parts[4]!));
    }
  }

  const policy = await policyRoute(ctx.policy, parts, method, async () => {
    const body = await readBody(req, ctx.config.bodyLimitBytes);
    return body.length === 0 ? {} : parseJsonBody(body); // a pause or resume with its defaults needs no body
  });
  if (policy) return sendJson(res, 200, policy);

  if (parts[1] === "series" && parts.length === 2 && method === "GET")
    return sendJson(res, 200, seriesAnswer(ctx.store, url));

  if (parts[1] === "calls" && method === "GET") {
    // Calls no rollout claimed.
    if (parts.length === 2) return sendJsonBytes(res, 200, await ctx.trajectories.calls(null));
    if (parts.length === 3) return sendJson(res, 200, findCall(ctx, null, parts[2]!));
  }

  throw new GatewayError("RLGATE_NOT_FOUND", `no control API route ${method} ${url.pathname}`);
}
