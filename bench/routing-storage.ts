// MoE routing replay storage: an 8-turn agent session against the sim shaped as Qwen3-30B-A3B (48 layers, top-8 of 128
// experts); rows the upstream sent (/metrics) against rows and bytes stored (store.storedTokenBytes), and the raw int32
// form. Usage: npx tsx bench/routing-storage.ts [vllm|sglang] [messages|tokens]. Figures: docs/routing-replay.md.
import { startStack, createRollout, postJson, TOOLS } from "../test/helpers.ts";
const flavor = (process.argv[2] ?? "vllm") as "vllm" | "sglang";
const prompts = (process.argv[3] ?? "messages") as "tokens" | "messages";
const moe = { layers: 48, topK: 8, experts: 128 }; // Qwen3-30B-A3B
const stack = await startStack({
  sim: { flavor, moe },
  gateway: { upstreamFlavor: flavor, prompts, routedExperts: { topK: 8, experts: 128 } },
});
try {
  const r = await createRollout(stack.gateway.url, { group: "g" });
  const messages: any[] = [{ role: "user", content: "list the files" }];
  for (let turn = 0; turn < 8; turn++) {
    const res = await postJson(`${r.base_urls.openai}/chat/completions`, {
      model: "Qwen/Qwen3-8B",
      messages,
      tools: TOOLS,
    });
    const msg = res.json.choices[0].message;
    messages.push(msg);
    for (const call of msg.tool_calls ?? [])
      messages.push({ role: "tool", tool_call_id: call.id, content: "a.txt b.txt ".repeat(20) });
    if (!msg.tool_calls?.length) messages.push({ role: "user", content: "again " + turn });
  }
  const store = stack.gateway.context.store;
  const calls = store.listCalls(r.id);
  let received = 0;
  const text = await (await fetch(`${stack.gateway.url}/metrics`)).text();
  received = Number(
    text
      .split("\n")
      .find((l) => l.startsWith("rlgate_routed_experts_rows_total "))!
      .split(" ")[1],
  );
  const b = store.storedTokenBytes(r.id);
  const sumPrompts = calls.reduce((n, c) => n + (c.promptTokenIds?.length ?? 0) + c.choices[0]!.tokenIds.length - 1, 0);
  const W = moe.layers * moe.topK;
  console.log(
    JSON.stringify({
      flavor,
      prompts,
      calls: calls.length,
      rowsSentByUpstream: received,
      rowsStored: b.routedTokens,
      sumOfCallSequences: sumPrompts,
      routingBytes: b.routing,
      bytesPerToken: b.routing / b.routedTokens,
      int32BytesPerToken: W * 4,
      ratio: b.routing / b.routedTokens / (W * 4),
      vsPerCallInt32: b.routing / (sumPrompts * W * 4),
      idsBytes: b.ids,
    }),
  );
} finally {
  await stack.close();
}
