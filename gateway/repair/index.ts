// History repair (`messages` mode, on by default; `rlgate serve --no-repair-history` turns it off): before a chat
// request goes upstream, each earlier assistant turn that the rollout's calls sampled is put back as the model
// produced it wherever the harness changed it in a way the chat template does not undo (see qwen3-turn.ts), so the
// upstream renders the sampled tokens again and the new prompt extends the earlier prompt + completion exactly. The
// harness never sees a difference; the call record says what was repaired (`repairs`).
import { renderedReasoning, setReasoning, type ReasoningField } from "../../tokenizer/reasoning-field.ts";
import { LRUCache } from "lru-cache";
import { reweigh } from "../../util/lru-reweigh.ts";
import type { CallRecord, HistoryRepair as Repair } from "../../store/records.ts";
import type { Store } from "../../store/store.ts";
import type { ChatFamily } from "../../tokenizer/families.ts";
import { QWEN3_CHAT_FORMAT, type ChatFormat } from "../../trajectory/chat-format.ts";
import { isObject, type Json } from "../upstream/fields.ts";
import { DEEPSEEK_V31_TURN } from "./deepseek-v31-turn.ts";
import { GPTOSS_TURN } from "./gptoss-turn.ts";
import { LLAMA3_TURN } from "./llama3-turn.ts";
import { QWEN3_CODER_TURN } from "./qwen3-coder-turn.ts";
import { QWEN3_TURN, type TurnRules } from "./qwen3-turn.ts";
import { contentText, recordedTurns, RolloutTurns, toolCallsOf, type RecordedTurn } from "./recorded-turns.ts";

/** How a family's template writes an earlier assistant turn, by the tool parser that names the family. */
export function turnRulesOf(family: ChatFamily): TurnRules {
  if (family.toolParser === "qwen3_coder") return QWEN3_CODER_TURN;
  if (family.toolParser === "llama3_json") return LLAMA3_TURN;
  if (family.toolParser === "deepseek_v31") return DEEPSEEK_V31_TURN;
  if (family.toolParser === "openai") return GPTOSS_TURN;
  return QWEN3_TURN;
}

export interface RepairResult {
  /** The body to forward: the same object when nothing was repaired. */
  forwarded: Json;
  repairs: Repair[];
}

export interface HistoryRepairOptions {
  /** Characters of sampled turns kept in memory across rollouts (least recently used rollouts go first). */
  maxChars?: number;
  format?: ChatFormat;
  /** How the served model's template writes an earlier assistant turn (default Qwen3's). */
  rules?: TurnRules;
  /**
   * Which name of a message's reasoning the upstream renders (default `reasoning`: vLLM >= 0.17 drops
   * `reasoning_content`, so a turn that carries only that name is repaired).
   */
  reasoningField?: ReasoningField;
}

export class HistoryRepair {
  readonly #store: Store;
  readonly #format: ChatFormat;
  readonly #rules: TurnRules;
  readonly #reasoningField: ReasoningField;
  readonly #rollouts: LRUCache<string, RolloutTurns>;

  constructor(store: Store, options: HistoryRepairOptions = {}) {
    this.#store = store;
    this.#format = options.format ?? QWEN3_CHAT_FORMAT;
    this.#rules = options.rules ?? QWEN3_TURN;
    this.#reasoningField = options.reasoningField ?? "reasoning";
    this.#rollouts = new LRUCache({ maxSize: options.maxChars ?? 64_000_000, sizeCalculation: (turns) => turns.size });
  }

  /** A call was recorded: its sampled turns join its rollout's, when the rollout's are in memory. */
  observe(record: CallRecord): void {
    if (record.rolloutId === null) return;
    const turns = this.#rollouts.get(record.rolloutId);
    if (turns === undefined) return; // read from the store, completely, when a request first needs them
    this.#add(turns, record);
    reweigh(this.#rollouts, record.rolloutId, turns); // its size changed
  }

  /** The chat request to forward, with the rollout's earlier sampled turns put back. */
  repair(rolloutId: string | null, forwarded: Json): RepairResult {
    const messages = forwarded["messages"];
    if (
      rolloutId === null ||
      !Array.isArray(messages) ||
      !messages.some((m) => isObject(m) && m["role"] === "assistant")
    ) {
      return { forwarded, repairs: [] };
    }
    const turns = this.#turns(rolloutId);
    const repairs: Repair[] = [];
    let out: unknown[] | null = null;
    let afterSeq = -1;
    messages.forEach((message: unknown, index) => {
      if (!isObject(message) || message["role"] !== "assistant") return;
      const turn = turns.find(message, afterSeq);
      if (turn === null) return;
      afterSeq = turn.callSeq;
      const fixed = repairTurn(message, turn, this.#rules, this.#reasoningField);
      if (fixed === null) return;
      out ??= [...messages];
      out[index] = fixed.message;
      for (const kind of fixed.kinds) repairs.push({ turn: index, kind, callSeq: turn.callSeq });
    });
    return out === null ? { forwarded, repairs } : { forwarded: { ...forwarded, messages: out }, repairs };
  }

  #add(turns: RolloutTurns, record: CallRecord): void {
    if (turns.seen.seqs.has(record.seq)) return; // read from the store before this worker's own record came by
    turns.seen.seqs.add(record.seq);
    for (const turn of recordedTurns(record, this.#format)) turns.add(turn);
  }

  #turns(rolloutId: string): RolloutTurns {
    return this.#store.followCalls(
      this.#rollouts,
      rolloutId,
      () => new RolloutTurns(),
      (turns, record) => this.#add(turns, record),
    );
  }
}

/** The message the template renders as `turn` was sampled, and what changed; null when nothing needs to. */
function repairTurn(
  message: Json,
  turn: RecordedTurn,
  { renderedHead, sampledHead, faithfulText }: TurnRules,
  reasoningField: ReasoningField,
): { message: Json; kinds: Repair["kind"][] } | null {
  const kinds: Repair["kind"][] = [];
  const fixed: Json = { ...message };
  const harness = {
    reasoning: renderedReasoning(message, reasoningField),
    content: contentText(message["content"]),
    toolCalls: Array.isArray(message["tool_calls"]) ? message["tool_calls"].length : 0,
  };
  turn.memo ??= {
    target: sampledHead(turn),
    faithful: faithfulText(turn),
    argumentKeys: turn.calls.map((c) => argumentsKeyExact(c.arguments)),
  };
  const { target, faithful, argumentKeys } = turn.memo;
  if (faithful !== null && harness.toolCalls === turn.toolCalls && renderedHead(harness) !== target) {
    if (renderedHead({ ...harness, reasoning: faithful.reasoning }) === target) kinds.push(reasoningKind(turn));
    else if (renderedHead({ ...harness, content: faithful.content }) === target) kinds.push("content");
    else kinds.push(reasoningKind(turn), "content");
    fixed["content"] = faithful.content;
    setReasoning(fixed, faithful.reasoning);
  }
  const sent = toolCallsOf(message);
  if (sent.length === turn.calls.length && sent.length > 0) {
    const calls = message["tool_calls"] as unknown[];
    let changed = false;
    const restored = calls.map((call, i) => {
      const model = turn.calls[i]!;
      const mine = sent[i]!;
      if (mine.name === model.name && argumentsKeyExact(mine.arguments) === argumentKeys[i]) return call;
      changed = true;
      const original = isObject(call) ? call : {};
      return {
        ...original,
        function: {
          ...(isObject(original["function"]) ? original["function"] : {}),
          name: model.name,
          arguments: model.arguments,
        },
      };
    });
    if (changed) {
      fixed["tool_calls"] = restored;
      kinds.push("tool_calls");
    }
  }
  return kinds.length === 0 ? null : { message: fixed, kinds };
}

/** Arguments as the template writes them: parsed, keys in their order (its `tojson` keeps the order it is given). */
function argumentsKeyExact(args: string): string {
  try {
    return JSON.stringify(JSON.parse(args));
  } catch {
    return args;
  }
}

function reasoningKind(turn: RecordedTurn): Repair["kind"] {
  return turn.reasoning === null && turn.thinkingOff ? "empty_think" : "reasoning";
}
