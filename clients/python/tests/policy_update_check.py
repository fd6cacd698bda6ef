"""A weight update through an RL core with the Python client (RLGATE_CORE: its address): pause_policy twice (the
second is the same pause), then update_policy's context manager resumes with version RLGATE_VERSION. Prints the
states the core answered as JSON: test/policy-update-trainer.test.ts checks them against the gateway's."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rlgate_client import TrainerClient  # noqa: E402


def view(state):
    return {
        "paused": state.paused,
        "current_version": state.current_version,
        "gateways": [{"url": g.url, "paused": g.paused, "mode": g.mode, "version": g.version, "pauses": g.pauses} for g in state.gateways],
    }


out = {}
with TrainerClient(os.environ["RLGATE_CORE"]) as client:
    out["pause"] = view(client.pause_policy(mode="wait", timeout_s=60))
    out["again"] = view(client.pause_policy(mode="wait", timeout_s=60))
    with client.update_policy(os.environ["RLGATE_VERSION"], mode="wait") as paused:
        out["inside"] = view(paused)
    out["status"] = {"current_version": client.status().current_version}
print(json.dumps(out))
