// A streamed answer a weight update can land on: started, read until the harness has part of it (six events), then
// read to its end once the test has paused and resumed the policy. Shared by the per-token version tests
// (policy-update-core, -trainer, -export).

export interface AnswerInFlight {
  /** Reads the rest of the answer; all of its SSE text. */
  rest(): Promise<string>;
}

export async function answerInFlight(
  gatewayUrl: string,
  rolloutId: string,
  content = "Say something long, please.",
): Promise<AnswerInFlight> {
  const res = await fetch(`${gatewayUrl}/r/${rolloutId}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "Qwen/Qwen3-8B",
      stream: true,
      seed: 5,
      max_tokens: 60,
      messages: [{ role: "user", content }],
    }),
  });
  if (res.status !== 200) throw new Error(`chat: ${res.status} ${await res.text()}`);
  const reader = (res.body as unknown as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
  const decoder = new TextDecoder();
  let text = "";
  while ((text.match(/\n\n/g) ?? []).length < 6) {
    const { value, done } = await reader.next();
    if (done) throw new Error("the answer ended before an update could land on it");
    text += decoder.decode(value, { stream: true });
  }
  return {
    async rest() {
      for (;;) {
        const { value, done } = await reader.next();
        if (done) return text;
        text += decoder.decode(value, { stream: true });
      }
    },
  };
}
