// Unary calls with a deadline on every call, as promises.
import { Metadata, type Client, type ServiceError } from "@grpc/grpc-js";
import { bearer } from "../../protocol/index.ts";

export const DEFAULT_DEADLINE_MS = 30_000;

export function metadataFor(token: string | null | undefined): Metadata {
  const metadata = new Metadata();
  for (const [k, v] of Object.entries(bearer(token))) metadata.set(k, v);
  return metadata;
}

type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: { deadline: number },
  callback: (error: ServiceError | null, response: Res) => void,
) => unknown;

export function unary<Req, Res>(
  client: Client,
  method: string,
  request: Req,
  metadata: Metadata,
  deadlineMs: number,
): Promise<Res> {
  const fn = (client as unknown as Record<string, UnaryMethod<Req, Res>>)[method];
  if (typeof fn !== "function") throw new TypeError(`no method ${method}`);
  return new Promise((resolve, reject) => {
    fn.call(client, request, metadata, { deadline: Date.now() + deadlineMs }, (error, response) =>
      error ? reject(error) : resolve(response),
    );
  });
}
