"""A served batch as the inputs of TRL's GRPOTrainer loss (TRL is never imported).

Definitions, read at TRL's source (huggingface/trl), trl/trainer/grpo_trainer.py:
- GRPOTrainer._generate_and_score_completions: `prompt_ids` / `prompt_mask` left-padded (pad_token_id / 0),
  `completion_ids` / `completion_mask` right-padded, `completion_mask` 1 on every completion token; `tool_mask`
  0 on tool-result tokens inside the completion (padded with 1), the loss mask being completion_mask * tool_mask;
  `sampling_per_token_logps` the inference server's logprobs (padded 0); `num_items_in_batch` the loss mask's sum;
  `advantages` one per completion.
- GRPOTrainer._compute_loss: advantages of dim 1 are unsqueezed to (B, 1); (B, C) per-token advantages are used as
  they are. `old_per_token_logps`, when absent, is per_token_logps.detach(); here it is the rollout's logprobs
  (the ratio is then against the sampling policy, verl's "bypass mode").
"""
from typing import Any

import numpy as np

from ._layout import Layout, check_rows, meta_info, row_meta, side_arrays, torch_module, PER_TOKEN_FIELDS, rows_of


def trl_arrays(batch, pad_token_id: int = 0, per_token_advantages: bool = True):
    batch = rows_of(batch)
    layout = Layout(batch)
    check_rows(batch, layout)
    meta = row_meta(batch)
    ids = np.asarray(batch.token_ids).astype(np.int64)
    completion_mask = layout.response_attention()
    tool_mask = layout.response(np.asarray(batch.loss_mask).astype(np.int64), 1)
    logps = layout.response(np.asarray(batch.logprobs, dtype=np.float32), 0.0)
    adv = layout.response(np.asarray(batch.advantages, dtype=np.float32), 0.0)
    loss_mask = completion_mask * tool_mask
    if not per_token_advantages:
        seq = np.zeros(layout.rows, dtype=np.float32)
        for r in range(layout.rows):
            values = adv[r][loss_mask[r] == 1]
            if not np.all(values == values[0]):
                raise ValueError(
                    "row %d's advantages differ across its trained tokens (estimator %r): use per_token_advantages=True"
                    % (r, batch.estimator)
                )
            seq[r] = values[0]
        adv = seq
    out = {
        "prompt_ids": layout.prompt(ids, pad_token_id),
        "prompt_mask": layout.prompt_mask(),
        "completion_ids": layout.response(ids, pad_token_id),
        "completion_mask": completion_mask,
        "tool_mask": tool_mask,
        "advantages": adv,
        "sampling_per_token_logps": logps,
        "old_per_token_logps": logps.copy(),
        "loss_weights": layout.response(np.asarray(batch.loss_weights, dtype=np.float32), 0.0),
        "num_items_in_batch": np.asarray(int(loss_mask.sum()), dtype=np.int64),
    }
    for name, values in side_arrays(batch).items():
        out[name] = layout.response(values, PER_TOKEN_FIELDS[name])
    return out, meta, meta_info(batch)


def to_trl(batch, pad_token_id: int = 0, per_token_advantages: bool = True, as_numpy: bool = False) -> Any:
    """A served batch as the dict GRPOTrainer._generate_and_score_completions returns (one completion per row),
    plus loss_weights (laid out like the completion), "uid" (group), "rollout_uid" and "meta_info".
    per_token_advantages=False gives (B,) advantages, and refuses a batch whose advantages vary within a row.
    """
    arrays, meta, batch_meta = trl_arrays(batch, pad_token_id, per_token_advantages)
    if not as_numpy:
        torch = torch_module()
        arrays = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}
    return {**arrays, "uid": meta["uid"], "rollout_uid": meta["rollout_uid"], "meta_info": batch_meta}
