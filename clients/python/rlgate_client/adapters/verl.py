"""A served batch as the tensors of a verl DataProto (verl is imported only for as_dataproto=True).

Definitions, read at verl's source (volcengine/verl):
- verl/experimental/agent_loop/agent_loop.py, AgentLoopWorker._agent_loop_postprocess and _postprocess: `prompts`
  left-padded, `responses` right-padded, `input_ids` their concatenation, `attention_mask` 0 on padding,
  `response_mask` 1 on LLM-generated tokens and 0 on tool outputs and padding, `position_ids`
  compute_position_id_with_mask(attention_mask) = clip(cumsum(mask) - 1, 0) (verl/utils/model.py),
  `rollout_log_probs` the response's logprobs padded with 0, `routed_experts` over the whole input_ids
  [bsz, prompt + response, layers, top_k] (AgentLoopOutput: "routed experts for the total tokens").
- verl/trainer/ppo/ray_trainer.py, RayPPOTrainer.fit: `uid` is one uuid per *prompt*, given before the batch is
  repeated rollout.n times, so the n responses of a prompt share it; compute_advantage passes it as `index`, by
  which core_algos.compute_grpo_outcome_advantage (and rloo, opo, ...) group. Here `uid` is therefore the group
  (name, generation, late part), and `rollout_uid` the rollout.
- verl/workers/reward_manager/naive.py, NaiveRewardManager.__call__: the score at valid_response_length - 1;
  here the row's last trained token (the same position when a row ends in a sampled token, as rows do).
- verl/trainer/ppo/core_algos.py, compute_policy_loss_vanilla: pg_losses over (bs, response_length) with
  `old_log_prob`, `advantages`, `response_mask`, then agg_loss(loss_mat, loss_mask, loss_agg_mode). rlgate's
  `loss_weights` (laid out like the response) replace agg_loss: loss = (pg_losses * loss_weights).sum(), which
  counts a rollout once however many rows it left (verl's seq-mean modes would count each row).
"""
from typing import Any, Dict, Optional

import numpy as np

from ._layout import Layout, check_rows, meta_info, row_meta, side_arrays, torch_module, PER_TOKEN_FIELDS, rows_of

# Side arrays verl lays out over the whole sequence (input_ids); the others follow the response.
_FULL_SEQUENCE = {"routed_experts"}


def verl_arrays(batch, prompt_length: Optional[int] = None, response_length: Optional[int] = None, pad_token_id: int = 0):
    """(tensors, non_tensors, meta_info) as NumPy arrays; to_verl converts them."""
    batch = rows_of(batch)
    layout = Layout(batch, prompt_length, response_length)
    check_rows(batch, layout)
    ids = np.asarray(batch.token_ids).astype(np.int64)
    prompts = layout.prompt(ids, pad_token_id)
    responses = layout.response(ids, pad_token_id)
    response_attention = layout.response_attention()
    attention_mask = np.concatenate([layout.prompt_mask(), response_attention], axis=1)
    response_mask = layout.response(np.asarray(batch.loss_mask).astype(np.int64), 0) * response_attention
    logprobs = layout.response(np.asarray(batch.logprobs, dtype=np.float32), 0.0)
    advantages = layout.response(np.asarray(batch.advantages, dtype=np.float32), 0.0)
    meta = row_meta(batch)
    scores = layout.at_last_trained(np.asarray(meta["reward"], dtype=np.float32))
    tensors = {
        "prompts": prompts,
        "responses": responses,
        "input_ids": np.concatenate([prompts, responses], axis=1),
        "attention_mask": attention_mask,
        "position_ids": np.clip(np.cumsum(attention_mask, axis=-1) - 1, 0, None),
        "response_mask": response_mask,
        "old_log_probs": logprobs,
        "rollout_log_probs": logprobs.copy(),
        "advantages": advantages,
        # verl's outcome estimators return (scores, scores): returns equal the advantages.
        "returns": advantages.copy(),
        "token_level_scores": scores,
        "token_level_rewards": scores.copy(),
        "loss_weights": layout.response(np.asarray(batch.loss_weights, dtype=np.float32), 0.0),
    }
    for name, values in side_arrays(batch).items():
        place = layout.full if name in _FULL_SEQUENCE else layout.response
        tensors[name] = place(values, PER_TOKEN_FIELDS[name])
    non_tensors = {k: np.array(v, dtype=object) for k, v in meta.items()}
    return tensors, non_tensors, meta_info(batch)


def to_verl(
    batch,
    prompt_length: Optional[int] = None,
    response_length: Optional[int] = None,
    pad_token_id: int = 0,
    as_dataproto: bool = False,
    as_numpy: bool = False,
) -> Any:
    """A served batch as verl's batch: {"batch": tensors, "non_tensor_batch": ..., "meta_info": ...}.

    One verl sample per row (a multi-row rollout is several samples sharing `rollout_uid`). prompt_length /
    response_length pad to fixed sizes (verl's rollout.prompt_length / response_length; a longer row is an error).
    as_dataproto: a verl.DataProto (needs verl); as_numpy: NumPy arrays instead of torch tensors.
    """
    tensors, non_tensors, meta = verl_arrays(batch, prompt_length, response_length, pad_token_id)
    if as_numpy:
        return {"batch": tensors, "non_tensor_batch": non_tensors, "meta_info": meta}
    torch = torch_module()
    tensors = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in tensors.items()}
    if as_dataproto:
        try:
            from verl import DataProto
        except ImportError as e:
            raise ImportError("to_verl(as_dataproto=True) needs verl (pip install verl); without it, use the dict") from e
        return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors, meta_info=meta)
    return {"batch": tensors, "non_tensor_batch": non_tensors, "meta_info": meta}


def policy_loss(pg_losses, loss_weights):
    """rlgate's aggregation of verl's per-token pg_losses (bs, response_length): sum(pg_losses * loss_weights)."""
    return (pg_losses * loss_weights).sum()


def agent_loop_output(
    token_ids, loss_mask, logprobs=None, reward: Optional[float] = None, num_turns: int = 0, routed_experts=None, as_model: bool = False
) -> Dict[str, Any]:
    """One trajectory (a row, or a trajectory from the gateway's /api/rollouts/{id}/trajectories) as the fields of
    verl's AgentLoopOutput (agent_loop.py): prompt_ids, response_ids, response_mask, response_logprobs,
    routed_experts (all tokens), reward_score, num_turns. An AgentLoop that drives a harness through rlgate returns
    this from its run(); as_model builds verl's AgentLoopOutput itself (needs verl; metrics left at their defaults).
    """
    ids = [int(t) for t in token_ids]
    mask = [int(m) for m in loss_mask]
    if len(mask) != len(ids):
        raise ValueError("loss_mask has %d entries for %d tokens" % (len(mask), len(ids)))
    trained = [i for i, m in enumerate(mask) if m]
    if not trained:
        raise ValueError("the trajectory has no trained token: nothing for verl to train")
    p = trained[0]
    out = {
        "prompt_ids": ids[:p],
        "response_ids": ids[p:],
        "response_mask": mask[p:],
        "response_logprobs": None if logprobs is None else [float(x) for x in list(logprobs)[p:]],
        "routed_experts": routed_experts,
        "reward_score": reward,
        "num_turns": num_turns,
    }
    if as_model:
        try:
            from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput
        except ImportError as e:
            raise ImportError("agent_loop_output(as_model=True) needs verl (pip install verl)") from e
        return AgentLoopOutput(metrics=AgentLoopMetrics(), **out)
    return out
