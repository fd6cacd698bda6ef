// The CoreSources service (proto/rlgate/v1/core.proto): a running core asked to read another trajectory stream for
// a while (`rlgate replay deliver --to-core`). Same token as the trainer service; what a source is and how its
// rollouts are kept apart lives in the core (core.ts), this file only checks and converts requests.
import type { sendUnaryData, ServerUnaryCall, UntypedServiceImplementation } from "@grpc/grpc-js";
import {
  checkToken,
  errorToStatus,
  LinkError,
  type AddSourceRequest,
  type SourceStatus,
} from "../../protocol/index.ts";

export const DEFAULT_SOURCE_TTL_MS = 30_000;
/** Names that cannot mix with rollout ids in a prefix: letters, digits and . _ - only. */
const NAMESPACE = /^[A-Za-z0-9._-]{0,64}$/;

export interface SourceRequest {
  address: string;
  consumerGroup: string;
  namespace: string;
  ttlMs: number;
  token: string | null;
}

export interface SourceHost {
  addSource(request: SourceRequest): SourceStatus;
  removeSource(address: string): Promise<SourceStatus>;
}

export function checkSourceRequest(req: AddSourceRequest): SourceRequest {
  const address = req.address.trim();
  if (!/^[^\s/]+:\d+$/.test(address))
    throw new LinkError("RLGATE_BAD_REQUEST", `address must be host:port, not '${req.address}'`);
  if (!NAMESPACE.test(req.namespace))
    throw new LinkError(
      "RLGATE_BAD_REQUEST",
      `namespace '${req.namespace}': at most 64 letters, digits, '.', '_' or '-' (it prefixes rollout ids)`,
    );
  return {
    address,
    consumerGroup: req.consumerGroup || "rl-core",
    namespace: req.namespace,
    ttlMs: req.ttlMs > 0 ? req.ttlMs : DEFAULT_SOURCE_TTL_MS,
    token: req.token || null,
  };
}

export function sourceHandlers(host: SourceHost, token: string | null): UntypedServiceImplementation {
  const unary =
    <Req>(run: (req: Req) => SourceStatus | Promise<SourceStatus>) =>
    (call: ServerUnaryCall<Req, SourceStatus>, callback: sendUnaryData<SourceStatus>) => {
      Promise.resolve()
        .then(() => {
          checkToken(call.metadata, token);
          return run(call.request);
        })
        .then(
          (res) => callback(null, res),
          (error) => callback(errorToStatus(error)),
        );
    };
  return {
    AddSource: unary<AddSourceRequest>((req) => host.addSource(checkSourceRequest(req))),
    RemoveSource: unary<{ address: string }>((req) => host.removeSource(req.address.trim())),
  };
}
