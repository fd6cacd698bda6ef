#!/usr/bin/env python3
"""The closed loop's rollout driver and its one-tool harness (standard library only).

Task t: answer a fixed digit sequence (its target). Each rollout is one harness run through the gateway:

  turn 1  POST {rollout base}/completions  prompt "t{t}>"                     → the model's first answer, e.g. "2908\\n"
  tool    check(answer) → "={k}>", k = how many positions of the target it got right (context, never trained)
  turn 2  POST {rollout base}/completions  prompt "t{t}>" + answer + "={k}>"  → the final answer
  reward  the fraction of the target's positions the final answer gets right (0 … 1)

The second prompt continues the first call's text exactly (one character is one token), so the gateway's prefix
tree makes one trajectory of both turns: the tool result in it with loss mask 0. Each call sends its prompt as token
ids (the policy server's POST /tokenize) and reads the answer as a stream: the form in which the gateway continues an
answer that a weight update interrupted from exactly where it stopped (docs/weight-updates.md), so the harness reads
one answer, never an abort.

Synchronous (default), per step: wait until the trainer's endpoint serves policy version `step` (GET {policy}/policy),
create len(targets) × n rollouts (group = task, round = step + 1, policy_version = the served version, group_size = n,
ids {run}-s{step}-t{task}-{i}), run them (--concurrency at a time; every call has its own seed), then finish them in
that order.

--async: the rollouts of every step in one queue, --concurrency at a time, each finished as soon as it ends; a step's
rollouts start once the served version is at least step - --lag (how far sampling may run ahead of training), and
their calls carry no version: the gateway records the version each token was sampled by, as the trainer's updates
(pause, new weights, resume) name them.

Prints one JSON line per step (once its rollouts ended): mean reward, per task, exact answers; then a "done" line with
the calls made and the aborted answers that reached the harness (0: every interrupted answer was continued).

Run:  python3 examples/closed-loop/harness.py --gateway http://127.0.0.1:8700 --policy http://127.0.0.1:8800 --steps 30
"""
import argparse
import hashlib
import json
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor


def http(method, url, body=None, headers=None, timeout=60.0):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            raw = res.read()
            return res.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw.decode(errors="replace")


def must(status, body, what, ok=(200, 201)):
    if status not in ok:
        raise SystemExit("harness: %s failed: HTTP %d %s" % (what, status, json.dumps(body)[:500]))
    return body


def call_seed(seed, *parts):
    """A request seed from the run's seed and the call's place in it: the same samples whatever order calls run in."""
    digest = hashlib.sha256(("%d:" % seed + ":".join(str(p) for p in parts)).encode()).digest()
    return int.from_bytes(digest[:6], "little")


def check(answer, target):
    """The tool: how many positions of the target the answer gets right."""
    return sum(1 for a, b in zip(answer, target) if a == b)


def score(answer, target):
    return check(answer, target) / len(target)


class Driver:
    def __init__(self, args):
        self.args = args
        self.control = {"authorization": "Bearer " + args.token} if args.token else {}
        self.targets = args.targets.split(",")
        bad = [t for t in self.targets if not t.isdigit()]
        if bad:
            raise SystemExit("harness: --targets must be digit sequences: %s" % ", ".join(bad))
        self.run_id = args.run_id or uuid.uuid4().hex[:8]
        self.lock = threading.Lock()
        self.calls = 0
        self.aborts = 0  # answers that reached the harness ended by an abort (a weight update not continued)

    def served_version(self):
        status, body = http("GET", self.args.policy.rstrip("/") + "/policy", timeout=10)
        return must(status, body, "GET /policy")["version"]

    def wait_for_version(self, want):
        deadline = time.monotonic() + self.args.wait
        last = None
        while True:
            try:
                version = self.served_version()
                if version >= want:
                    return version
                last = "it serves version %d" % version
            except (urllib.error.URLError, ConnectionError, OSError) as e:
                last = "GET /policy: %s" % e
            if time.monotonic() > deadline:
                raise SystemExit(
                    "harness: the policy at %s did not reach version %d within %gs (%s); is the trainer running, with "
                    "--rollouts-per-step %d (len(targets) x n)?" % (self.args.policy, want, self.args.wait, last, len(self.targets) * self.args.n)
                )
            time.sleep(0.05)

    def tokenize(self, text):
        status, body = http("POST", self.args.policy.rstrip("/") + "/tokenize", {"model": self.args.model, "prompt": text})
        return must(status, body, "POST /tokenize", ok=(200,))["tokens"]

    def complete(self, rollout, prompt, version, seed):
        """One streamed call through the gateway; the answer's text. `version`: the x-rlgate-policy-version header
        (None: the gateway's own, from the trainer's updates)."""
        headers = {"content-type": "application/json", "authorization": "Bearer " + rollout["key"]}
        if version is not None:
            headers["x-rlgate-policy-version"] = str(version)
        body = {
            "model": self.args.model,
            "prompt": self.tokenize(prompt),
            "max_tokens": self.args.max_tokens,
            "temperature": self.args.temperature,
            "seed": seed,
            "stream": True,
        }
        req = urllib.request.Request(
            rollout["base_urls"]["openai"] + "/completions", data=json.dumps(body).encode(), method="POST", headers=headers
        )
        text = []
        try:
            with urllib.request.urlopen(req, timeout=60) as res:
                for line in res:
                    if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
                        continue
                    for choice in json.loads(line[6:]).get("choices") or []:
                        text.append(choice.get("text") or "")
                        if choice.get("finish_reason") == "abort":
                            with self.lock:
                                self.aborts += 1
        except urllib.error.HTTPError as e:
            must(e.code, e.read().decode(errors="replace"), "completions call", ok=(200,))
        with self.lock:
            self.calls += 1
        return "".join(text)

    def rollout(self, step, version, task, i):
        a = self.args
        target = self.targets[task]
        rid = "%s-s%03d-t%d-%02d" % (self.run_id, step, task, i)
        body = {
            "group": "task-%d" % task,
            "task": "t%d" % task,
            "harness": "one-tool",
            "round": step + 1,
            "metadata": {"group_size": a.n},
        }
        if version is not None:
            body["policy_version"] = str(version)
        url = a.gateway.rstrip("/") + "/api/rollouts/" + rid
        rollout = must(*http("PUT", url, body, self.control), "create rollout %s" % rid)
        prompt = "t%d>" % task
        first = self.complete(rollout, prompt, version, call_seed(a.seed, step, task, i, 1))
        hint = "=%d>" % check(first.rstrip("\n"), target)
        final = self.complete(rollout, prompt + first + hint, version, call_seed(a.seed, step, task, i, 2))
        return rid, task, score(final.rstrip("\n"), target), first, final

    def finish(self, rid, reward):
        a = self.args
        must(*http("POST", a.gateway.rstrip("/") + "/api/rollouts/%s/finish" % rid, {"reward": reward}, self.control), "finish %s" % rid)

    def step_record(self, step, results, seconds, version=None):
        rewards = [r[2] for r in results]
        per_task = {}
        for _, task, reward, _, _ in results:
            per_task.setdefault(self.targets[task], []).append(reward)
        return {
            "event": "step",
            "step": step,
            "policy_version": version,
            "rollouts": len(results),
            "reward_mean": sum(rewards) / len(rewards),
            "reward_by_target": {t: sum(v) / len(v) for t, v in per_task.items()},
            "exact": sum(1 for r in rewards if r == 1.0),
            "sample": {self.targets[task]: final for _, task, _, _, final in results[:: self.args.n]},
            "seconds": round(seconds, 3),
        }

    def step(self, step):
        """A synchronous step: every rollout sampled by the version trained on the steps before."""
        a = self.args
        version = self.wait_for_version(step)
        t0 = time.monotonic()
        jobs = [(task, i) for task in range(len(self.targets)) for i in range(a.n)]
        with ThreadPoolExecutor(max_workers=a.concurrency) as pool:
            results = list(pool.map(lambda job: self.rollout(step, version, *job), jobs))
        for rid, _, reward, _, _ in results:  # in a fixed order: the core sees the same stream every run
            self.finish(rid, reward)
        return self.step_record(step, results, time.monotonic() - t0, version)

    def run_async(self, steps):
        """Every step's rollouts in one queue; a step's start waits only for version step - lag. Yields each step's
        record once its rollouts ended (in the order steps end)."""
        a = self.args
        per_step = len(self.targets) * a.n
        done = {}
        started = {}
        out = []
        ready = threading.Condition()

        def work(job):
            step, task, i = job
            self.wait_for_version(step - a.lag)
            with self.lock:
                started.setdefault(step, time.monotonic())
            result = self.rollout(step, None, task, i)
            self.finish(result[0], result[2])
            with ready:
                done.setdefault(step, []).append(result)
                if len(done[step]) == per_step:
                    results = sorted(done.pop(step))
                    out.append(self.step_record(step, results, time.monotonic() - started[step]))
                    ready.notify_all()

        jobs = [(step, task, i) for step in range(steps) for task in range(len(self.targets)) for i in range(a.n)]
        with ThreadPoolExecutor(max_workers=a.concurrency) as pool:
            futures = [pool.submit(work, job) for job in jobs]
            emitted = 0
            while emitted < steps:
                with ready:
                    while not out and not any(f.done() and f.exception() for f in futures):
                        ready.wait(0.5)
                    failed = [f.exception() for f in futures if f.done() and f.exception()]
                    if failed:
                        for f in futures:
                            f.cancel()
                        raise failed[0]
                    records, out[:] = list(out), []
                for record in records:
                    emitted += 1
                    yield record


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gateway", default="http://127.0.0.1:8700", help="the gateway's URL (control API and rollout bases)")
    p.add_argument("--policy", default="http://127.0.0.1:8800", help="the trainer's policy endpoint (GET /policy: the served version)")
    p.add_argument("--token", help="the gateway's control token, when it has one")
    p.add_argument("--model", default="rlgate-tiny")
    p.add_argument("--targets", default="2718,3141", help="task t's answer is the t-th of these digit sequences")
    p.add_argument("--n", type=int, default=8, help="rollouts per task and step (the GRPO group)")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--max-tokens", type=int, default=5, help="per turn (a target's digits and the stop token)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--seed", type=int, default=0, help="every call's sampling seed derives from it")
    p.add_argument("--run-id", help="prefix of the rollout ids (default: random); ids must be new to the gateway")
    p.add_argument("--wait", type=float, default=300.0, help="seconds to wait for the trainer's next policy version")
    p.add_argument("--async", dest="run_async", action="store_true", help="rollouts keep running while the trainer trains (the trainer updates weights through the gateway: its --gateway)")
    p.add_argument("--lag", type=int, default=1, help="with --async: a step's rollouts start once the served version is at least step - lag")
    args = p.parse_args(argv)

    driver = Driver(args)
    records = driver.run_async(args.steps) if args.run_async else (driver.step(step) for step in range(args.steps))
    for record in records:
        print(json.dumps(record), flush=True)
    print(json.dumps({"event": "done", "steps": args.steps, "calls": driver.calls, "aborts_seen": driver.aborts}), flush=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
