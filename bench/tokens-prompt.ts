// The `tokens` row of bench:gateway: what the tokens prompt mode adds to a call, in process, on an agent conversation
// grown to 64k tokens (a system prompt with tools, then tool round trips with ~600-token outputs). Per call: the
// prompt of a continuing call (message keys, only the new messages rendered and tokenized, the thread's ids joined),
// and the answer parsed back into a chat completion; beside it, a full re-render of the same conversation (what
// rendering without threads would cost per call). Run alone: `npx tsx bench/tokens-prompt.ts [--quick]`.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chatFromCompletion } from "../gateway/prompts/answer.ts";
import { TokenPrompts } from "../gateway/prompts/index.ts";
import { renderFull } from "../gateway/prompts/render.ts";
import { Store } from "../store/store.ts";
import { qwen3ChatFormat } from "../tokenizer/model-format.ts";
import { PromptIndex } from "../trajectory/prompt-index.ts";
import { seededRandom } from "../util/seeded-random.ts";

type Json = Record<string, unknown>;

const WORDS =
  "the a file line error value read write list path index build test module node token prompt agent call".split(" ");

function text(random: () => number, words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++)
    out.push(WORDS[Math.floor(random() * WORDS.length)]! + (random() < 0.1 ? `_${Math.floor(random() * 1000)}` : ""));
  return out.join(" ");
}

/** CPU milliseconds this process used so far: on a machine shared with other work, wall time also counts waiting. */
function cpuMs(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

export interface TokensRow {
  promptTokens: number;
  calls: number;
  planP50: number;
  planP99: number;
  /** CPU time of the prompt, mean over the measured calls. */
  planCpu: number;
  answerP50: number;
  fullRenderP50: number;
  fullRenderCpu: number;
}

/** Grows a conversation to `targetTokens` through TokenPrompts and times the calls past 90% of it. */
export function benchTokensPrompt(targetTokens = 65_536, measuredCalls = 20): TokensRow {
  const format = qwen3ChatFormat();
  const dir = mkdtempSync(join(tmpdir(), "rlgate-bench-tokens-"));
  const store = new Store({ path: dir, promptIndex: new PromptIndex() });
  try {
    const prompts = new TokenPrompts({ store }, format);
    const random = seededRandom(7);
    const tools = Array.from({ length: 12 }, (_, i) => ({
      type: "function",
      function: {
        name: `tool_${i}`,
        description: text(random, 40),
        parameters: { type: "object", properties: { path: { type: "string" } } },
      },
    }));
    const messages: Json[] = [
      { role: "system", content: text(random, 1500) },
      { role: "user", content: text(random, 60) },
    ];
    const plans: number[] = [];
    const answers: number[] = [];
    const fulls: number[] = [];
    let planCpu = 0;
    let fullCpu = 0;
    let promptTokens = 0;
    let seq = 1;
    let remaining = measuredCalls;
    while (remaining > 0) {
      const chat: Json = { model: "Qwen/Qwen3-8B", messages: [...messages], tools };
      const c0 = cpuMs();
      const t0 = performance.now();
      const plan = prompts.plan("r", chat);
      const planMs = performance.now() - t0;
      const planCpuMs = cpuMs() - c0;
      promptTokens = plan.promptIds.length;

      const id = `call_${seq}`;
      const sampledText = `<think>\n${text(random, 30)}\n</think>\n\n<tool_call>\n{"name": "tool_1", "arguments": {"path": "${text(random, 3)}"}}\n</tool_call>`;
      const tokenIds = [...format.encode(sampledText), format.turnEnd.id];
      const completion = {
        id: "cmpl",
        object: "text_completion",
        created: 0,
        model: "Qwen/Qwen3-8B",
        choices: [
          {
            index: 0,
            text: sampledText,
            token_ids: tokenIds,
            prompt_token_ids: plan.promptIds,
            finish_reason: "stop",
            logprobs: null,
          },
        ],
        usage: null,
      };
      const t1 = performance.now();
      const { answers: answered } = chatFromCompletion(completion, {
        format,
        toolParsing: true,
        includeReasoning: true,
      });
      const answerMs = performance.now() - t1;
      const message = answered[0]!.message;
      (message["tool_calls"] as Json[])[0]!["id"] = id;
      prompts.remember("r", seq++, plan, answered, [plan.chain.extendedBy(message)]);

      const measured = promptTokens >= targetTokens;
      if (measured) {
        plans.push(planMs);
        planCpu += planCpuMs;
        answers.push(answerMs);
        const c2 = cpuMs();
        const t2 = performance.now();
        renderFull(format, chat["messages"] as Json[], { tools, enableThinking: undefined });
        fulls.push(performance.now() - t2);
        fullCpu += cpuMs() - c2;
        remaining--;
      }
      messages.push({ role: "assistant", content: "", tool_calls: message["tool_calls"] });
      // Past the target the conversation grows by typical tool outputs (~150 tokens): the measured calls stay near it.
      messages.push({ role: "tool", tool_call_id: id, content: text(random, measured ? 100 : 500) });
    }
    return {
      promptTokens,
      calls: seq - 1,
      planP50: quantile(plans, 0.5),
      planP99: quantile(plans, 0.99),
      planCpu: planCpu / measuredCalls,
      answerP50: quantile(answers, 0.5),
      fullRenderP50: quantile(fulls, 0.5),
      fullRenderCpu: fullCpu / measuredCalls,
    };
  } finally {
    void store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export function printTokensRow(row: TokensRow): void {
  console.log(
    `TOKENS PROMPT MODE (in process, a ${(row.promptTokens / 1024).toFixed(0)}k-token agent conversation after ${row.calls} calls)`,
  );
  console.log(
    "             prompt p50  prompt p99  prompt cpu  answer parse p50   full re-render p50  full cpu   full / prompt (cpu)",
  );
  console.log(
    `  tokens     ${row.planP50.toFixed(2).padStart(10)}  ${row.planP99.toFixed(2).padStart(10)}  ${row.planCpu.toFixed(2).padStart(10)}  ${row.answerP50.toFixed(3).padStart(16)}   ${row.fullRenderP50.toFixed(1).padStart(18)}  ${row.fullRenderCpu.toFixed(1).padStart(8)}   ${(row.fullRenderCpu / row.planCpu).toFixed(0).padStart(18)}x`,
  );
  console.log(
    "prompt: the added time of a continuing call's prompt in tokens mode (message keys, the new messages rendered and",
  );
  console.log(
    "tokenized, the thread's earlier ids joined); answer parse: sampled text → chat completion; full re-render: the same",
  );
  console.log(
    "conversation rendered and tokenized whole (block cache warm), which tokens mode does only when a thread starts.",
  );
  console.log(
    "ms; cpu: this process's CPU ms per call (wall time on a shared machine also counts waiting for a core).",
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  printTokensRow(benchTokensPrompt(65_536, process.argv.includes("--quick") ? 5 : 20));
}
