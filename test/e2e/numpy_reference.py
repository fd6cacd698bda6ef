#!/usr/bin/env python3
"""An independent NumPy recomputation of what an RL core serves, for the e2e test (test/e2e/python-trainer.test.ts).

Pulls batches from a core started with --batch-unit group (every group whole in one batch), de-duplicates them by
id, and recomputes from each batch's own tokens, masks and row info: the rollout as the sample of every outcome
estimator (GRPO, Dr.GRPO, RLOO, OPO, REINFORCE++-baseline whitened over the batch), TreeRL's tree values with V over
rollouts, `--normalize batch` keeping rows without signal at 0, and loss weights with the rollout as the sequence,
normalised by the batch's loss_tokens. Also asks the core for the same estimator over the served batch
(ComputeAdvantages) and compares. Prints one JSON line with the largest differences.
"""
import argparse
import json
import os
import sys
from collections import OrderedDict

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from rlgate_client import TrainerClient  # noqa: E402

GRPO_EPS = 1e-6
WHITEN_EPS = 1e-8


def group_key(info):
    return (info.group, info.generation, info.late) if info.group else ("", 0, info.rollout_id)


def whiten(x, include):
    """verl's masked_whiten over the `include` tokens (unbiased variance); 0 elsewhere."""
    out = np.zeros_like(x)
    v = x[include]
    if v.size == 0:
        return out
    var = v.var(ddof=1) if v.size > 1 else 0.0
    out[include] = (v - v.mean()) / np.sqrt(var + WHITEN_EPS)
    return out


def outcome_values(estimator, rewards, tokens):
    """Per rollout of one group: the advantage of its trained tokens (before any batch whitening)."""
    r = np.asarray(rewards, dtype=np.float64)
    n = r.size
    if n < 2:
        return np.zeros(n)
    mean = r.mean()
    if estimator == "grpo":
        return (r - mean) / (r.std(ddof=1) + GRPO_EPS)
    if estimator in ("dr-grpo", "reinforce++-baseline"):
        return r - mean
    if estimator == "rloo":
        return (r - (r.sum() - r) / (n - 1))
    if estimator == "opo":
        w = np.asarray(tokens, dtype=np.float64)
        return r - ((w * r).sum() / w.sum() if w.sum() else 0.0)
    raise ValueError(estimator)


def group_prefixes(rows):
    """Each rollout's reward, and per token prefix of any row the rollouts whose rows start with it."""
    rollouts = {}
    prefix_sets = {}
    for ids, _mask, rid, reward in rows:
        rollouts[rid] = reward
        for t in range(len(ids)):
            prefix_sets.setdefault(tuple(ids[: t + 1]), set()).add(rid)
    return rollouts, prefix_sets


def wider_prefix(prefix_sets, ids, t):
    """The rollouts of the longest prefix of ids[: t + 1] that more rollouts share (the branch point), or None."""
    s = prefix_sets[tuple(ids[: t + 1])]
    for u in range(t - 1, -1, -1):
        q = prefix_sets[tuple(ids[: u + 1])]
        if len(q) > len(s):
            return q
    return None


def per_trained_token(rows, advantage):
    """Each row's advantages: advantage(rewards, S, Q) at each trained token, with rewards the group's per rollout, S
    the rollouts of the token's prefix and Q those of its branch point (wider_prefix; None at the group's root)."""
    rollouts, prefix_sets = group_prefixes(rows)
    out = []
    for ids, mask, _rid, _reward in rows:
        adv = np.zeros(len(ids))
        for t in range(len(ids)):
            if mask[t]:
                adv[t] = advantage(rollouts, prefix_sets[tuple(ids[: t + 1])], wider_prefix(prefix_sets, ids, t))
        out.append(adv)
    return out


def mean_of(rollouts, members):
    return float(np.mean([rollouts[x] for x in members]))


def tree_advantages(rows):
    """TreeRL over one group: for each trained token, its prefix's rollouts S; V = mean reward over S (each rollout
    once); the branch parent is the longest shorter prefix with more rollouts (else the group's root); A = ((V - V_root)
    + (V - V_parent)) / sqrt(|S|)."""

    def advantage(rollouts, s, q):
        root = mean_of(rollouts, rollouts)
        v = mean_of(rollouts, s)
        parent = mean_of(rollouts, q) if q is not None else root
        return ((v - root) + (v - parent)) / np.sqrt(len(s))

    return per_trained_token(rows, advantage)


def branch_grpo_advantages(rows, eps=1e-6):
    """GRPO per branch point over one group: for each trained token, its prefix's rollouts S (V = their mean reward);
    the branch point is the longest shorter prefix with more rollouts (else the group's root, every rollout), with
    rollouts Q; A = (V - mean(Q)) / (unbiased std(Q) + eps), 0 when Q holds one rollout."""

    def advantage(rollouts, s, q):
        point = np.array([rollouts[x] for x in (q if q is not None else rollouts)])
        if len(point) < 2:
            return 0.0
        return (mean_of(rollouts, s) - point.mean()) / (point.std(ddof=1) + eps)

    return per_trained_token(rows, advantage)


def reference(batch, estimator, normalize, loss_agg, max_len=0):
    rows = batch.rows
    mask = batch.loss_mask.astype(bool)
    adv = np.zeros(batch.tokens)
    groups = OrderedDict()
    for r in range(rows):
        groups.setdefault(group_key(batch.row_info[r]), []).append(r)
    signal = np.zeros(rows, dtype=bool)
    singleton = np.zeros(rows, dtype=bool)
    for members in groups.values():
        rollout_ids = list(OrderedDict.fromkeys(batch.row_info[r].rollout_id for r in members))
        rewards = [next(batch.row_info[r].reward for r in members if batch.row_info[r].rollout_id == u) for u in rollout_ids]
        tokens = [sum(int(mask[batch.row(r)].sum()) for r in members if batch.row_info[r].rollout_id == u) for u in rollout_ids]
        has_signal = len(rollout_ids) > 1 and len(set(rewards)) > 1
        for r in members:
            signal[r] = has_signal
            singleton[r] = len(rollout_ids) < 2
        if estimator in ("tree", "branch-grpo"):
            rows_of = [(batch.token_ids[batch.row(r)].tolist(), mask[batch.row(r)], batch.row_info[r].rollout_id, batch.row_info[r].reward) for r in members]
            per_row = tree_advantages(rows_of) if estimator == "tree" else branch_grpo_advantages(rows_of)
            for r, a in zip(members, per_row):
                adv[batch.row(r)] = a
        else:
            values = dict(zip(rollout_ids, outcome_values(estimator, rewards, tokens)))
            for r in members:
                adv[batch.row(r)] = np.where(mask[batch.row(r)], values[batch.row_info[r].rollout_id], 0.0)
    adv = adv.astype(np.float32).astype(np.float64)
    if estimator == "reinforce++-baseline":
        include = mask.copy()
        for r in range(rows):
            if singleton[r]:
                include[batch.row(r)] = False
        adv = whiten(adv, include)
    if normalize == "batch":
        include = mask.copy()
        for r in range(rows):
            s = batch.row(r)
            if not signal[r] and not np.any(adv[s][mask[s]]):
                include[s] = False
        adv = whiten(adv, include)
    # Loss weights: the rollout is the sequence; normalised by the global token count N.
    weights = np.zeros(batch.tokens)
    per_rollout = OrderedDict()
    for r in range(rows):
        per_rollout.setdefault(batch.row_info[r].rollout_id, []).append(r)
    total = int(mask.sum())
    n_global = batch.loss_tokens or total
    seqs = sum(1 for rs in per_rollout.values() if sum(int(mask[batch.row(r)].sum()) for r in rs) > 0)
    for rs in per_rollout.values():
        c = sum(int(mask[batch.row(r)].sum()) for r in rs)
        for r in rs:
            s = batch.row(r)
            if loss_agg == "token-mean":
                w = 1.0 / n_global
            elif loss_agg == "seq-mean-token-mean":
                w = (1.0 / (c * seqs)) * (total / n_global) if c else 0.0
            elif loss_agg == "seq-mean-token-sum-norm":
                # Dr.GRPO: the mean over rollouts of each one's token sum / L, times T/N like the other seq-means.
                if max_len <= 0:
                    raise ValueError("seq-mean-token-sum-norm needs --max-len")
                w = (1.0 / (seqs * max_len)) * (total / n_global) if c else 0.0
            else:
                raise ValueError(loss_agg)
            weights[s] = np.where(mask[s], w, 0.0)
    return adv, weights


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--core", required=True)
    p.add_argument("--estimator", required=True)
    p.add_argument("--normalize", default="none")
    p.add_argument("--loss-agg", default="token-mean")
    p.add_argument("--max-len", type=int, default=0)
    p.add_argument("--batches", type=int, required=True)
    args = p.parse_args()
    seen, worst_adv, worst_w, worst_asked, rows, generations, segments = set(), 0.0, 0.0, 0.0, 0, set(), set()
    no_signal_nonzero = 0
    with TrainerClient(args.core) as client:
        for batch in client.batches(trainer="numpy-reference", max_in_flight=8):
            if batch.batch_id in seen:
                client.ack([batch.batch_id])
                continue
            seen.add(batch.batch_id)
            adv, weights = reference(batch, args.estimator, args.normalize, args.loss_agg, args.max_len)
            worst_adv = max(worst_adv, float(np.max(np.abs(adv - batch.advantages), initial=0.0)))
            worst_w = max(worst_w, float(np.max(np.abs(weights - batch.loss_weights), initial=0.0)))
            if args.estimator not in ("tree", "branch-grpo"):
                asked = client.compute_advantages(batch_id=batch.batch_id, estimator=args.estimator, normalize=args.normalize)
                worst_asked = max(worst_asked, float(np.max(np.abs(asked["advantages"] - batch.advantages), initial=0.0)))
            for r in range(batch.rows):
                info = batch.row_info[r]
                generations.add("%s#%d%s" % (info.group, info.generation, "+late" if info.late else ""))
                segments.add(info.segment)
                if info.no_signal and args.estimator not in ("reinforce++-baseline",) and np.any(batch.advantages[batch.row(r)]):
                    no_signal_nonzero += 1
            rows += batch.rows
            client.ack([batch.batch_id])
            if len(seen) >= args.batches:
                break
    print(json.dumps({
        "estimator": args.estimator,
        "batches": len(seen),
        "rows": rows,
        "generations": sorted(generations),
        "segments": sorted(segments),
        "max_abs_diff_advantages": worst_adv,
        "max_abs_diff_loss_weights": worst_w,
        "max_abs_diff_compute_advantages": worst_asked,
        "no_signal_rows_nonzero": no_signal_nonzero,
    }), flush=True)


if __name__ == "__main__":
    main()
