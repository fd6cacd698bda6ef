// Asking a running RL core to read a trajectory stream for a while (core.proto CoreSources): what
// `rlgate replay deliver --to-core` does. Unary calls with a deadline; errors are grpc-js ServiceErrors.
import type { Client } from "@grpc/grpc-js";
import {
  channelCredentials,
  channelOptions,
  CoreSourcesClient as CoreSourcesGrpcClient,
  DEFAULT_MAX_MESSAGE_BYTES,
  grpcTarget,
  type AddSourceRequest,
  type SourceStatus,
  type TlsFiles,
} from "../../protocol/index.ts";
import { metadataFor, unary } from "./unary.ts";

export interface CoreSourcesClientOptions {
  /** The core's --token. */
  token?: string | null;
  deadlineMs?: number;
  tls?: TlsFiles;
}

export class CoreSourcesClient {
  readonly address: string;
  readonly #client: Client;
  readonly #token: string | null;
  readonly #deadlineMs: number;

  constructor(address: string, options: CoreSourcesClientOptions = {}) {
    this.address = grpcTarget(address);
    this.#token = options.token ?? null;
    this.#deadlineMs = options.deadlineMs ?? 10_000;
    const tls = channelCredentials(this.address, options.tls);
    this.#client = new CoreSourcesGrpcClient(this.address, tls.credentials, {
      ...channelOptions(DEFAULT_MAX_MESSAGE_BYTES),
      ...tls.options,
    });
  }

  /** Adds or renews a source; `added` says the core did not have it (new, or the core restarted). */
  addSource(request: Partial<AddSourceRequest> & { address: string }): Promise<SourceStatus> {
    const full: AddSourceRequest = { consumerGroup: "", namespace: "", ttlMs: 0, token: "", ...request };
    return unary(this.#client, "addSource", full, metadataFor(this.#token), this.#deadlineMs);
  }

  removeSource(address: string): Promise<SourceStatus> {
    return unary(this.#client, "removeSource", { address }, metadataFor(this.#token), this.#deadlineMs);
  }

  close(): void {
    this.#client.close();
  }
}
