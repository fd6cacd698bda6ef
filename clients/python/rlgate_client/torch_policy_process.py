"""The trainer's served policy in a process of its own: the weight hand-off between training and sampling.

The policy server (torch_server.py, `python3 -m rlgate_client.torch_server`) runs beside the trainer as a child
process, so its sampling has its own interpreter (GIL) and can take a core of its own while the trainer trains: in the
asynchronous loop the two overlap in compute, not only in waiting. After each step the trainer hands the new weights
over a local socket (POST /update_weights?version=N with the state dict as torch.save writes it: float32 bit for bit),
between its pause and its resume of the gateways; the server answers once it serves them and GET /policy reports the
version.
"""
import io
import json
import os
import subprocess
import sys
import urllib.request

import torch


class PolicyProcess:
    """A policy server child process: start() waits until it answers, load() swaps its weights, close() ends it."""

    def __init__(self, serve: str, model_name: str, seed: int, dims: dict, alphabet: str, threads: int = 1):
        self.args = [
            sys.executable, "-m", "rlgate_client.torch_server",
            "--serve", serve, "--model-name", model_name, "--seed", str(seed), "--alphabet", alphabet,
            "--threads", str(threads),
            "--dim", str(dims["dim"]), "--layers", str(dims["layers"]), "--heads", str(dims["heads"]),
            "--max-len", str(dims["max_len"]), "--exit-with-stdin",
        ]  # fmt: skip
        self.process = None
        self.url = None

    def start(self) -> "PolicyProcess":
        # stderr is the trainer's: a failing server says why where the trainer's own errors go
        # the package the trainer runs from, also where it was put on sys.path by hand (clients/python/torch_trainer.py)
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p))
        # stdin a pipe only this process holds: the server exits when it closes, so it never outlives the trainer
        self.process = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit("torch-trainer: the policy server exited with %s before it listened" % self.process.wait())
        self.url = json.loads(line)["url"]
        return self

    def load(self, state_dict, version: int) -> None:
        """The server samples with `state_dict` as policy version `version` from when this returns."""
        buffer = io.BytesIO()
        torch.save(state_dict, buffer)
        req = urllib.request.Request(
            "%s/update_weights?version=%d" % (self.url, version),
            data=buffer.getvalue(),
            method="POST",
            headers={"content-type": "application/octet-stream"},
        )
        with urllib.request.urlopen(req, timeout=60) as res:
            served = json.loads(res.read())["version"]
        if served != version:
            raise RuntimeError("the policy server serves version %s after loading %d" % (served, version))

    def close(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
