"""Reads the first batch of each core (RLGATE_CORES: address=layout,...) with the Python client and prints, per core,
the versions of its trained tokens (rlgate_client.token_versions) as JSON: test/policy-update-core.test.ts compares
them with the versions the gateway recorded."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rlgate_client import TrainerClient, token_versions  # noqa: E402

out = {}
for entry in os.environ["RLGATE_CORES"].split(","):
    address, layout = entry.split("=")
    with TrainerClient(address) as client:
        for batch in client.batches(max_in_flight=1, layout=layout):
            versions = token_versions(batch)
            out[layout] = [v for v, m in zip(versions, batch.loss_mask) if m == 1]
            break
print(json.dumps(out))
