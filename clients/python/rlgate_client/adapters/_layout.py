"""A served batch cut into padded per-row tensors: the one place where rows are split and padded (NumPy only).

A row of a served batch is a whole trajectory, prompt and completion together, with a loss mask that can hold
context (tool outputs, user turns) between sampled spans. The frameworks want it split: the prompt is every token
before the row's first trained (mask-1) token, the response everything from there to the row's end, context inside
it included with mask 0 (verl's agent loop `response_mask`, TRL's `tool_mask`).

Per-token side arrays (PER_TOKEN_FIELDS: `call_index` today, `routed_experts` [tokens, layers, top_k] for MoE
routing replay) are split and padded by the same functions as the logprobs, whatever their trailing dimensions, so
a new per-token field of the batch is one entry in PER_TOKEN_FIELDS.
"""
from typing import Dict, List, Optional

import numpy as np

# Per-token fields a batch may carry besides token_ids / loss_mask / logprobs / advantages / loss_weights, and the
# value their padding takes. Only the fields a batch has (attribute present and not None) are laid out.
PER_TOKEN_FIELDS: Dict[str, float] = {
    "call_index": -1,  # -1: context, as in the batch
    "routed_experts": 0,  # zeros, as verl's agent loop pads routed_experts (agent_loop.py _agent_loop_postprocess)
}


def side_arrays(batch) -> Dict[str, np.ndarray]:
    """The batch's per-token side arrays (those of PER_TOKEN_FIELDS it carries), checked to have one entry per token."""
    out = {}
    n = int(np.asarray(batch.token_ids).shape[0])
    for name in PER_TOKEN_FIELDS:
        value = getattr(batch, name, None)
        if value is None:
            continue
        value = np.asarray(value)
        if value.shape[:1] != (n,):
            raise ValueError("batch.%s has %d entries along its first axis; the batch has %d tokens" % (name, value.shape[0] if value.ndim else 0, n))
        out[name] = value
    return out


def rows_of(batch):
    """The rows layout of a batch: a tree batch (rlgate core --layout tree) is converted back to rows, exactly (the
    same arrays a rows batch of it holds; rlgate_client.tree.to_rows), since verl, OpenRLHF and TRL train on padded
    rows and none of them takes a token trie. The tree's saving is lost: ask the core for rows
    (TrainerClient.batches(layout="rows")) when training through an adapter."""
    if getattr(batch, "layout", "rows") == "tree":
        from ..tree import to_rows

        return to_rows(batch)
    return batch


def group_uid(info) -> str:
    """The group a row's rollout was trained in, named as the core names it (rl-core/core/groups.ts):
    `group:NAME#G` (fill order, generation G), `group:NAME@R` (explicit round R), `+late` for the late part of a
    generation taken short, `rollout:ID` for a rollout without a group (a group of one). Rows with equal group
    uids are exactly the rollouts the core compared. The core sends the key as `group_key`; a batch from a core
    without it gets the key rebuilt from group, round, generation and late (a second late part, `+late2`, then
    shares the first one's uid)."""
    key = getattr(info, "group_key", "") or ""
    if key:
        return key
    name = getattr(info, "group", "") or ""
    if not name:
        return "rollout:" + info.rollout_id
    rnd = int(getattr(info, "round", 0) or 0)
    base = "group:%s@%d" % (name, rnd) if rnd else "group:%s#%d" % (name, int(getattr(info, "generation", 0)))
    return base + ("+late" if getattr(info, "late", False) else "")


class Layout:
    """Where each row of a batch splits and how it pads.

    prompt_length / response_length: pad every row to these (verl pads to rollout.prompt_length / response_length);
    a row longer than either is an error, never truncated. Default: the batch's longest prompt and response.
    """

    def __init__(self, batch, prompt_length: Optional[int] = None, response_length: Optional[int] = None):
        offsets = np.asarray(batch.offsets, dtype=np.int64)
        mask = np.asarray(batch.loss_mask)
        n = int(np.asarray(batch.token_ids).shape[0])
        if offsets.ndim != 1 or offsets.shape[0] < 1 or offsets[0] != 0 or offsets[-1] != n or np.any(np.diff(offsets) < 0):
            raise ValueError("batch.offsets must rise from 0 to the token count (%d): got %r" % (n, offsets[:8]))
        for name in ("loss_mask", "logprobs", "advantages", "loss_weights"):
            value = getattr(batch, name, None)
            if value is not None and np.asarray(value).shape[0] != n:
                raise ValueError("batch.%s has %d entries; the batch has %d tokens" % (name, np.asarray(value).shape[0], n))
        self.rows = int(offsets.shape[0] - 1)
        self.starts = offsets[:-1]
        self.ends = offsets[1:]
        self.prompt_lens = np.zeros(self.rows, dtype=np.int64)
        self.last_trained = np.zeros(self.rows, dtype=np.int64)  # in the response, 0-based
        for r in range(self.rows):
            trained = np.flatnonzero(mask[self.starts[r] : self.ends[r]])
            if trained.size == 0:
                raise ValueError("row %d has no trained token (loss_mask all 0): it has no response to train" % r)
            self.prompt_lens[r] = trained[0]
            self.last_trained[r] = trained[-1] - trained[0]
        self.response_lens = (self.ends - self.starts) - self.prompt_lens
        longest_prompt = int(self.prompt_lens.max(initial=0))
        longest_response = int(self.response_lens.max(initial=0))
        self.P = longest_prompt if prompt_length is None else int(prompt_length)
        self.R = longest_response if response_length is None else int(response_length)
        if self.P < longest_prompt:
            raise ValueError("prompt_length %d is shorter than the batch's longest prompt (%d tokens)" % (self.P, longest_prompt))
        if self.R < longest_response:
            raise ValueError(
                "response_length %d is shorter than the batch's longest response (%d tokens)" % (self.R, longest_response)
            )

    # Each function below takes an array with one entry per token of the batch (any trailing dimensions).

    def prompt(self, values: np.ndarray, pad) -> np.ndarray:
        """[rows, P, ...]: each row's prompt, left-padded (the prompt ends at column P)."""
        values = np.asarray(values)
        out = np.full((self.rows, self.P) + values.shape[1:], pad, dtype=values.dtype)
        for r in range(self.rows):
            p = int(self.prompt_lens[r])
            if p:
                out[r, self.P - p :] = values[self.starts[r] : self.starts[r] + p]
        return out

    def response(self, values: np.ndarray, pad) -> np.ndarray:
        """[rows, R, ...]: each row's response (first trained token to the row's end), right-padded."""
        values = np.asarray(values)
        out = np.full((self.rows, self.R) + values.shape[1:], pad, dtype=values.dtype)
        for r in range(self.rows):
            s = int(self.starts[r] + self.prompt_lens[r])
            out[r, : int(self.response_lens[r])] = values[s : self.ends[r]]
        return out

    def full(self, values: np.ndarray, pad) -> np.ndarray:
        """[rows, P + R, ...]: left-padded prompt then right-padded response, as input_ids."""
        return np.concatenate([self.prompt(values, pad), self.response(values, pad)], axis=1)

    def padded(self, values: np.ndarray, pad, shift: int = 0) -> np.ndarray:
        """[rows, T - shift, ...]: each row whole from its token `shift`, right-padded (T the longest row)."""
        values = np.asarray(values)
        lens = self.ends - self.starts
        T = int(lens.max(initial=0))
        out = np.full((self.rows, max(T - shift, 0)) + values.shape[1:], pad, dtype=values.dtype)
        for r in range(self.rows):
            piece = values[self.starts[r] + shift : self.ends[r]]
            out[r, : piece.shape[0]] = piece
        return out

    def prompt_mask(self) -> np.ndarray:
        return (np.arange(self.P)[None, :] >= (self.P - self.prompt_lens)[:, None]).astype(np.int64)

    def response_attention(self) -> np.ndarray:
        return (np.arange(self.R)[None, :] < self.response_lens[:, None]).astype(np.int64)

    def at_last_trained(self, per_row: np.ndarray) -> np.ndarray:
        """[rows, R] float32: per_row[r] at row r's last trained token of its response, 0 elsewhere."""
        out = np.zeros((self.rows, self.R), dtype=np.float32)
        out[np.arange(self.rows), self.last_trained] = np.asarray(per_row, dtype=np.float32)
        return out


def row_meta(batch) -> Dict[str, List]:
    """Per-row metadata as lists: uid (group), rollout_uid, trajectory_id, reward, and the rest of RowInfo that a
    trainer logs."""
    infos = list(batch.row_info)
    return {
        "uid": [group_uid(i) for i in infos],
        "rollout_uid": [i.rollout_id for i in infos],
        "trajectory_id": [getattr(i, "trajectory_id", "") for i in infos],
        "reward": [float(i.reward) for i in infos],
        "group": [getattr(i, "group", "") for i in infos],
        "generation": [int(getattr(i, "generation", 0)) for i in infos],
        "task": [getattr(i, "task", "") for i in infos],
        "harness": [getattr(i, "harness", "") for i in infos],
        "segment": [getattr(i, "segment", "") for i in infos],
        "policy_version": [getattr(i, "policy_version", "") for i in infos],
        "finish_reason": [getattr(i, "finish_reason", "") for i in infos],
        "no_signal": [bool(getattr(i, "no_signal", False)) for i in infos],
    }


def meta_info(batch) -> Dict:
    """The batch's own figures: what its loss weights implement and are normalised by."""
    return {
        "batch_id": int(batch.batch_id),
        "estimator": batch.estimator,
        "normalize": batch.normalize,
        "loss_agg": batch.loss_agg,
        "loss_tokens": int(batch.loss_tokens),
        "trained_tokens": int(batch.trained_tokens),
        "groups": int(batch.groups),
        "rollouts": int(batch.rollouts),
        "batch_unit": batch.batch_unit,
    }


def check_rows(batch, layout: "Layout") -> None:
    if len(batch.row_info) != layout.rows:
        raise ValueError("batch.row_info has %d entries for %d rows" % (len(batch.row_info), layout.rows))


def torch_module():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise ImportError(
            "rlgate_client.adapters needs PyTorch (pip install torch; Debian: apt-get install python3-torch)"
        ) from e
    return torch
