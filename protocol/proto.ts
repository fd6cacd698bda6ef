// Loads proto/rlgate/v1/*.proto at run time (nothing generated is committed) and exposes the two service
// definitions and client constructors. Field names are camelCase here, snake_case on the wire and in Python.
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { alignedBatchSerializer } from "./batch-codec.ts";
import type { StreamMessage } from "./messages.ts";

export const PROTO_ROOT = fileURLToPath(new URL("../proto", import.meta.url));
export const PROTO_FILES = ["rlgate/v1/trajectories.proto", "rlgate/v1/trainer.proto", "rlgate/v1/core.proto"] as const;

const definition = loadSync([...PROTO_FILES], {
  includeDirs: [PROTO_ROOT],
  keepCase: false,
  // Cursors and batch ids are below 2^53 (microsecond timestamps, counters).
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
});
const pkg = grpc.loadPackageDefinition(definition) as unknown as {
  rlgate: { v1: Record<"TrajectoryStream" | "Trainer" | "CoreSources", grpc.ServiceClientConstructor> };
};

export const TrajectoryStreamClient = pkg.rlgate.v1.TrajectoryStream;
export const TrainerClient = pkg.rlgate.v1.Trainer;
/** The core's sources (core.proto): `rlgate replay deliver --to-core` asks a running core to read its stream. */
export const CoreSourcesClient = pkg.rlgate.v1.CoreSources;
export const coreSourcesService: grpc.ServiceDefinition = CoreSourcesClient.service;
const stream = TrajectoryStreamClient.service;

/**
 * A stream message already serialized (by the gateway's trajectory worker, off the event loop): the gateway's
 * Subscribe serializer sends its bytes as they are.
 */
export class EncodedStreamMessage {
  constructor(readonly bytes: Buffer) {}
}

/** Serializes a StreamMessage as the trajectory stream sends it. */
export const encodeStreamMessage = (message: StreamMessage): Buffer => stream.Subscribe!.responseSerialize(message);
/** Reads a StreamMessage as a member receives it. */
export const decodeStreamMessage = (bytes: Buffer): StreamMessage =>
  stream.Subscribe!.responseDeserialize(bytes) as StreamMessage;

/** The TrajectoryStream service as the gateway serves it: messages may come encoded already. */
export const trajectoryStreamService: grpc.ServiceDefinition = {
  ...stream,
  Subscribe: {
    ...stream.Subscribe!,
    responseSerialize: (message: StreamMessage | EncodedStreamMessage) =>
      message instanceof EncodedStreamMessage ? message.bytes : stream.Subscribe!.responseSerialize(message),
  },
};

const trainer = TrainerClient.service;
/** The Trainer service as the core serves it: batches go out through the aligned encoder (batch-codec.ts). */
export const trainerService: grpc.ServiceDefinition = {
  ...trainer,
  StreamBatches: {
    ...trainer.StreamBatches!,
    responseSerialize: alignedBatchSerializer(trainer.StreamBatches!.responseSerialize),
  },
};
