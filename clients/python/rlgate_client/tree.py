"""The tree layout of a batch (`rlgate core --layout tree`, or a stream asking for it): what tree attention needs.

A tree batch holds each rollout's token trie in depth-first order: every distinct (prefix, token) of the rollout's
rows once, each sampled token exactly once. Token q attends to token k iff k is q or an ancestor of q, which
depth-first order makes a span test: k <= q < subtree_ends[k]. Position ids are the depth (`positions`), the
position each token has in every row through it. The per-token fields (loss_mask, logprobs, advantages,
loss_weights, call_index, routed_experts) are those of the row token that trains the node, so
sum(loss_weights * per_token_loss) over the tree is the rows' sum, term for term.

Everything here is NumPy (torch only in flex_block_mask); the batch's own arrays are views over the message.
"""
from typing import Dict, Optional

import numpy as np


def _need_tree(batch) -> None:
    if getattr(batch, "layout", "rows") != "tree":
        raise ValueError("batch %s is in the rows layout: tree structure exists only in a tree batch" % batch.batch_id)


def tries(batch):
    """(start, end) of each trie (one per rollout), in batch order."""
    _need_tree(batch)
    o = batch.trie_offsets
    return [(int(o[k]), int(o[k + 1])) for k in range(len(o) - 1)]


def ancestor_mask(batch, start: int = 0, end: Optional[int] = None) -> np.ndarray:
    """Dense [n, n] bool over tokens [start, end): mask[q, k] is True where q may attend to k (k is q or an ancestor).

    n² bytes: for small tries (a trie at a time, tries(batch)); large ones take block_mask.
    """
    _need_tree(batch)
    end = batch.tokens if end is None else end
    k = np.arange(start, end)
    ends = batch.subtree_ends[start:end]
    q = k[:, None]
    return (k[None, :] <= q) & (q < ends[None, :])


def block_mask(batch, block_size: int = 128, start: int = 0, end: Optional[int] = None) -> Dict[str, np.ndarray]:
    """The ancestor mask over tokens [start, end) by blocks, as FlexAttention's BlockMask takes it
    (BlockMask.from_kv_blocks): per query block, the key blocks that are partial (the mask_mod decides per pair) and
    those that are full (every pair attends); a block in neither is skipped.

    Returns int32 arrays kv_num_blocks [Q], kv_indices [Q, K], full_kv_num_blocks [Q], full_kv_indices [Q, K]
    (indices of a row sorted, the unused tail -1), and block_size. A key block is full when every query of the query
    block lies inside every key's subtree, empty when none does; partial otherwise.
    """
    _need_tree(batch)
    end = batch.tokens if end is None else end
    n = end - start
    nb = (n + block_size - 1) // block_size
    ends = batch.subtree_ends[start:end].astype(np.int64) - start
    pad = nb * block_size - n
    # Per key block: its first and last key, the smallest and largest subtree end (padding keys: no subtree).
    k_first = np.arange(nb) * block_size
    k_last = np.minimum(k_first + block_size, n) - 1
    e = np.concatenate([ends, np.full(pad, -1)]).reshape(nb, block_size)
    e_min = np.where(np.arange(nb * block_size).reshape(nb, block_size) < n, e, np.iinfo(np.int64).max).min(1)
    e_max = e.max(1)
    q_first = k_first[:, None]
    q_last = k_last[:, None]
    full = (k_last[None, :] <= q_first) & (q_last < e_min[None, :])
    empty = (k_first[None, :] > q_last) | (e_max[None, :] <= q_first)
    partial = ~full & ~empty

    def listed(sel: np.ndarray):
        counts = sel.sum(1).astype(np.int32)
        idx = np.full(sel.shape, -1, dtype=np.int32)
        for qb in range(nb):
            hit = np.nonzero(sel[qb])[0]
            idx[qb, : hit.size] = hit
        return counts, idx

    kv_num, kv_idx = listed(partial)
    full_num, full_idx = listed(full)
    return {
        "kv_num_blocks": kv_num,
        "kv_indices": kv_idx,
        "full_kv_num_blocks": full_num,
        "full_kv_indices": full_idx,
        "block_size": np.int32(block_size),
    }


def block_mask_dense(blocks: Dict[str, np.ndarray], dense: np.ndarray) -> np.ndarray:
    """What a block-sparse kernel computes with `blocks`: full blocks all True, partial blocks the pair mask
    (`dense`, the mask_mod's answers), skipped blocks False. Equal to `dense` when the block form is right."""
    b = int(blocks["block_size"])
    out = np.zeros_like(dense)
    for qb in range(blocks["kv_num_blocks"].shape[0]):
        qs = slice(qb * b, (qb + 1) * b)
        for kb in blocks["full_kv_indices"][qb, : blocks["full_kv_num_blocks"][qb]]:
            out[qs, kb * b : (kb + 1) * b] = True
        for kb in blocks["kv_indices"][qb, : blocks["kv_num_blocks"][qb]]:
            ks = slice(kb * b, (kb + 1) * b)
            out[qs, ks] = dense[qs, ks]
    return out


def flex_block_mask(batch, block_size: int = 128, device=None):
    """A torch FlexAttention BlockMask over the whole batch (torch >= 2.5): the block form above with the mask_mod
    k <= q < subtree_ends[k]. Tries never attend to each other (a trie's subtrees end inside it)."""
    import torch
    from torch.nn.attention.flex_attention import BlockMask

    _need_tree(batch)
    blocks = block_mask(batch, block_size)
    ends = torch.as_tensor(np.asarray(batch.subtree_ends, dtype=np.int32), device=device)

    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) & (q_idx < ends[kv_idx])

    t = lambda name: torch.as_tensor(blocks[name], device=device)[None, None]  # noqa: E731
    return BlockMask.from_kv_blocks(
        t("kv_num_blocks"),
        t("kv_indices").clamp(min=0),
        t("full_kv_num_blocks"),
        t("full_kv_indices").clamp(min=0),
        BLOCK_SIZE=block_size,
        mask_mod=mask_mod,
    )


def to_rows(batch):
    """The rows layout of a tree batch (copies): each row's tokens gathered from the tree. A tree token's loss mask,
    loss weight and advantage go to the row it takes them from (token_rows), 0 at its other rows, as the rows layout
    trains a shared sampled token in one row; ids, logprobs and routed experts go to every row through it; call_index
    is translated into each row's own calls (by the call's seq; -1 where the row's calls lack it)."""
    from .trainer import Batch  # a cycle otherwise: trainer.py builds Batches that point here

    if getattr(batch, "layout", "rows") != "tree":
        return batch
    nodes = batch.row_nodes.astype(np.int64)
    lengths = np.diff(batch.offsets)
    row_of = np.repeat(np.arange(batch.rows), lengths)
    carried = batch.token_rows[nodes] == row_of
    call_index = np.full(nodes.shape[0], -1, dtype=np.int32)
    tree_ci = batch.call_index[nodes]
    src_rows = batch.token_rows[nodes]
    for r in range(batch.rows):
        s = slice(int(batch.offsets[r]), int(batch.offsets[r + 1]))
        own = {c.seq: i for i, c in enumerate(batch.row_info[r].calls)}
        for i in range(s.start, s.stop):
            ci = int(tree_ci[i])
            if ci < 0:
                continue
            seq = batch.row_info[int(src_rows[i])].calls[ci].seq
            call_index[i] = own.get(seq, -1)
    routed = None
    if batch.routed_experts is not None:
        routed = batch.routed_experts[nodes].copy()
        last = batch.offsets[1:][lengths > 0] - 1
        routed[last] = 0  # a row's last token was never a model input in that row
    return Batch(
        batch_id=batch.batch_id,
        rows=batch.rows,
        offsets=batch.offsets,
        token_ids=batch.token_ids[nodes],
        loss_mask=np.where(carried, batch.loss_mask[nodes], 0).astype(np.uint8),
        logprobs=batch.logprobs[nodes],
        advantages=np.where(carried, batch.advantages[nodes], 0).astype(np.float32),
        loss_weights=np.where(carried, batch.loss_weights[nodes], 0).astype(np.float32),
        row_info=batch.row_info,
        call_index=call_index,
        estimator=batch.estimator,
        normalize=batch.normalize,
        loss_agg=batch.loss_agg,
        trained_tokens=batch.trained_tokens,
        groups=batch.groups,
        rollouts=batch.rollouts,
        batch_unit=batch.batch_unit,
        loss_tokens=batch.loss_tokens,
        current_version=batch.current_version,
        max_staleness=batch.max_staleness,
        stale_tokens=batch.stale_tokens,
        routed_experts=routed,
    )
