"""A grader for RlgateHarnessAgentLoop (agent_loops.yaml: `grade: examples.verl.grade:proof_written`).

Called as grade(run, **sample): `run` a rlgate_client.verl_agent_loop.HarnessRun (exit_code, stdout, stderr, cwd,
rollout_id, prompt, ...), `sample` the verl sample's dataset fields (extra_info, reward_model, data_source, uid, ...).
Returns the reward (a float), or None for no reward (the rollout is finished `aborted`).
"""
import os


def proof_written(run, **sample):
    """1.0 when the harness exited 0 and the file the task names holds the expected text."""
    extra = sample.get("extra_info") or {}
    path = os.path.join(run.cwd or ".", extra.get("file", "proof.txt"))
    want = extra.get("text", "rlgate-e2e")
    try:
        with open(path) as f:
            return 1.0 if run.exit_code == 0 and f.read().strip() == want else 0.0
    except FileNotFoundError:
        return 0.0
