// The control API's weight-update routes (docs/gateway.md, "Weight updates"):
//   GET  /api/policy                 → the state (paused, mode, version, pauses, holding, paused_at, resumes_at)
//   POST /api/policy/pause  {mode?: "abort"|"wait"|"keep" (default abort), timeout_s?: number (default 300)}
//   POST /api/policy/resume {version?: string|number}
// Both POSTs answer the state once the upstreams did it (a wait-mode pause answers once in-flight answers ended), and
// may be repeated: the same pause renews its timeout, a resume of a running gateway resumes the upstreams again.
import { z } from "zod";
import { GatewayError } from "../errors.ts";
import { DEFAULT_PAUSE_TIMEOUT_MS, PAUSE_MODES, type PolicyGate, type PolicyState } from "./gate.ts";

const MAX_TIMEOUT_S = 24 * 3600;

const pauseSchema = z
  .object({
    mode: z.enum(PAUSE_MODES as [string, ...string[]]).default("abort"),
    timeout_s: z.number().positive().max(MAX_TIMEOUT_S).optional(),
  })
  .strict();

const resumeSchema = z
  .object({
    version: z
      .union([z.string().min(1).max(128), z.number().finite()])
      .nullable()
      .optional(),
  })
  .strict();

function parse<T>(schema: z.ZodType<T, z.ZodTypeDef, unknown>, body: unknown): T {
  const result = schema.safeParse(body ?? {});
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const param = issue.path.join(".");
  throw new GatewayError("RLGATE_BAD_REQUEST", `${param ? `${param}: ` : ""}${issue.message}`, {
    param: param || undefined,
  });
}

/** The state as the API shows it. */
export function policyView(state: Readonly<PolicyState>): Record<string, unknown> {
  return { ...state };
}

/**
 * Answers a /api/policy route, or returns null when `parts` (["api", "policy", …]) names none. Upstream failures are
 * answered 502 with the replica that failed.
 */
export async function policyRoute(
  policy: PolicyGate,
  parts: readonly string[],
  method: string,
  readJson: () => Promise<unknown>,
): Promise<Record<string, unknown> | null> {
  if (parts[1] !== "policy") return null;
  if (parts.length === 2 && method === "GET") return policyView(policy.state);
  if (parts.length !== 3 || method !== "POST") return null;
  try {
    if (parts[2] === "pause") {
      const input = parse(pauseSchema, await readJson());
      const timeoutMs = input.timeout_s === undefined ? DEFAULT_PAUSE_TIMEOUT_MS : input.timeout_s * 1000;
      return policyView(await policy.pause(input.mode as PolicyState["mode"] & string, timeoutMs));
    }
    if (parts[2] === "resume") {
      const input = parse(resumeSchema, await readJson());
      const version = input.version === undefined || input.version === null ? null : String(input.version);
      return policyView(await policy.resume(version));
    }
  } catch (error) {
    if (error instanceof GatewayError) throw error;
    throw new GatewayError("RLGATE_UPSTREAM_UNREACHABLE", `the upstreams did not follow: ${(error as Error).message}`, {
      cause: error,
    });
  }
  return null;
}
