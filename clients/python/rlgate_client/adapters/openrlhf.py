"""A served batch as OpenRLHF Experience tensors (OpenRLHF is imported only for as_experience=True).

Definitions, read at OpenRLHF's source (OpenRLHF/OpenRLHF):
- openrlhf/trainer/ppo_utils/samples_generator.py, _process_response_into_experience: a sample is its whole token
  sequence (`sequences` = prompt and response, `attention_mask` 1 on it); `action_mask` is the action (sampled)
  mask shifted by one, action_mask[1:], and `rollout_log_probs` likewise [1:], so column i of every (B, T - 1)
  tensor is about token i + 1, predicted at position i; `response_length` = last action position - first + 1,
  `total_length` = the sample's tokens; info["reward"].
- openrlhf/trainer/ppo_utils/experience.py, Experience._merge_item / concat_experiences: samples are right-padded
  (zero_pad_sequences side="right") into (B, T) and (B, T - 1).
- openrlhf/models/actor.py, Actor.forward: log_probs[:, :-1], action_log_probs = log_probs[:, -A:] * action_mask
  with A = action_mask.shape[1] (here T - 1: all of them).
- openrlhf/trainer/ppo_utils/experience_maker.py, compute_advantages_and_returns: for the outcome estimators
  (rloo, reinforce_baseline, group_norm, dr_grpo) `returns` are the cumulative returns of the reward placed at the
  last action token (openrlhf/models/utils.py compute_reward, eos_indices) and `advantages = returns.clone()`:
  here both are rlgate's advantages.
- packed samples (--ds.packing_samples): since OpenRLHF #923 the Experience stays padded and the actor packs it
  itself, openrlhf/models/ring_attn_utils.py unpad_and_slice_tensor: flash-attn's unpad_input over attention_mask
  (sequences (1, total), `indices` into the flattened (B * T)), position_ids clip(cumsum(mask) - 1, 0) restarting
  per sample; log probs are gathered back to (B, T) (gather_and_pad_tensor). packed=True adds exactly these.
"""
from typing import Any, Optional

import numpy as np

from ._layout import Layout, check_rows, meta_info, row_meta, side_arrays, torch_module, PER_TOKEN_FIELDS, rows_of


def openrlhf_arrays(batch, pad_token_id: int = 0, packed: bool = False):
    batch = rows_of(batch)
    layout = Layout(batch)
    check_rows(batch, layout)
    meta = row_meta(batch)
    ids = np.asarray(batch.token_ids).astype(np.int64)
    lens = layout.ends - layout.starts
    first = [r for r in range(layout.rows) if layout.prompt_lens[r] == 0]
    if first:
        # OpenRLHF's action arrays start at token 1 (nothing predicts token 0): a trained token 0 would be lost.
        raise ValueError("row %d trains its first token, which OpenRLHF's shifted action_mask cannot hold" % first[0])
    sequences = layout.padded(ids, pad_token_id)
    T = sequences.shape[1]
    attention_mask = (np.arange(T)[None, :] < lens[:, None]).astype(np.int64)
    action_mask = layout.padded(np.asarray(batch.loss_mask).astype(bool), False, shift=1)
    logprobs = layout.padded(np.asarray(batch.logprobs, dtype=np.float32), 0.0, shift=1) * action_mask
    advantages = layout.padded(np.asarray(batch.advantages, dtype=np.float32), 0.0, shift=1) * action_mask
    rewards = np.asarray(meta["reward"], dtype=np.float32)
    response_length = layout.last_trained + 1  # last action position - first + 1
    out = {
        "sequences": sequences,
        "attention_mask": attention_mask,
        "action_mask": action_mask,
        "action_log_probs": logprobs,
        "rollout_log_probs": logprobs.copy(),
        "advantages": advantages,
        "returns": advantages.copy(),
        "rewards": rewards,
        "response_length": response_length.astype(np.int64),
        "total_length": lens.astype(np.int64),
        "loss_weights": layout.padded(np.asarray(batch.loss_weights, dtype=np.float32), 0.0, shift=1),
    }
    for name, values in side_arrays(batch).items():
        out[name] = layout.padded(values, PER_TOKEN_FIELDS[name], shift=1)
    if packed:
        flat = attention_mask.reshape(-1)
        indices = np.flatnonzero(flat)
        position_ids = np.clip(np.cumsum(attention_mask, axis=-1) - 1, 0, None)
        out["packed_sequences"] = sequences.reshape(-1)[indices][None, :]
        out["packed_position_ids"] = position_ids.reshape(-1)[indices][None, :]
        out["packed_indices"] = indices.astype(np.int64)
        out["packed_seq_lens"] = lens.astype(np.int32)
        out["cu_seqlens"] = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    info = {
        "reward": rewards,
        "response_length": out["response_length"].astype(np.float32),
        "total_length": out["total_length"].astype(np.float32),
    }
    return out, info, meta, meta_info(batch)


def to_openrlhf(batch, pad_token_id: int = 0, packed: bool = False, as_experience: bool = False, as_numpy: bool = False) -> Any:
    """A served batch as one OpenRLHF Experience's fields (one sample per row; rows of a rollout share
    `rollout_uid` in "index"-like metadata). Returns a dict of tensors plus "info" (reward, response_length,
    total_length), "uid", "rollout_uid" and "meta_info". packed=True adds the actor's packed inputs
    (packed_sequences, packed_position_ids, packed_indices, packed_seq_lens, cu_seqlens).
    as_experience: an openrlhf Experience (needs openrlhf); as_numpy: NumPy arrays instead of torch tensors.
    """
    arrays, info, meta, batch_meta = openrlhf_arrays(batch, pad_token_id, packed)
    if not as_numpy:
        torch = torch_module()
        arrays = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}
        info = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in info.items()}
    if as_experience:
        try:
            from openrlhf.trainer.ppo_utils.experience import Experience
        except ImportError as e:
            raise ImportError("to_openrlhf(as_experience=True) needs openrlhf (pip install openrlhf)") from e
        fields = {k: v for k, v in arrays.items() if k in Experience.__dataclass_fields__}
        return Experience(**fields, info=info)
    return {**arrays, "info": info, "uid": meta["uid"], "rollout_uid": meta["rollout_uid"], "meta_info": batch_meta}
