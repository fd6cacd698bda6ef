"""Trainer step time on CPU, rows vs tree, for bench/tree.ts: reads every batch of a core in both layouts (the same
batches), then times forward + backward of the torch trainer's loss (torch_trainer.forward / surrogate, TinyLM over the
batch's own vocabulary) in each layout. Rows go through in micro-batches of --rows-per-pass padded rows (the way
trainers bound activation memory), tries one at a time with their dense ancestor mask.

Prints one JSON line: {"rows": {"tokens", "seconds"}, "tree": {...}, "loss_rows", "loss_tree"}.
"""
import argparse
import dataclasses
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))

import torch  # noqa: E402

from rlgate_client import TrainerClient  # noqa: E402
from rlgate_client.torch_policy import TinyLM  # noqa: E402
from rlgate_client.torch_trainer import forward, surrogate, token_temperatures  # noqa: E402


def read(address, layout, rollouts):
    out, seen = [], set()
    with TrainerClient(address) as client:
        for batch in client.batches(max_in_flight=256, layout=layout):
            out.append(batch)
            seen.update(info.rollout_id for info in batch.row_info)
            if len(seen) >= rollouts:
                break
    return sorted(out, key=lambda b: b.batch_id)


def row_slices(batch, per_pass):
    """The rows batch cut into micro-batches of per_pass rows (views of one Batch each)."""
    for r0 in range(0, batch.rows, per_pass):
        r1 = min(r0 + per_pass, batch.rows)
        a, b = int(batch.offsets[r0]), int(batch.offsets[r1])
        yield dataclasses.replace(
            batch,
            rows=r1 - r0,
            offsets=(batch.offsets[r0 : r1 + 1] - a).astype(np.int32),
            row_info=batch.row_info[r0:r1],
            **{k: getattr(batch, k)[a:b] for k in ("token_ids", "loss_mask", "logprobs", "advantages", "loss_weights", "call_index")},
        )


def trie_slices(batch):
    o = batch.trie_offsets
    for k in range(len(o) - 1):
        a, b = int(o[k]), int(o[k + 1])
        yield dataclasses.replace(
            batch,
            parents=np.where(batch.parents[a:b] >= 0, batch.parents[a:b] - a, -1).astype(np.int32),
            subtree_ends=(batch.subtree_ends[a:b] - a).astype(np.int32),
            positions=batch.positions[a:b],
            token_rows=batch.token_rows[a:b],
            trie_offsets=np.array([0, b - a], dtype=np.int32),
            **{k: getattr(batch, k)[a:b] for k in ("token_ids", "loss_mask", "logprobs", "advantages", "loss_weights", "call_index")},
        )


def step(model, batches, pieces, ids):
    """forward + backward over every piece of every batch (gradients accumulate, one optimizer step's worth)."""
    model.zero_grad()
    total = 0.0
    t0 = time.perf_counter()
    for batch in batches:
        for piece in pieces(batch):
            piece = dataclasses.replace(piece, token_ids=ids[piece.token_ids])
            new, entropy = forward(model, piece, token_temperatures(piece))
            loss = surrogate(piece, new, 0.2, entropy, 0.05)
            loss.backward()
            total += float(loss)
    return total, time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--core", required=True)
    p.add_argument("--rollouts", type=int, required=True)
    p.add_argument("--rows-per-pass", type=int, default=4)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(1)
    rows, tree = read(args.core, "rows", args.rollouts), read(args.core, "tree", args.rollouts)
    vocab = np.unique(np.concatenate([b.token_ids for b in rows]))
    ids = np.zeros(int(vocab.max()) + 1, dtype=np.int32)
    ids[vocab] = np.arange(vocab.size, dtype=np.int32)
    longest = max(int(np.diff(b.offsets).max()) for b in rows)
    torch.manual_seed(0)
    model = TinyLM(vocab.size, dim=64, layers=2, heads=4, max_len=longest)
    out = {}
    for name, batches, pieces in (
        ("rows", rows, lambda b: row_slices(b, args.rows_per_pass)),
        ("tree", tree, trie_slices),
    ):
        times = []
        for _ in range(args.repeat):
            loss, seconds = step(model, batches, pieces, ids)
            times.append(seconds)
        out[name] = {"tokens": int(sum(b.tokens for b in batches)), "seconds": float(np.median(times)), "loss": loss}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
