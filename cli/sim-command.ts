// `rlgate sim`: the simulated vLLM as a standalone server, for demos, benchmarks and pointing a harness at directly.
import { Command } from "commander";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { ScriptTurn } from "../sim/index.ts";
import { FAMILIES } from "../tokenizer/families.ts";
import { REASONING_FIELDS } from "../tokenizer/reasoning-field.ts";
import { StartRefusal } from "../util/refusal.ts";
import { duration, integer, nonNegative, probability } from "./option-parsers.ts";

export function simCommand(): Command {
  return new Command("sim")
    .summary("a simulated vLLM serving Qwen3 (real tokenizer and chat template) for tests and demos")
    .description(
      [
        "Run a simulated vLLM (>= 0.10.2) serving a Qwen3 model: the real Qwen3 tokenizer and chat template, qwen3 " +
          "reasoning and hermes tool-call parsing, return_token_ids, and deterministic seeded logprobs. Routes: " +
          "/v1/chat/completions, /v1/completions, /v1/models, /tokenize, /detokenize, /health.",
        "Default policy: given tools, one call to a shell-like tool (`echo rlgate-sim`), then an answer quoting the " +
          "tool's output; without tools, a short answer. --script FILE plays one conversation instead: a JSON array of " +
          '{"reasoning", "content", "tool_calls": [{"name", "arguments"}]} turns (or {"turns": [...]}); turn k answers ' +
          "a request whose history holds k assistant messages.",
        "Per request, the header x-sim-fault: error | reset | hang | stall forces a fault, and x-sim-delay-ms: N adds a delay.",
      ].join("\n\n"),
    )
    .option("--host <host>", "address to listen on", "127.0.0.1")
    .option("--port <port>", "port to listen on (0 = any free port)", integer, 8000)
    .option("--model <name>", "served model name", "Qwen/Qwen3-8B")
    .option("--max-model-len <tokens>", "context length reported and enforced", integer, 40960)
    .option("--seed <n>", "seed for wording, logprobs and fault draws", integer, 0)
    .option("--script <file>", "scripted policy: a JSON file of assistant turns")
    .option("--ttft-ms <duration>", "delay before the first token (e.g. 200ms, 1s)", duration, 0)
    .option("--inter-token-ms <duration>", "delay between streamed tokens (e.g. 20ms)", duration, 0)
    .option(
      "--prefill-us-per-token <us>",
      "model automatic prefix caching: each prompt token this sim has not seen as a prefix (16-token blocks, LRU) adds this many microseconds of prefill before the first token, prefills of concurrent requests queueing as on one engine (0 = off; e.g. 100)",
      nonNegative,
      0,
    )
    .option(
      "--prefix-cache-tokens <n>",
      "size of the modelled KV cache in tokens, with --prefill-us-per-token",
      integer,
      1 << 20,
    )
    .option("--error-rate <p>", "probability that a generation request gets a 500", probability, 0)
    .option("--reset-rate <p>", "probability that a stream's connection is destroyed mid-stream", probability, 0)
    .option(
      "--logprob-noise <std>",
      "std-dev of seeded gaussian noise added to reported logprobs (a drifted server, for `rlgate replay score`)",
      nonNegative,
      0,
    )
    .option(
      "--chat-template <file>",
      "a jinja chat template used instead of Qwen3's (a server whose template changed, for `rlgate replay resend`)",
    )
    .option(
      "--tool-call-parser <name>",
      "vLLM's --tool-call-parser, and with it the model family served: hermes (Qwen3, default), qwen3_coder (Qwen3-Coder / Qwen3.5 XML tool calls; the prompt is rendered with Qwen3-Coder's template unless --chat-template is given), llama3_json (Llama 3.x: its tokenizer and template, JSON tool calls, no reasoning), deepseek_v31 (DeepSeek V3.1: vLLM's V3.1 tool template, non-thinking mode, V3's tokenizer with V3.1's added tokens) or openai (gpt-oss: harmony prompts as vLLM renders them, analysis reasoning, calls to=functions.NAME)",
      "hermes",
    )
    .option("--flavor <name>", "the server imitated: vllm or sglang (its request flags and response shapes)", "vllm")
    .option(
      "--reasoning-field <name>",
      "vLLM only: where answers carry reasoning and which history field is rendered: reasoning (vLLM >= 0.17, default: message.reasoning, delta.reasoning; a history message's reasoning_content is ignored) or reasoning_content (vLLM <= 0.16: message.reasoning_content, delta.reasoning_content; history reasoning read under either name). SGLang always writes reasoning_content",
      "reasoning",
    )
    .option(
      "--moe-layers <n>",
      "a mixture-of-experts model with this many MoE layers: answers carry routed experts (vLLM: choices[].routed_experts as with --enable-return-routed-experts; SGLang: sglext.routed_experts when a request sets return_routed_experts), deterministic from the seed; needs --moe-top-k and --moe-experts",
      integer,
    )
    .option("--moe-top-k <k>", "experts per token and layer (with --moe-layers)", integer)
    .option("--moe-experts <n>", "experts per layer (with --moe-layers)", integer)
    .action(async (opts) => {
      const parsers: string[] = Object.values(FAMILIES).map((f) => f.toolParser);
      if (!parsers.includes(opts.toolCallParser))
        throw new StartRefusal(
          `--tool-call-parser: expected ${parsers.join(", ")}; got ${String(opts.toolCallParser)}`,
        );
      if (opts.flavor !== "vllm" && opts.flavor !== "sglang")
        throw new StartRefusal(`--flavor: expected vllm or sglang, got ${String(opts.flavor)}`);
      if (!(REASONING_FIELDS as readonly string[]).includes(opts.reasoningField))
        throw new StartRefusal(
          `--reasoning-field: expected ${REASONING_FIELDS.join(" or ")}, got ${String(opts.reasoningField)}`,
        );
      const moeGiven = [opts.moeLayers, opts.moeTopK, opts.moeExperts].filter((v) => v !== undefined).length;
      if (moeGiven !== 0 && moeGiven !== 3)
        throw new StartRefusal("--moe-layers, --moe-top-k and --moe-experts go together: give all three or none");
      const moe = moeGiven === 3 ? { layers: opts.moeLayers, topK: opts.moeTopK, experts: opts.moeExperts } : undefined;
      // Loaded here so that `rlgate --help` and other commands do not pay for the tokenizer's 10 MB vocabulary.
      const { loadScript, startSim } = await import("../sim/index.ts");
      let script: ScriptTurn[] | undefined;
      if (opts.script) script = loadScript(resolve(opts.script));
      const chatTemplate = opts.chatTemplate ? readFileSync(resolve(opts.chatTemplate), "utf8") : undefined;
      const sim = await startSim({
        host: opts.host,
        port: opts.port,
        model: opts.model,
        maxModelLen: opts.maxModelLen,
        seed: opts.seed,
        script,
        ttftMs: opts.ttftMs,
        interTokenMs: opts.interTokenMs,
        prefillUsPerToken: opts.prefillUsPerToken,
        prefixCacheTokens: opts.prefixCacheTokens,
        errorRate: opts.errorRate,
        resetRate: opts.resetRate,
        logprobNoise: opts.logprobNoise,
        chatTemplate,
        toolCallParser: opts.toolCallParser,
        flavor: opts.flavor,
        reasoningField: opts.reasoningField,
        ...(moe ? { moe } : {}),
      });
      const what = `${opts.flavor === "sglang" ? "SGLang" : "vLLM"}${opts.toolCallParser !== "hermes" ? `, ${opts.toolCallParser} tool calls` : ""}${moe ? `, MoE ${moe.layers}×${moe.topK} of ${moe.experts}` : ""}`;
      console.log(`rlgate sim (simulated ${what}, ${opts.model}) listening on ${sim.url}`);
      console.log(`  OpenAI base URL: ${sim.url}/v1${script ? `   script: ${script.length} turns` : ""}`);
      let closing = false;
      const shutdown = () => {
        if (closing) return;
        closing = true;
        const cache = sim.prefixCache;
        if (cache)
          console.log(`prefix cache: ${cache.cachedTokens} prompt tokens cached, ${cache.prefilledTokens} prefilled`);
        sim.close().then(
          () => process.exit(0),
          (error: unknown) => {
            console.error(error);
            process.exit(1);
          },
        );
      };
      process.once("SIGINT", shutdown);
      process.once("SIGTERM", shutdown);
    });
}
