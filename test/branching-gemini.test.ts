// Branch replays on the Gemini surface, read by Google's SDK (@google/genai): a branch's calls before its point get
// the backbone's responses, whole or as Google's stream, with the same call ids; countTokens on the way changes nothing.
import { GoogleGenAI, type Content, type GenerateContentResponse, type Part } from "@google/genai";
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { backboneThenBranch } from "./branching-agent.ts";
import { AGENT_SCRIPT, startStack, type Stack } from "./helpers.ts";

const MODEL = "gemini-2.5-flash";
const TOOLS = [
  {
    functionDeclarations: [
      {
        name: "run_shell_command",
        description: "Run a shell command",
        parametersJsonSchema: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
      },
    ],
  },
];

/** A tool-using agent on the Gemini API: each functionCall is answered with a functionResponse, until a plain answer. */
async function agent(baseUrl: string, stream: boolean): Promise<Part[][]> {
  const ai = new GoogleGenAI({ apiKey: "unused", httpOptions: { baseUrl } });
  const contents: Content[] = [{ role: "user", parts: [{ text: "How many files are here?" }] }];
  const answers: Part[][] = [];
  for (let turn = 0; turn < 5; turn++) {
    const params = { model: MODEL, contents, config: { tools: TOOLS } };
    await ai.models.countTokens({ model: MODEL, contents });
    let parts: Part[] = [];
    if (stream) {
      const chunks: GenerateContentResponse[] = [];
      for await (const chunk of await ai.models.generateContentStream(params)) chunks.push(chunk);
      parts = chunks.flatMap((chunk) => chunk.candidates?.[0]?.content?.parts ?? []);
    } else parts = (await ai.models.generateContent(params)).candidates?.[0]?.content?.parts ?? [];
    answers.push(parts);
    contents.push({ role: "model", parts });
    const calls = parts.filter((part) => part.functionCall);
    if (calls.length === 0) break;
    contents.push({
      role: "user",
      parts: calls.map(({ functionCall }) => ({
        functionResponse: { id: functionCall!.id, name: functionCall!.name, response: { output: `out ${turn}` } },
      })),
    });
  }
  return answers;
}

describe("branch replays on the Gemini surface", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ sim: { script: AGENT_SCRIPT }, gateway: { modelMap: "gemini-*=Qwen/Qwen3-8B" } });
  });
  after(() => stack.close());

  for (const stream of [false, true]) {
    test(`${stream ? "streamed" : "whole"}: the SDK reads the backbone's responses, ids and all; only the point goes upstream`, async () => {
      const run = await backboneThenBranch(
        stack,
        (r) => r.base_urls.anthropic,
        (base) => agent(base, stream),
      );
      // Upstream: the three counts (/tokenize: nothing generated, never replayed) and the point's generation only.
      assert.equal(run.upstreamRequests, 3 + 1);
      assert.equal(run.again.length, 3);
      assert.deepEqual(run.again.slice(0, 2), run.first.slice(0, 2));
      assert.deepEqual(run.replayed, [true, true, false]);
    });
  }
});
