// Reads a request body into one Buffer, refusing (413) as soon as it passes the configured limit.
import type { IncomingMessage } from "node:http";
import { exceedsDepth, MAX_JSON_DEPTH } from "../util/bounded-json.ts";
import { GatewayError } from "./errors.ts";

export function readBody(req: IncomingMessage, limitBytes: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limitBytes) {
    req.resume();
    return Promise.reject(tooLarge(limitBytes));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on("data", (chunk: Buffer) => {
      if (failed) return;
      size += chunk.length;
      if (size > limitBytes) {
        failed = true;
        chunks.length = 0;
        reject(tooLarge(limitBytes));
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (!failed) resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    });
    req.on("error", (error) => {
      if (!failed) reject(new GatewayError("RLGATE_BAD_REQUEST", "request body could not be read", { cause: error }));
    });
  });
}

function tooLarge(limitBytes: number): GatewayError {
  return new GatewayError(
    "RLGATE_BODY_TOO_LARGE",
    `request body exceeds the gateway's limit of ${limitBytes} bytes (set --body-limit to raise it)`,
  );
}

/** A request body's JSON value, checked at the door: valid JSON, nested at most MAX_JSON_DEPTH levels. */
export function parseJsonBody(body: Buffer): unknown {
  if (body.length === 0) throw new GatewayError("RLGATE_BAD_REQUEST", "request body is empty; expected a JSON object");
  let value: unknown;
  try {
    value = JSON.parse(body.toString("utf8"));
  } catch (error) {
    throw new GatewayError("RLGATE_BAD_REQUEST", `request body is not valid JSON: ${(error as Error).message}`, {
      cause: error,
    });
  }
  // Everything downstream (translation, validation, the store, reads) walks bodies recursively.
  if (exceedsDepth(value)) {
    throw new GatewayError("RLGATE_BAD_REQUEST", `request body nests deeper than ${MAX_JSON_DEPTH} levels`);
  }
  return value;
}
