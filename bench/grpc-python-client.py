"""bench/grpc.ts's Python side: read N batches from an RL core's trainer service; print bytes, seconds, CPU seconds.

Each batch's arrays are opened with numpy.frombuffer (as a trainer would) and acked without waiting (pipelined).
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
import numpy as np  # noqa: E402
from rlgate_client import TrainerClient  # noqa: E402


def main():
    address, count, in_flight = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    client = TrainerClient(address)
    payload = 0
    checksum = 0
    acks = []
    start = None
    n = 0
    for batch in client.batches(trainer="bench", max_in_flight=in_flight):
        if start is None:
            start = time.perf_counter()  # the first batch pays for connecting: timed from it on
            cpu = time.process_time()
        else:
            for a in (batch.offsets, batch.token_ids, batch.loss_mask, batch.logprobs, batch.advantages, batch.loss_weights):
                payload += a.nbytes
        checksum += int(batch.token_ids[-1]) + int(np.count_nonzero(batch.loss_mask[:64]))
        acks.append(client._stub.AckBatch.future(client._pb.AckBatchRequest(batch_ids=[batch.batch_id]), timeout=30))
        n += 1
        if n >= count:
            break
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu
    for a in acks:
        a.result()
    client.close()
    print(json.dumps({"bytes": payload, "seconds": seconds, "cpuSeconds": cpu_seconds, "batches": n - 1, "checksum": checksum}))


if __name__ == "__main__":
    main()
