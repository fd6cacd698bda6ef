// Loads proto/rlgate/v1/*.proto at run time (nothing generated is committed) and exposes the two service
// definitions and client constructors. Field names are camelCase here, snake_case on the wire and in Python.
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { alignedBatchSerializer } from "./batch-codec.ts";

export const PROTO_ROOT = fileURLToPath(new URL("../../proto", import.meta.url));
export const PROTO_FILES = ["rlgate/v1/trajectories.proto", "rlgate/v1/trainer.proto"] as const;

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
  rlgate: { v1: Record<"TrajectoryStream" | "Trainer", grpc.ServiceClientConstructor> };
};

export const TrajectoryStreamClient = pkg.rlgate.v1.TrajectoryStream;
export const TrainerClient = pkg.rlgate.v1.Trainer;
export const trajectoryStreamService: grpc.ServiceDefinition = TrajectoryStreamClient.service;

const trainer = TrainerClient.service;
/** The Trainer service as the core serves it: batches go out through the aligned encoder (batch-codec.ts). */
export const trainerService: grpc.ServiceDefinition = {
  ...trainer,
  StreamBatches: { ...trainer.StreamBatches!, responseSerialize: alignedBatchSerializer(trainer.StreamBatches!.responseSerialize) },
};
