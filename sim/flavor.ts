// The one place that picks which inference server the sim imitates. A flavour owns routes, request parsing and
// response shapes; the server core, policies, tokenization and logprobs are shared.
import type { ReasoningField } from "../tokenizer/reasoning-field.ts";
import type { ToolParserName } from "../tokenizer/output-parser.ts";
import type { MoeOptions } from "./moe.ts";
import type { ScriptTurn } from "./script.ts";
import type { Reply, SimHttpError } from "./reply.ts";
import { sglangFlavor } from "./sglang/index.ts";
import { vllmFlavor } from "./vllm/index.ts";

export type FlavorName = "vllm" | "sglang";

/** Settings every handler reads. */
export interface SimContext {
  model: string;
  seed: number;
  script?: readonly ScriptTurn[];
  logprobNoise: number;
  maxModelLen: number;
  /** A jinja chat template replacing Qwen3's (undefined: Qwen3's own). */
  chatTemplate?: string;
  /** vLLM's `--tool-call-parser`: the syntax turns are written and parsed in (undefined: hermes). */
  toolParser?: ToolParserName;
  /** A mixture-of-experts model: responses carry routed experts (sim/moe.ts). */
  moe?: MoeOptions;
  /** The vLLM version answered as: the reasoning field it writes and reads (undefined: `reasoning`, vLLM >= 0.17). */
  reasoningField?: ReasoningField;
  /**
   * The seed of reported logprobs when the weights were updated (sim/weights): another policy scores the same tokens
   * differently. Sampling keeps `seed`, so a fixed request seed samples the same ids under every version.
   */
  logprobSeed?: number;
}

export interface HandlerInput {
  body: unknown;
  ctx: SimContext;
}

export type RouteHandler = (input: HandlerInput) => Reply;

export interface SimFlavor {
  readonly name: FlavorName;
  /** The handler for a method and path; undefined → `notFound`. `null` → the path exists, not with this method. */
  route(method: string, path: string): RouteHandler | null | undefined;
  /** Whether a path generates tokens (where error and reset rates apply). */
  isGeneration(path: string): boolean;
  notFound(): { status: number; body: unknown };
  methodNotAllowed(): { status: number; body: unknown };
  errorBody(error: SimHttpError): unknown;
}

export function selectFlavor(name: FlavorName = "vllm"): SimFlavor {
  switch (name) {
    case "vllm":
      return vllmFlavor;
    case "sglang":
      return sglangFlavor;
    default:
      throw new Error(`unknown sim flavor: ${String(name)}`);
  }
}
