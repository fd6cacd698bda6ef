// The gateway's gRPC server: the trajectory stream (proto/rlgate/v1/trajectories.proto) on its own port.
import { Server } from "@grpc/grpc-js";
import {
  bindServer,
  DEFAULT_MAX_MESSAGE_BYTES,
  dialAddress,
  serverCredentials,
  serverOptions,
  shutdownServer,
  trajectoryStreamService,
  type TlsFiles,
} from "../../protocol/index.ts";
import type { GatewayConfig, GatewayContext } from "../context.ts";
import { TrajectoryStreamService } from "./trajectory-stream.ts";

export { TrajectoryStreamService } from "./trajectory-stream.ts";
export { ConsumerGroup } from "./consumer-group.ts";

export const DEFAULT_GRPC_PORT = 8701;

export interface GatewayGrpcOptions {
  host: string;
  port: number;
  maxMessageBytes?: number;
  /** How long a named member's rollouts and groups wait for it while it is away (restarting); default 60 s. */
  memberTimeoutMs?: number;
  /** How long a fully acked RL group stays with its member for late rollouts; default 10 min. */
  groupRetentionMs?: number;
  /** TLS of the stream (required beyond loopback unless `insecure`). */
  tls?: TlsFiles;
}

export interface GatewayGrpc {
  port: number;
  address: string;
  stream: TrajectoryStreamService;
  close(): Promise<void>;
}

/** What the stream needs of a gateway (the primary of `serve --workers N` has no more than this). */
export type StreamContext = Pick<GatewayContext, "store" | "trajectories" | "log"> & {
  config: Pick<GatewayConfig, "controlToken">;
};

export async function startGatewayGrpc(context: StreamContext, options: GatewayGrpcOptions): Promise<GatewayGrpc> {
  const maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  const creds = serverCredentials(options.host, options.tls, "the trajectory stream");
  const stream = new TrajectoryStreamService({
    store: context.store,
    trajectories: context.trajectories,
    maxMessageBytes,
    token: context.config.controlToken,
    log: context.log,
    memberTimeoutMs: options.memberTimeoutMs,
    groupRetentionMs: options.groupRetentionMs,
  });
  const server = new Server(serverOptions(maxMessageBytes));
  server.addService(trajectoryStreamService, { subscribe: stream.subscribe });
  const port = await bindServer(server, options.host, options.port, creds);
  return {
    port,
    address: dialAddress(options.host, port),
    stream,
    async close() {
      await stream.close();
      await shutdownServer(server, 2000);
    },
  };
}
