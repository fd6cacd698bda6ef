// TypeScript clients of rlgate's gRPC services: a gateway's trajectory stream (what an RL core reads) and an
// RL core's trainer service (what a trainer reads).
export { TrajectoryConsumer, type TrajectoryConsumerOptions } from "./trajectory-consumer.ts";
export { TrainerClient, type AdvantageInput, type LogprobResult, type TrainerClientOptions } from "./trainer-client.ts";
export { CoreSourcesClient, type CoreSourcesClientOptions } from "./core-sources-client.ts";
export { decodeBatch, toRows, type TrainingBatch, type TreeStructure } from "./batch.ts";
export { tokenVersions } from "./token-versions.ts";
export type { Consistency, CoreStatus, PolicyState, RolloutMessage, RowInfo } from "../../protocol/index.ts";
