// `rlgate replay deliver --to-core`: keeps deliver's stream a source of a running RL core (core.proto CoreSources)
// until every rollout is acked. The core dials the stream, so the stream's guarantees hold; this side adds the
// source, renews it every second (a restarted core gets it back, and a deliver that dies leaves nothing behind
// once its ttl runs out) and removes it at the end.
import { status as Status } from "@grpc/grpc-js";
import type { CoreSourcesClient } from "../clients/ts/core-sources-client.ts";
import type { AddSourceRequest } from "../protocol/index.ts";

const RENEW_MS = 1000;
export const SOURCE_TTL_MS = 30_000;

/** A failed call to the core in words the user can act on. */
export function coreCallError(address: string, error: unknown): Error {
  const e = error as { code?: number; details?: string; message?: string };
  const details = e.details ?? e.message ?? String(error);
  switch (e.code) {
    case Status.UNAVAILABLE:
    case Status.DEADLINE_EXCEEDED:
      return new Error(`cannot reach the RL core at ${address} (${details}): is \`rlgate core\` running there?`);
    case Status.UNAUTHENTICATED:
      return new Error(`the RL core at ${address} refused the call: ${details} (give its --token as --core-token)`);
    case Status.UNIMPLEMENTED:
      return new Error(`the RL core at ${address} takes no sources: it is older than \`replay deliver --to-core\``);
    case Status.INVALID_ARGUMENT:
      return new Error(`the RL core at ${address} refused the source: ${details}`);
    default:
      return new Error(`the RL core at ${address} failed: ${details}`);
  }
}

export interface CoreSourceKeeper {
  /** Rejects when the core has been unreachable longer than allowed (or refuses the source). */
  readonly failed: Promise<never>;
  stop(): Promise<void>;
}

/**
 * Adds the source (a failure rejects at once: unreachable, refused) and renews it until stopped. A core unreachable
 * for longer than `waitMs` afterwards (a restart that does not come back) rejects `failed`.
 */
export async function keepCoreSource(
  client: CoreSourcesClient,
  request: Omit<AddSourceRequest, "ttlMs">,
  options: { waitMs: number; log: (line: string) => void },
): Promise<CoreSourceKeeper> {
  const add = () => client.addSource({ ...request, ttlMs: SOURCE_TTL_MS });
  await add().catch((error) => {
    throw coreCallError(client.address, error);
  });
  let stopped = false;
  let lostSince: number | null = null;
  let fail!: (error: Error) => void;
  const failed = new Promise<never>((_, reject) => (fail = reject));
  failed.catch(() => {});
  let wake: () => void = () => {};
  // One renewal at a time: a slow answer delays the next instead of piling calls up.
  const loop = (async () => {
    while (!stopped) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, RENEW_MS);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      if (stopped) return;
      try {
        const status = await add();
        if (status.added)
          options.log(`the RL core at ${client.address} did not have the source (restarted?): added again`);
        else if (lostSince !== null) options.log(`the RL core at ${client.address} answers again`);
        lostSince = null;
      } catch (error) {
        if (stopped) return;
        const code = (error as { code?: number }).code;
        if (code !== Status.UNAVAILABLE && code !== Status.DEADLINE_EXCEEDED)
          return fail(coreCallError(client.address, error));
        if (lostSince === null) {
          lostSince = Date.now();
          options.log(`the RL core at ${client.address} is unreachable; retrying for ${options.waitMs / 1000} s`);
        } else if (Date.now() - lostSince > options.waitMs) {
          return fail(coreCallError(client.address, error));
        }
      }
    }
  })();
  return {
    failed,
    async stop() {
      stopped = true;
      wake();
      await loop;
      await client.removeSource(request.address).catch(() => {});
    },
  };
}
