// A stand-in for Google's Gemini API, written from its documented REST shapes (ai.google.dev/api/generate-content):
// it answers one scripted model turn to `POST /v1beta/models/{model}:generateContent` with a GenerateContentResponse,
// and to `:streamGenerateContent?alt=sse` with server-sent events `data: {GenerateContentResponse}\r\n\r\n` — thought
// parts (`thought: true`) and text in pieces, a functionCall whole with the turn's thoughtSignature on it, usage in every
// chunk and the finish reason with the full usage in the last — as Google streams them. Tests point the @google/genai SDK
// at it and at rlgate and compare what the SDK reads.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface GoogleTurn {
  thought?: string;
  text?: string;
  calls?: { name: string; args: Record<string, unknown> }[];
}

export interface StandIn {
  url: string;
  /** Request bodies as received, in order. */
  received: unknown[];
  close(): Promise<void>;
}

const SIGNATURE = Buffer.from("a signature only Google can read").toString("base64");

/** Text cut into pieces of a few characters, as a streamed answer arrives. */
function pieces(text: string): string[] {
  return text.match(/[\s\S]{1,8}/g) ?? [];
}

function parts(turn: GoogleTurn): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  if (turn.thought) out.push({ text: turn.thought, thought: true });
  if (turn.text) out.push({ text: turn.text, thoughtSignature: SIGNATURE });
  (turn.calls ?? []).forEach((call, i) =>
    out.push({
      functionCall: { name: call.name, args: call.args },
      ...(i === 0 && !turn.text ? { thoughtSignature: SIGNATURE } : {}),
    }),
  );
  return out;
}

function usage(turn: GoogleTurn): Record<string, unknown> {
  return {
    promptTokenCount: 40,
    candidatesTokenCount: 12,
    totalTokenCount: 40 + 12 + (turn.thought ? 20 : 0),
    promptTokensDetails: [{ modality: "TEXT", tokenCount: 40 }],
    ...(turn.thought ? { thoughtsTokenCount: 20 } : {}),
  };
}

function response(
  model: string,
  candidate: Record<string, unknown>,
  usageMetadata: Record<string, unknown>,
): {
  candidates: Array<Record<string, unknown>>;
  usageMetadata: Record<string, unknown>;
  modelVersion: string;
  responseId: string;
} {
  return { candidates: [candidate], usageMetadata, modelVersion: model, responseId: "standInResponseId01" };
}

/** The stream's chunks: thought pieces, text pieces (the first with the signature), each call; the last one carries
 * the finish reason and the whole usage (Gemini 2.5's way: no chunk of its own for the end). */
function chunks(model: string, turn: GoogleTurn): Array<ReturnType<typeof response>> {
  const partial = {
    promptTokenCount: 40,
    totalTokenCount: 40,
    promptTokensDetails: [{ modality: "TEXT", tokenCount: 40 }],
  };
  const chunk = (part: Record<string, unknown>) =>
    response(model, { content: { parts: [part], role: "model" }, index: 0 }, partial);
  const out = pieces(turn.thought ?? "").map((text) => chunk({ text, thought: true }));
  pieces(turn.text ?? "").forEach((text, i) =>
    out.push(chunk(i === 0 ? { text, thoughtSignature: SIGNATURE } : { text })),
  );
  for (const part of parts({ calls: turn.calls })) out.push(chunk(part));
  const last = out[out.length - 1]!;
  last.candidates[0]!["finishReason"] = "STOP";
  last.usageMetadata = usage(turn);
  return out;
}

export async function startGeminiStandIn(turn: GoogleTurn): Promise<StandIn> {
  const received: unknown[] = [];
  const server: Server = createServer((req, res) => {
    const body: Buffer[] = [];
    req.on("data", (chunk: Buffer) => body.push(chunk));
    req.on("end", () => {
      received.push(JSON.parse(Buffer.concat(body).toString("utf8") || "null"));
      const match = /^\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent)(\?.*)?$/.exec(req.url ?? "");
      if (!match) {
        const error = JSON.stringify({ error: { code: 404, message: "not found", status: "NOT_FOUND" } });
        res.writeHead(404, { "content-type": "application/json; charset=UTF-8" }).end(error);
        return;
      }
      const model = match[1]!;
      if (match[2] === "generateContent") {
        const whole = response(
          model,
          { content: { parts: parts(turn), role: "model" }, finishReason: "STOP", index: 0 },
          usage(turn),
        );
        res.writeHead(200, { "content-type": "application/json; charset=UTF-8" }).end(JSON.stringify(whole));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (const chunk of chunks(model, turn)) res.write(`data: ${JSON.stringify(chunk)}\r\n\r\n`);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
