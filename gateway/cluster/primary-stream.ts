// The one trajectory stream of `rlgate serve --workers N`, in the primary: RL cores connect to one gRPC address
// whichever worker served the calls. It reads the finished log every worker writes to the shared LMDB environment
// (cursors are drawn in commit order, so a poll never passes over a rollout committed late) and rebuilds rollouts on
// its own trajectory thread.
import { Store, type Durability } from "../../store/store.ts";
import type { Logger } from "../../util/log.ts";
import { startGatewayGrpc, type GatewayGrpc, type GatewayGrpcOptions } from "../grpc/index.ts";
import type { TrajectorySettings } from "../trajectories.ts";
import { TrajectoryThread } from "../trajectory-thread.ts";

export interface PrimaryStreamOptions extends GatewayGrpcOptions {
  dataDir: string;
  durability?: Durability;
  /** The store's memory map size: the workers' (Store's `mapSize`). */
  storeMapSize?: number;
  /** The workers' free-space reserve (Store's `space`). */
  storeReserveBytes?: number;
  controlToken: string | null;
  trajectories: TrajectorySettings;
  log: Logger;
}

export interface PrimaryStream {
  grpc: GatewayGrpc;
  /** The primary's store (its events: trainers' agreement figures, recorded by the stream). */
  store: Store;
  close(): Promise<void>;
}

export async function startPrimaryStream(options: PrimaryStreamOptions): Promise<PrimaryStream> {
  // The primary writes no calls (only consumer groups' state): its slot is that of none of the workers.
  const store = new Store({
    path: options.dataDir,
    durability: options.durability,
    shared: { slot: 0, slots: 1 },
    ...(options.storeMapSize === undefined ? {} : { mapSize: options.storeMapSize }),
    space: { reserveBytes: options.storeReserveBytes, log: (line) => options.log.warn(line) },
  });
  const trajectories = new TrajectoryThread(options.dataDir, options.trajectories, store.mapSize);
  const closeStoreSide = async () => {
    await trajectories.close().catch(() => {});
    await store.close();
  };
  try {
    await trajectories.ready();
    const grpc = await startGatewayGrpc(
      { store, trajectories, log: options.log, config: { controlToken: options.controlToken } },
      options,
    );
    return {
      grpc,
      store,
      async close() {
        await grpc.close();
        await closeStoreSide();
      },
    };
  } catch (error) {
    await closeStoreSide().catch(() => {});
    throw error;
  }
}
