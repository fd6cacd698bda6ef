"""A PyTorch trainer for rlgate's RL core that also serves its own policy: the closed loop on one machine.

The trainer holds a tiny causal LM (torch_policy.TinyLM over a character vocabulary) twice: the trained copy, and the
served copy behind a vLLM-compatible /v1/completions endpoint (torch_server.py) that the gateway is pointed at
(`rlgate serve --upstream http://127.0.0.1:8800`). The served copy runs in a child process (torch_policy_process.py),
so sampling computes beside training; each update hands it the new weights over a local socket. Per training step:

  1. batches come from the core (TrainerClient.batches) until the step's rollouts are in (--rollouts-per-step);
  2. each batch's per-token logprobs are recomputed with the weights that sampled it, before any update, and sent
     with ReportLogprobs: the core's consistency figures (Pearson r, k3 KL, p99 |dlogp|) measure how well training
     agrees with inference;
  3. --ppo-epochs passes of the clipped surrogate over the step's rows (one forward over all of them, in rollout id
     order), aggregated by the core's loss weights:
         ratio = exp(logp_new - logp_batch)
         loss  = sum(loss_weights * loss_mask * -min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A))
     (minus --entropy-coef times each trained token's entropy), backward, gradient clipping, an Adam step each;
  4. the batches are acked, the served copy takes the new weights (PolicyProcess.load) and the policy version rises by one
     (GET /policy on the server; the rollout driver tags the next rollouts with it).

Asynchronous (--async): rollouts keep running while the trainer trains. Each update goes through the gateways' policy
protocol, relayed by the core (TrainerClient.update_policy: PausePolicy / ResumePolicy; rlgate core --gateway-api):
pause (--update-mode abort: the server ends running answers, the gateways hold new calls), the served copy takes the
new weights, resume with version N: the gateways continue every interrupted answer, and each token's policy version reaches the batches (rlgate_client.token_versions). A step reports
the staleness of what it trained on (current version - each trained token's) and trains stale tokens with decoupled
PPO: the ratio against the weights the step starts from, weighted by the truncated importance weight of the policy that
sampled them (off_policy).

Run:  python3 -m rlgate_client.torch_trainer --core 127.0.0.1:8702 --serve 127.0.0.1:8800 --rollouts-per-step 16
      [--async]   (with rlgate core --gateway-api http://127.0.0.1:8700)
      (rlgate-torch-trainer once pip-installed; docs/trainers.md has the whole loop, examples/closed-loop the harness)
"""
import argparse
import json
import os
import queue
import sys
import threading
import time
from typing import Dict, List

import numpy as np
import torch

from .torch_policy import DEFAULT_ALPHABET, PAUSE_MODES, CharTokenizer, build_model, next_token_logprobs
from .torch_policy_process import PolicyProcess
from .trainer import Batch, TrainerClient
from .tree import ancestor_mask, tries
from .versions import token_versions


def token_temperatures(batch: Batch) -> np.ndarray:
    """The sampling temperature of each token's call (1 on context and where the call set none; vLLM's default)."""
    out = np.ones(batch.tokens, dtype=np.float32)
    if batch.layout == "tree":  # a tree token's call_index points into the calls of its row, token_rows
        for t in np.nonzero(batch.call_index >= 0)[0]:
            call = batch.row_info[int(batch.token_rows[t])].calls[int(batch.call_index[t])]
            out[t] = call.temperature if call.HasField("temperature") else 1.0
        return out
    for r in range(batch.rows):
        s = batch.row(r)
        temps = np.array([c.temperature if c.HasField("temperature") else 1.0 for c in batch.row_info[r].calls] + [1.0], dtype=np.float32)
        idx = batch.call_index[s]
        out[s] = temps[np.where(idx >= 0, idx, len(temps) - 1)]
    return out


def batch_forward(model: torch.nn.Module, batch: Batch, temps: np.ndarray):
    """Each token's logprob given the tokens before it in its row, and the entropy of the distribution it was drawn
    from (float32, flat like batch.token_ids; 0 for a row's first token, which has no context and is never sampled).
    Rows are right-padded into one forward: causal attention keeps the padding out of every real position."""
    lengths = np.diff(batch.offsets)
    width = int(lengths.max())
    ids = torch.zeros(batch.rows, width, dtype=torch.long)
    temp = torch.ones(batch.rows, width)
    rows = torch.zeros(batch.tokens, dtype=torch.long)
    cols = torch.zeros(batch.tokens, dtype=torch.long)
    keep = torch.zeros(batch.tokens, dtype=torch.bool)
    for r in range(batch.rows):
        s = batch.row(r)
        n = int(lengths[r])
        ids[r, :n] = torch.from_numpy(batch.token_ids[s].astype(np.int64))
        temp[r, :n] = torch.from_numpy(temps[s])
        if n > 1:
            rows[s.start + 1 : s.stop] = r
            cols[s.start + 1 : s.stop] = torch.arange(n - 1)
            keep[s.start + 1 : s.stop] = True
    logp = next_token_logprobs(model(ids)[:, :-1], temp[:, 1:])  # position i predicts token i + 1
    picked = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    zero = torch.zeros(batch.tokens)
    return torch.where(keep, picked[rows, cols], zero), torch.where(keep, entropy[rows, cols], zero)


def tree_forward(model: torch.nn.Module, batch: Batch, temps: np.ndarray):
    """batch_forward over a tree batch: each trie (one per rollout) is one sequence of the forward, its tokens at
    their depths, each attending to its ancestors only (tree attention); a token's logprob and entropy come from its
    parent's logits, which is what the row forward computes at every row through it (0 at a trie's root)."""
    spans = tries(batch)
    width = max(e - s for s, e in spans)
    T = len(spans)
    ids = torch.zeros(T, width, dtype=torch.long)
    pos = torch.zeros(T, width, dtype=torch.long)
    attend = torch.eye(width, dtype=torch.bool).repeat(T, 1, 1)  # padding sees itself: no row without a key
    trie_of = np.zeros(batch.tokens, dtype=np.int64)
    for k, (s, e) in enumerate(spans):
        ids[k, : e - s] = torch.from_numpy(batch.token_ids[s:e].astype(np.int64))
        pos[k, : e - s] = torch.from_numpy(batch.positions[s:e].astype(np.int64))
        attend[k, : e - s, : e - s] = torch.from_numpy(ancestor_mask(batch, s, e))
        trie_of[s:e] = k
    starts = np.array([s for s, _ in spans], dtype=np.int64)
    logits = model(ids, positions=pos, attend=attend)
    child = np.nonzero(batch.parents >= 0)[0]
    parent = batch.parents[child].astype(np.int64)
    k = torch.from_numpy(trie_of[child])
    at = torch.from_numpy(parent - starts[trie_of[child]])
    logp = next_token_logprobs(logits[k, at], torch.from_numpy(temps[child]))
    picked = logp.gather(-1, torch.from_numpy(batch.token_ids[child].astype(np.int64)).unsqueeze(-1)).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    index = torch.from_numpy(child)
    new = torch.zeros(batch.tokens, dtype=picked.dtype).index_put((index,), picked)
    ent = torch.zeros(batch.tokens, dtype=entropy.dtype).index_put((index,), entropy)
    return new, ent


def forward(model: torch.nn.Module, batch: Batch, temps: np.ndarray):
    """Logprobs and entropies of every token of the batch, in its layout."""
    return tree_forward(model, batch, temps) if batch.layout == "tree" else batch_forward(model, batch, temps)


def batch_logprobs(model: torch.nn.Module, batch: Batch, temps: np.ndarray) -> torch.Tensor:
    """forward's logprobs alone: what is reported to the core (in the batch's layout)."""
    return forward(model, batch, temps)[0]


def surrogate(
    batch: Batch, new: torch.Tensor, clip: float, entropy=None, entropy_coef: float = 0.0, old=None, behaviour_weights=None
) -> torch.Tensor:
    """sum(loss_weights * mask * (-w * min(ratio * A, clip(ratio) * A) - entropy_coef * entropy)),
    ratio = exp(new - old), old the batch's (sampling) logprobs unless given, w the behaviour weights (1 unless given:
    off_policy)."""
    mask = torch.from_numpy(batch.loss_mask.astype(bool))
    old = torch.from_numpy(batch.logprobs.copy()).to(new.dtype) if old is None else old.to(new.dtype)
    adv = torch.from_numpy(batch.advantages.copy()).to(new.dtype)
    w = torch.from_numpy(batch.loss_weights.copy()).to(new.dtype)
    ratio = torch.exp(torch.where(mask, new - old, torch.zeros_like(new)))
    per_token = -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip, 1 + clip) * adv)
    if behaviour_weights is not None:
        per_token = per_token * behaviour_weights.to(new.dtype)
    if entropy is not None and entropy_coef:
        per_token = per_token - entropy_coef * entropy
    return torch.sum(torch.where(mask, w * per_token, torch.zeros_like(per_token)))


class Staleness:
    """How old each trained token of a step is: its policy version (rlgate_client.token_versions, where the gateway
    says a weight update fell inside its answer) against the version the step trains from."""

    def __init__(self, rows: Batch, current: int):
        trained = rows.loss_mask == 1
        age = np.full(rows.tokens, -1, dtype=np.int64)  # -1: no integer version (counted, treated as stale)
        versions = token_versions(rows)
        for t in np.nonzero(trained)[0]:
            v = versions[t]
            if v is not None and v.lstrip("-").isdigit():
                age[t] = current - int(v)
        self.trained = trained
        self.age = age
        self.versions = sorted({versions[t] for t in np.nonzero(trained)[0] if versions[t] is not None}, key=_version_order)
        self.unversioned = int(np.sum(trained & (age < 0)))
        self.stale = trained & (age != 0)

    def figures(self) -> dict:
        ages = self.age[self.trained & (self.age >= 0)]
        return {
            "staleness_mean": float(ages.mean()) if ages.size else 0.0,
            "staleness_max": int(ages.max()) if ages.size else 0,
            "stale_tokens": int(self.stale.sum()),
            "unversioned_tokens": self.unversioned,
        }


def _version_order(v: str):
    return (0, int(v), "") if v.lstrip("-").isdigit() else (1, 0, v)


def off_policy(rows: Batch, proximal: torch.Tensor, stale: np.ndarray, cap: float):
    """Decoupled PPO (AReaL) on the stale tokens: their ratio is taken against the proximal policy (the weights the
    step starts from, `proximal` = their logprobs) and the loss weighted by min(exp(proximal - sampling), cap), the
    truncated importance weight of the policy that sampled them. Fresh tokens (sampled by the weights the step starts
    from) keep ratio against their sampling logprobs and weight 1: a synchronous step is plain PPO. (AReaL masks a
    token whose weight is above the cap instead of truncating it; on the closed loop's toy task that learned no better:
    docs/trainers.md, Measured.)
    Returns (old logprobs, behaviour weights, |proximal - sampling| per token)."""
    behaviour = torch.from_numpy(rows.logprobs.copy()).to(proximal.dtype)
    mask = torch.from_numpy(stale)
    old = torch.where(mask, proximal, behaviour)
    weights = torch.where(mask, torch.clamp(torch.exp(proximal - behaviour), max=cap), torch.ones_like(behaviour))
    return old, weights, (proximal - behaviour).abs()


def merged_tree(step: "Step"):
    """merged for tree batches: the step's tries (one per rollout) in rollout id order, indexes shifted."""
    order = []
    for b, batch in enumerate(step.batches):
        for s, e in tries(batch):
            order.append((batch.row_info[int(batch.token_rows[s])].rollout_id, b, s, e))
    order.sort(key=lambda x: x[0])
    parts = {k: [] for k in ("token_ids", "loss_mask", "logprobs", "advantages", "loss_weights", "call_index", "positions", "temps")}
    parents, ends, token_rows, infos, bounds = [], [], [], [], [0]
    for _, b, s, e in order:
        batch = step.batches[b]
        for k in parts:
            parts[k].append(step.temps[b][s:e] if k == "temps" else getattr(batch, k)[s:e])
        shift = bounds[-1] - s
        p = batch.parents[s:e]
        parents.append(np.where(p >= 0, p + shift, -1))
        ends.append(batch.subtree_ends[s:e] + shift)
        rows = batch.token_rows[s:e]
        first = int(rows.min())
        token_rows.append(rows - first + len(infos))
        infos.extend(batch.row_info[first : int(rows.max()) + 1])
        bounds.append(bounds[-1] + e - s)
    cat = {k: np.concatenate(v) for k, v in parts.items()}
    tree = Batch(
        batch_id=0,
        rows=len(infos),
        offsets=np.zeros(1, dtype=np.int32),
        token_ids=cat["token_ids"],
        loss_mask=cat["loss_mask"],
        logprobs=cat["logprobs"],
        advantages=cat["advantages"],
        loss_weights=cat["loss_weights"],
        row_info=infos,
        call_index=cat["call_index"],
        layout="tree",
        parents=np.concatenate(parents).astype(np.int32),
        positions=cat["positions"],
        subtree_ends=np.concatenate(ends).astype(np.int32),
        token_rows=np.concatenate(token_rows).astype(np.int32),
        trie_offsets=np.array(bounds, dtype=np.int32),
    )
    return tree, cat["temps"]


def merged(step: "Step"):
    """The step's rows as one batch, ordered by (rollout, trajectory) id: the same forward and the same sums however
    the core cut the step into batches (which follows timing), so a seeded run trains the same weights every time."""
    if step.batches and step.batches[0].layout == "tree":
        return merged_tree(step)
    order = sorted(
        ((info.rollout_id, info.trajectory_id, b, r) for b, batch in enumerate(step.batches) for r, info in enumerate(batch.row_info)),
        key=lambda x: (x[0], x[1]),
    )
    parts = {k: [] for k in ("token_ids", "loss_mask", "logprobs", "advantages", "loss_weights", "call_index", "temps")}
    lengths, infos = [], []
    for _, _, b, r in order:
        batch = step.batches[b]
        s = batch.row(r)
        for k in parts:
            parts[k].append(step.temps[b][s] if k == "temps" else getattr(batch, k)[s])
        lengths.append(s.stop - s.start)
        infos.append(batch.row_info[r])
    cat = {k: np.concatenate(v) for k, v in parts.items()}
    rows = Batch(
        batch_id=0,
        rows=len(order),
        offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32),
        token_ids=cat["token_ids"],
        loss_mask=cat["loss_mask"],
        logprobs=cat["logprobs"],
        advantages=cat["advantages"],
        loss_weights=cat["loss_weights"],
        row_info=infos,
        call_index=cat["call_index"],
    )
    return rows, cat["temps"]


TRAIN = object()  # the inbox's "train on what came" marker


class Step:
    """The batches of one training step and what was measured on them."""

    def __init__(self):
        self.batches: List[Batch] = []
        self.temps: List[np.ndarray] = []
        self.reports: List[dict] = []
        self.rewards: Dict[str, float] = {}  # rollout id → reward
        self.tasks: Dict[str, str] = {}  # rollout id → task
        self.waited_ms = 0.0  # the trainer's idle time: waiting for the step's batches

    def add(self, batch: Batch, temps: np.ndarray, report: dict) -> None:
        self.batches.append(batch)
        self.temps.append(temps)
        self.reports.append(report)
        for info in batch.row_info:
            self.rewards[info.rollout_id] = info.reward
            self.tasks[info.rollout_id] = info.task

    def reward_by_task(self) -> Dict[str, float]:
        by: Dict[str, List[float]] = {}
        for rollout, reward in self.rewards.items():
            by.setdefault(self.tasks[rollout], []).append(reward)
        return {task: float(np.mean(r)) for task, r in sorted(by.items())}


def consistency(step: Step) -> dict:
    """Figures over the step's batches: the lowest Pearson r, the token-weighted k3 KL, the highest p99 |dlogp|."""
    figures = [r["harnesses"]["*"] for r in step.reports if "*" in r["harnesses"]]
    if not figures:
        return {"pearson": None, "k3_kl": None, "abs_diff_p99": None, "tokens": 0}
    tokens = sum(f["tokens"] for f in figures)
    return {
        "pearson": min(f["pearson"] for f in figures),
        "k3_kl": sum(f["k3_kl"] * f["tokens"] for f in figures) / max(tokens, 1),
        "abs_diff_p99": max(f["abs_diff_p99"] for f in figures),
        "tokens": tokens,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--core", default="127.0.0.1:8702", help="the RL core's trainer service (host:port)")
    p.add_argument("--token", default=os.environ.get("RLGATE_CORE_TOKEN"))
    p.add_argument("--serve", default="127.0.0.1:8800", help="host:port of the policy's vLLM-compatible endpoint (port 0: any)")
    p.add_argument("--model-name", default="rlgate-tiny", help="the served model's name (/v1/models)")
    p.add_argument("--rollouts-per-step", type=int, default=0, help="rollouts one step trains on (0: one step per batch)")
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: run until interrupted)")
    p.add_argument("--step-wait", type=float, default=30.0, help="seconds a step waits for its next batch before training on what came")
    p.add_argument("--ppo-epochs", type=int, default=2, help="passes of the clipped surrogate over each step's rows")
    p.add_argument("--clip", type=float, default=0.2, help="PPO's epsilon: the ratio is clipped to [1 - eps, 1 + eps]")
    # Defaults tuned on the closed loop's toy task (docs/trainers.md): without the entropy bonus the policy collapses
    # onto one answer before it finds the whole target, and GRPO's groups of equal rewards then teach nothing.
    p.add_argument("--entropy-coef", type=float, default=0.05, help="entropy bonus per trained token (weighted like the surrogate)")
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0, help="initial weights and sampling without a request seed")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--max-len", type=int, default=64, help="the model's positions (prompt + completion)")
    p.add_argument("--alphabet", default=DEFAULT_ALPHABET, help="the characters that are the model's tokens")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: the same numbers on every run)")
    p.add_argument("--importance-cap", type=float, default=2.0, help="cap of the truncated importance weights (reported to the core; stale tokens' behaviour weights)")
    p.add_argument("--async", dest="run_async", action="store_true", help="rollouts run while the trainer trains: each update pauses the gateways through the core (PausePolicy; the core needs --gateway-api), swaps the served weights and resumes them with the new version (ResumePolicy)")
    p.add_argument("--update-mode", choices=PAUSE_MODES, default="abort", help="with --async: how the gateways pause running answers for an update (abort: continued after it, every token's version exact)")
    p.add_argument("--layout", choices=["rows", "tree"], default="", help="the batches' layout (default: the core's): tree trains each rollout's token trie once, with tree attention")
    p.add_argument("--save", help="write the final weights here (torch.save of the state dict)")
    p.add_argument("--json", action="store_true", help="one JSON line per step (and one when serving starts)")
    p.add_argument("--tls-ca")
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    p.add_argument("--insecure", action="store_true")
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    tokenizer = CharTokenizer(args.alphabet)
    dims = dict(dim=args.dim, layers=args.layers, heads=args.heads, max_len=args.max_len)
    model = build_model(tokenizer.vocab_size, args.seed, **dims)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    # The served copy lives in its own process (sampling beside training, not between its steps), version 0 the
    # trainer's own initial weights.
    server = PolicyProcess(args.serve, args.model_name, args.seed, dims, args.alphabet).start()
    try:
        server.load(model.state_dict(), 0)
        train(args, model, optimizer, tokenizer, server)
    finally:
        server.close()


def train(args, model, optimizer, tokenizer, server: PolicyProcess) -> None:
    """Says what it serves, then trains a step per --rollouts-per-step rollouts of the core's batches until --steps."""

    def say(record: dict, text: str) -> None:
        print(json.dumps(record) if args.json else text, flush=True)

    say(
        {"event": "serving", "url": server.url, "model": args.model_name, "version": 0, "vocab": tokenizer.vocab_size,
         "parameters": sum(t.numel() for t in model.parameters())},
        "serving %s on %s (policy version 0, %d parameters); training from %s"
        % (args.model_name, server.url, sum(t.numel() for t in model.parameters()), args.core),
    )

    # Batches are read on a thread so a step can also end by time (a rollout that never came: --rollouts-per-step
    # waits at most --step-wait for the next batch), and Ctrl-C ends the loop at once.
    inbox: "queue.Queue" = queue.Queue()
    tls = dict(tls_ca=args.tls_ca, tls_cert=args.tls_cert, tls_key=args.tls_key)
    client = TrainerClient(args.core, token=args.token, insecure=args.insecure, **tls)
    if args.run_async:  # calls from now on record version 0, until the first update names 1
        client.resume_policy(0)

    def read():
        try:
            for batch in client.batches(trainer="torch-trainer", max_in_flight=64, layout=args.layout):
                inbox.put(batch)
        except Exception as e:  # the stream broke: the main loop reports it
            inbox.put(e)
        inbox.put(None)

    threading.Thread(target=read, name="batches", daemon=True).start()

    seen = set()
    version = 0
    step = Step()
    try:
        while not args.steps or version < args.steps:
            waiting = time.perf_counter()
            try:
                item = inbox.get(timeout=args.step_wait if step.batches else None)
            except queue.Empty:  # the step's last rollouts did not come: train on what came
                print("torch-trainer: %d of %d rollouts after waiting %gs: training on them"
                      % (len(step.rewards), args.rollouts_per_step, args.step_wait), file=sys.stderr, flush=True)
                item = TRAIN
            finally:
                step.waited_ms += (time.perf_counter() - waiting) * 1000
            if item is None:
                raise SystemExit("torch-trainer: the core's batch stream ended")
            if isinstance(item, Exception):
                raise SystemExit("torch-trainer: the core's batch stream failed: %s" % item)
            if item is not TRAIN:
                batch = item
                if batch.batch_id in seen:  # sent again (a core restart): trained already
                    client.ack([batch.batch_id])
                    continue
                seen.add(batch.batch_id)
                temps = token_temperatures(batch)
                with torch.no_grad():  # the weights the step starts from: the served copy's (in an asynchronous
                    # loop some tokens were sampled by older versions; Staleness says which)
                    recomputed = batch_logprobs(model, batch, temps).numpy()
                report = client.report_logprobs(batch.batch_id, recomputed, importance_cap=args.importance_cap)
                step.add(batch, temps, report)
                if args.rollouts_per_step and len(step.rewards) < args.rollouts_per_step:
                    continue

            t0 = time.perf_counter()
            rows, temps = merged(step)
            staleness = Staleness(rows, version)
            losses = []
            for epoch in range(args.ppo_epochs):
                optimizer.zero_grad()
                new, entropy = forward(model, rows, temps)
                if epoch == 0:  # before any update of this step: the proximal policy's logprobs
                    old, weights, dlogp = off_policy(rows, new.detach(), staleness.stale, args.importance_cap)
                loss = surrogate(rows, new, args.clip, entropy, args.entropy_coef, old=old, behaviour_weights=weights)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                optimizer.step()
                losses.append(float(loss.item()))
            client.ack([b.batch_id for b in step.batches])
            trained_ms = (time.perf_counter() - t0) * 1000
            version += 1
            t1 = time.perf_counter()
            if args.run_async:  # rollouts run on meanwhile: the update pauses them through the core and the gateways
                with client.update_policy(version, args.update_mode):
                    server.load(model.state_dict(), version)
            else:
                server.load(model.state_dict(), version)
            update_ms = (time.perf_counter() - t1) * 1000

            rewards = list(step.rewards.values())
            c = consistency(step)
            mask_tokens = sum(int(b.loss_mask.sum()) for b in step.batches)
            fresh = staleness.trained & ~staleness.stale
            d = dlogp.numpy()
            record = {
                "event": "step",
                "step": version - 1,
                "version": version,
                "batches": len(step.batches),
                "rollouts": len(rewards),
                "rows": sum(b.rows for b in step.batches),
                "tokens": sum(b.tokens for b in step.batches),
                "row_tokens": sum(b.row_tokens or b.tokens for b in step.batches),
                "layout": step.batches[0].layout if step.batches else "",
                "trained_tokens": mask_tokens,
                "reward_mean": float(np.mean(rewards)),
                "exact": sum(1 for r in rewards if r == 1.0),
                "reward_by_task": step.reward_by_task(),
                "sampled_by": staleness.versions,
                **staleness.figures(),
                # Sampling vs the weights the step starts from: ~0 on tokens their versions call fresh, and not on stale
                # ones, when every token's version is the weights that sampled it.
                "fresh_max_abs_dlogp": float(d[fresh].max()) if fresh.any() else 0.0,
                "stale_mean_abs_dlogp": float(d[staleness.stale].mean()) if staleness.stale.any() else 0.0,
                "loss": losses,
                "pearson": c["pearson"],
                "k3_kl": c["k3_kl"],
                "abs_diff_p99": c["abs_diff_p99"],
                "step_ms": trained_ms,
                "update_ms": update_ms,
                "waited_ms": step.waited_ms,
                "at": time.time(),
            }
            say(
                record,
                "step %d: %d rollouts, %d rows, %d tokens (%d trained), sampled by policy %s (staleness mean %.2f max %d) | "
                "reward %.3f | logprobs vs inference: pearson %.6f, k3 KL %.2e, |dlogp| p99 %.2e | loss %s | now serving version %d"
                % (record["step"], record["rollouts"], record["rows"], record["tokens"], mask_tokens,
                   ",".join(staleness.versions) or "?", record["staleness_mean"], record["staleness_max"], record["reward_mean"],
                   c["pearson"] if c["pearson"] is not None else float("nan"),
                   c["k3_kl"] or 0.0, c["abs_diff_p99"] or 0.0, " ".join("%+.4f" % x for x in losses), version),
            )
            step = Step()
    finally:
        if args.save:
            torch.save(model.state_dict(), args.save)
        client.close()


def run():
    """The console script's entry point: an interrupt ends the loop quietly."""
    try:
        main()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    run()
