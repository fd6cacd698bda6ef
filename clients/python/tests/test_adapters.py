"""rlgate_client.adapters against verl's, OpenRLHF's and TRL's own definitions (read at their source; none of the
three is installable here, so their tensors are checked with NumPy and torch, each check naming the file and
function it follows).

Random batches: groups of rollouts that left 1 to 3 rows (re-serialized histories, sub-agents), context (tool
outputs) inside the responses, rows ending in context, mixed lengths, the per-token side arrays call_index and a
MoE routed_experts [tokens, layers, top_k]. Run: python3 -m unittest discover -s clients/python/tests
"""
import os
import sys
import unittest
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rlgate_client.adapters import PER_TOKEN_FIELDS, agent_loop_output, group_uid, to_openrlhf, to_trl, to_verl  # noqa: E402

try:
    import torch
except ImportError:  # Debian: apt-get install python3-torch
    torch = None
NO_TORCH = "PyTorch is not installed for this Python (Debian: apt-get install python3-torch)"

LAYERS, TOP_K = 3, 2


def random_batch(seed, per_token=False, groups=4, single_row=False, trailing_context=True):
    """A batch as the core serves it: rows back to back, a rollout's rows contiguous, advantages per rollout
    (GRPO over rollouts: a rollout counts once however many rows it left) or per token."""
    rng = np.random.default_rng(seed)
    ids, mask, lps, advs, lws, calls, experts, offsets, infos = [], [], [], [], [], [], [], [0], []
    truth_group, truth_rollout = [], []
    for g in range(groups):
        name = "" if g == groups - 1 else "task-%d" % g  # the last: a rollout without a group (a group of one)
        generation = int(rng.integers(1, 4)) if name else 0
        late = False
        if g == 1:  # the late part of group 0's generation: same name and generation, statistics of its own
            name, generation, late = "task-0", first_generation, True
        if g == 0:
            first_generation = generation
        n_rollouts = 1 if not name else int(rng.integers(2, 5))
        rewards = rng.normal(size=n_rollouts).round(3)
        mean, std = rewards.mean(), (rewards.std(ddof=1) if n_rollouts > 1 else 1.0)
        for k in range(n_rollouts):
            rollout_id = "ro-%d-%d" % (g, k)
            adv = 0.0 if not name else float((rewards[k] - mean) / (std + 1e-6))
            n_rows = 1 if single_row else int(rng.integers(1, 4))
            for t in range(n_rows):
                row_ids, row_mask = [], []
                row_ids += list(rng.integers(5, 1000, size=int(rng.integers(1, 12))))  # the prompt
                row_mask += [0] * len(row_ids)
                turns = int(rng.integers(1, 4))
                row_calls = []
                for turn in range(turns):
                    n = int(rng.integers(1, 9))
                    row_ids += list(rng.integers(5, 1000, size=n))
                    row_mask += [1] * n
                    row_calls += [turn] * n
                    if turn < turns - 1 or (trailing_context and rng.random() < 0.3):
                        n = int(rng.integers(1, 6))  # a tool output inside the response
                        row_ids += list(rng.integers(5, 1000, size=n))
                        row_mask += [0] * n
                        row_calls += [-1] * n
                L = len(row_ids)
                m = np.array(row_mask, dtype=np.uint8)
                p = int(np.flatnonzero(m)[0])
                ids += row_ids
                mask += row_mask
                lps += list(np.where(m == 1, -rng.random(L), 0.0))
                advs += list(np.where(m == 1, rng.normal(size=L) if per_token else adv, 0.0))
                lws += list(np.where(m == 1, rng.random(L) / 100, 0.0))
                calls += [-1] * p + row_calls
                experts += list(rng.integers(0, 64, size=(L, LAYERS, TOP_K)))
                offsets.append(offsets[-1] + L)
                infos.append(
                    SimpleNamespace(
                        rollout_id=rollout_id,
                        trajectory_id="%s/t%d" % (rollout_id, t),
                        group=name,
                        generation=generation,
                        late=late,
                        reward=float(rewards[k]),
                        task="t",
                        harness="h",
                        segment="main",
                        policy_version="7",
                        finish_reason="stop",
                        no_signal=not name,
                    )
                )
                truth_group.append((g,))
                truth_rollout.append((g, k))
    batch = SimpleNamespace(
        batch_id=seed,
        rows=len(infos),
        offsets=np.array(offsets, dtype=np.int32),
        token_ids=np.array(ids, dtype=np.int32),
        loss_mask=np.array(mask, dtype=np.uint8),
        logprobs=np.array(lps, dtype=np.float32),
        advantages=np.array(advs, dtype=np.float32),
        loss_weights=np.array(lws, dtype=np.float32),
        row_info=infos,
        call_index=np.array(calls, dtype=np.int32),
        routed_experts=np.array(experts, dtype=np.int32).reshape(-1, LAYERS, TOP_K),
        estimator="reinforce++" if per_token else "grpo",
        normalize="none",
        loss_agg="seq-mean-token-mean",
        trained_tokens=int(np.sum(mask)),
        groups=groups,
        rollouts=len(set(truth_rollout)),
        batch_unit="rollout",
        loss_tokens=4096,
    )
    return batch, truth_group, truth_rollout


def rows_of(batch):
    for r in range(len(batch.offsets) - 1):
        yield r, slice(int(batch.offsets[r]), int(batch.offsets[r + 1]))


def partition(keys):
    """The set of index sets that share a key."""
    out = {}
    for i, k in enumerate(keys):
        out.setdefault(k, set()).add(i)
    return sorted(sorted(s) for s in out.values())


SEEDS = range(12)


class Verl(unittest.TestCase):
    """verl/experimental/agent_loop/agent_loop.py AgentLoopWorker._agent_loop_postprocess / _postprocess."""

    def test_padding_sides_and_the_whole_row_back(self):
        for seed in SEEDS:
            batch, _, _ = random_batch(seed)
            t = to_verl(batch, as_numpy=True)["batch"]
            P = t["prompts"].shape[1]
            for r, s in rows_of(batch):
                row, m = batch.token_ids[s], batch.loss_mask[s]
                p = int(np.flatnonzero(m)[0])  # the prompt ends at the first trained token
                # prompts left-padded with zeros ([0,0,0,0,1,2,3,4]), responses right-padded ([5,6,7,8,0,0,0,0])
                self.assertEqual(list(t["prompts"][r, P - p :]), list(row[:p]))
                self.assertTrue(np.all(t["prompts"][r, : P - p] == 0))
                self.assertEqual(list(t["responses"][r, : len(row) - p]), list(row[p:]))
                self.assertTrue(np.all(t["responses"][r, len(row) - p :] == 0))
                # input_ids = prompts ++ responses; attention_mask 1 exactly on the row's tokens
                self.assertEqual(list(t["input_ids"][r][t["attention_mask"][r] == 1]), list(row))
                # position_ids: compute_position_id_with_mask (verl/utils/model.py) = clip(cumsum(mask) - 1, 0)
                self.assertEqual(list(t["position_ids"][r][t["attention_mask"][r] == 1]), list(range(len(row))))
                self.assertTrue(np.all(t["position_ids"][r][: P - p] == 0))

    def test_response_mask_selects_exactly_the_trained_tokens(self):
        for seed in SEEDS:
            batch, _, _ = random_batch(seed)
            t = to_verl(batch, as_numpy=True)["batch"]
            sel = t["response_mask"] == 1
            self.assertEqual(int(sel.sum()), int(batch.loss_mask.sum()))
            trained = batch.loss_mask == 1
            # Row-major selection of the padded tensors = the batch's trained tokens in order.
            self.assertEqual(list(t["responses"][sel]), list(batch.token_ids[trained]))
            np.testing.assert_array_equal(t["old_log_probs"][sel], batch.logprobs[trained])
            np.testing.assert_array_equal(t["rollout_log_probs"][sel], batch.logprobs[trained])
            np.testing.assert_array_equal(t["advantages"][sel], batch.advantages[trained])
            np.testing.assert_array_equal(t["loss_weights"][sel], batch.loss_weights[trained])
            # Advantages equal the batch's everywhere in the response (0 on context), 0 on padding.
            resp_att = t["attention_mask"][:, -t["responses"].shape[1] :] == 1
            np.testing.assert_array_equal(t["advantages"][resp_att], np.concatenate([batch.advantages[s][np.flatnonzero(batch.loss_mask[s])[0] :] for _, s in rows_of(batch)]))
            self.assertTrue(np.all(t["advantages"][~resp_att] == 0))
            # verl/trainer/ppo/ray_trainer.py compute_response_mask: attention_mask[:, -response_length:]. The
            # agent loop's response_mask is within it (response_mask * attention_mask).
            self.assertTrue(np.all(t["response_mask"] <= resp_att))

    def test_multi_turn_response_holds_tool_outputs_with_mask_0(self):
        batch, _, _ = random_batch(3)
        t = to_verl(batch, as_numpy=True)["batch"]
        inner = 0
        for r, s in rows_of(batch):
            m = batch.loss_mask[s]
            p = int(np.flatnonzero(m)[0])
            n = len(m) - p
            np.testing.assert_array_equal(t["response_mask"][r, :n], m[p:])
            self.assertTrue(np.all(t["attention_mask"][r, -t["responses"].shape[1] :][:n] == 1))
            inner += int(np.sum(m[p:] == 0))
        self.assertGreater(inner, 0, "the random batch has context inside its responses")

    def test_scores_at_the_last_trained_token(self):
        """verl/workers/reward_manager/naive.py NaiveRewardManager.__call__: reward_tensor[i, valid_response_length
        - 1] = score; here the last trained token (the same when the row ends sampled)."""
        for seed in SEEDS:
            batch, _, _ = random_batch(seed)
            t = to_verl(batch, as_numpy=True)["batch"]
            for r, s in rows_of(batch):
                m = batch.loss_mask[s]
                trained = np.flatnonzero(m)
                last = int(trained[-1] - trained[0])
                row_scores = t["token_level_scores"][r]
                self.assertAlmostEqual(float(row_scores[last]), batch.row_info[r].reward, places=6)
                self.assertEqual(int(np.count_nonzero(np.delete(row_scores, last))), 0)
                self.assertEqual(int(t["response_mask"][r, last]), 1)
                self.assertTrue(np.all(t["response_mask"][r, last + 1 :] == 0))
                if m[-1] == 1:  # the row ends in a sampled token: verl's valid_response_length - 1
                    valid = int(t["attention_mask"][r, -t["responses"].shape[1] :].sum())
                    self.assertEqual(last, valid - 1)
            np.testing.assert_array_equal(t["token_level_rewards"], t["token_level_scores"])

    def test_uid_groups_exactly_the_rollouts_of_a_group(self):
        for seed in SEEDS:
            batch, truth_group, truth_rollout = random_batch(seed)
            nt = to_verl(batch, as_numpy=True)["non_tensor_batch"]
            self.assertEqual(partition(list(nt["uid"])), partition(truth_group))
            self.assertEqual(partition(list(nt["rollout_uid"])), partition(truth_rollout))
            self.assertEqual(nt["uid"].dtype, object)  # as ray_trainer.py gives uid: np.array(..., dtype=object)
            # Rows of one rollout share its group's uid.
            for i, j in zip(range(batch.rows), range(1, batch.rows)):
                if nt["rollout_uid"][i] == nt["rollout_uid"][j]:
                    self.assertEqual(nt["uid"][i], nt["uid"][j])

    def test_verl_grpo_over_uid_gives_the_batch_advantages_when_each_rollout_is_one_row(self):
        """verl/trainer/ppo/core_algos.py compute_grpo_outcome_advantage: scores = token_level_rewards.sum(-1),
        grouped by index (= uid), (score - mean) / (std + 1e-6), torch.std unbiased, a group of one mean 0 std 1.
        Re-derived here in NumPy: with one row per rollout it equals the batch's GRPO advantages; with several
        rows per rollout it does not (verl would count a rollout once per row), which is why the docs say to train
        on the served advantages."""

        def verl_grpo(scores, index):
            out = np.zeros_like(scores)
            for key in set(index):
                sel = np.array([i == key for i in index])
                if sel.sum() == 1:
                    mean, std = 0.0, 1.0
                else:
                    mean, std = scores[sel].mean(), scores[sel].std(ddof=1)
                out[sel] = (scores[sel] - mean) / (std + 1e-6)
            return out

        batch, _, _ = random_batch(5, single_row=True)
        out = to_verl(batch, as_numpy=True)
        t, nt = out["batch"], out["non_tensor_batch"]
        got = verl_grpo(t["token_level_rewards"].sum(-1).astype(np.float64), list(nt["uid"]))
        served = np.array([t["advantages"][r][t["response_mask"][r] == 1][0] for r in range(batch.rows)])
        grouped = np.array([bool(i.group) for i in batch.row_info])  # verl gives a group of one r / (1 + 1e-6)
        np.testing.assert_allclose(got[grouped], served[grouped], rtol=1e-5, atol=1e-5)

        multi, _, truth = random_batch(6)
        self.assertGreater(len(truth), len(set(truth)), "some rollout left several rows")
        m = to_verl(multi, as_numpy=True)
        got = verl_grpo(m["batch"]["token_level_rewards"].sum(-1).astype(np.float64), list(m["non_tensor_batch"]["uid"]))
        served = np.array([m["batch"]["advantages"][r][m["batch"]["response_mask"][r] == 1][0] for r in range(multi.rows)])
        self.assertFalse(np.allclose(got, served, atol=1e-4))

    def test_side_arrays_are_laid_out_by_the_same_helper(self):
        """call_index follows the response like rollout_log_probs; routed_experts [bsz, prompt + response, layers,
        top_k] the whole input_ids (agent_loop.py _agent_loop_postprocess: start_pos = padded prompt length minus
        the prompt's)."""
        self.assertEqual(set(PER_TOKEN_FIELDS), {"call_index", "routed_experts"})
        for seed in SEEDS:
            batch, _, _ = random_batch(seed)
            t = to_verl(batch, as_numpy=True)["batch"]
            self.assertEqual(t["routed_experts"].shape, t["input_ids"].shape + (LAYERS, TOP_K))
            np.testing.assert_array_equal(t["call_index"][t["response_mask"] == 1], batch.call_index[batch.loss_mask == 1])
            att = t["attention_mask"] == 1
            np.testing.assert_array_equal(t["routed_experts"][att], batch.routed_experts)
            self.assertTrue(np.all(t["routed_experts"][~att] == 0))
            resp_pad = t["attention_mask"][:, -t["responses"].shape[1] :] == 0
            self.assertTrue(np.all(t["call_index"][resp_pad] == -1))
        # A batch without the field (today's served batches have no routed_experts) has no such tensor.
        batch, _, _ = random_batch(0)
        batch.routed_experts = None
        self.assertNotIn("routed_experts", to_verl(batch, as_numpy=True)["batch"])

    def test_loss_weights_aggregate_as_the_core(self):
        """rlgate's loss = sum(loss_weights * per_token_loss) over the batch; with verl's pg_losses laid out like
        the response, (pg_losses * loss_weights).sum() is the same number (core_algos.py agg_loss replaced)."""
        batch, _, _ = random_batch(9)
        t = to_verl(batch, as_numpy=True)["batch"]
        per_token = np.sin(batch.token_ids.astype(np.float64)) * batch.advantages  # any per-token loss
        expected = float(np.sum(batch.loss_weights * per_token))
        pg_losses = np.sin(t["responses"].astype(np.float64)) * t["advantages"]
        self.assertAlmostEqual(float((pg_losses * t["loss_weights"]).sum()), expected, places=5)

    def test_fixed_lengths_and_errors(self):
        batch, _, _ = random_batch(1)
        t = to_verl(batch, prompt_length=64, response_length=96, as_numpy=True)["batch"]
        self.assertEqual(t["prompts"].shape, (batch.rows, 64))
        self.assertEqual(t["responses"].shape, (batch.rows, 96))
        self.assertEqual(int(t["response_mask"].sum()), int(batch.loss_mask.sum()))
        with self.assertRaisesRegex(ValueError, "response_length 2 is shorter than the batch's longest response"):
            to_verl(batch, response_length=2, as_numpy=True)
        with self.assertRaisesRegex(ValueError, "prompt_length 0 is shorter"):
            to_verl(batch, prompt_length=0, as_numpy=True)
        bad = SimpleNamespace(**vars(batch))
        bad.loss_mask = batch.loss_mask.copy()
        bad.loss_mask[batch.offsets[1] : batch.offsets[2]] = 0
        with self.assertRaisesRegex(ValueError, "row 1 has no trained token"):
            to_verl(bad, as_numpy=True)
        short = SimpleNamespace(**vars(batch))
        short.logprobs = batch.logprobs[:-1]
        with self.assertRaisesRegex(ValueError, "batch.logprobs has"):
            to_verl(short, as_numpy=True)
        try:
            import verl  # noqa: F401
        except ImportError:
            # No verl (none installable here): the DataProto is refused with what to install, never faked.
            with self.assertRaisesRegex(ImportError, "needs verl" if torch is not None else "needs PyTorch"):
                to_verl(batch, as_dataproto=True)

    def test_agent_loop_output(self):
        ids, mask, lps = [1, 2, 3, 4, 5, 6, 7, 8], [0, 0, 0, 1, 1, 0, 1, 1], [0, 0, 0, -0.1, -0.2, 0, -0.3, -0.4]
        out = agent_loop_output(ids, mask, lps, reward=1.0, num_turns=3)
        self.assertEqual(out["prompt_ids"], [1, 2, 3])
        self.assertEqual(out["response_ids"], [4, 5, 6, 7, 8])
        self.assertEqual(out["response_mask"], [1, 1, 0, 1, 1])
        self.assertEqual(out["response_logprobs"], [-0.1, -0.2, 0, -0.3, -0.4])
        self.assertEqual((out["reward_score"], out["num_turns"]), (1.0, 3))
        with self.assertRaisesRegex(ValueError, "no trained token"):
            agent_loop_output(ids, [0] * len(ids))

    @unittest.skipIf(torch is None, NO_TORCH)
    def test_torch_tensors(self):
        batch, _, _ = random_batch(2)
        out = to_verl(batch)
        ref = to_verl(batch, as_numpy=True)["batch"]
        for k, v in out["batch"].items():
            self.assertIsInstance(v, torch.Tensor, k)
            np.testing.assert_array_equal(v.numpy(), ref[k])
        self.assertEqual(out["batch"]["input_ids"].dtype, torch.int64)
        self.assertEqual(out["batch"]["attention_mask"].dtype, torch.int64)
        self.assertEqual(out["batch"]["response_mask"].dtype, torch.int64)
        self.assertEqual(out["batch"]["old_log_probs"].dtype, torch.float32)
        self.assertEqual(out["meta_info"]["loss_agg"], "seq-mean-token-mean")


class OpenRLHF(unittest.TestCase):
    """openrlhf/trainer/ppo_utils/samples_generator.py _process_response_into_experience, experience.py
    Experience.concat_experiences, models/actor.py Actor.forward."""

    def test_shifted_action_tensors_right_padded(self):
        for seed in SEEDS:
            batch, _, _ = random_batch(seed)
            e = to_openrlhf(batch, as_numpy=True)
            T = e["sequences"].shape[1]
            self.assertEqual(e["action_mask"].shape, (batch.rows, T - 1))
            for r, s in rows_of(batch):
                row, m = batch.token_ids[s], batch.loss_mask[s]
                self.assertEqual(list(e["sequences"][r, : len(row)]), list(row))
                self.assertTrue(np.all(e["sequences"][r, len(row) :] == 0))
                self.assertEqual(list(e["attention_mask"][r]), [1] * len(row) + [0] * (T - len(row)))
                # action_mask = mask[1:]: column i is about token i + 1
                self.assertEqual(list(e["action_mask"][r, : len(row) - 1]), [bool(x) for x in m[1:]])
                tr = np.flatnonzero(m)
                self.assertEqual(int(e["response_length"][r]), int(tr[-1] - tr[0] + 1))
                self.assertEqual(int(e["total_length"][r]), len(row))
            am = e["action_mask"]
            self.assertEqual(int(am.sum()), int(batch.loss_mask.sum()))
            trained = batch.loss_mask == 1
            # Actor.forward: log_probs_from_logits(logits, rolled sequences)[:, :-1]: position i scores token i + 1
            self.assertEqual(list(e["sequences"][:, 1:][am]), list(batch.token_ids[trained]))
            np.testing.assert_array_equal(e["action_log_probs"][am], batch.logprobs[trained])
            np.testing.assert_array_equal(e["advantages"][am], batch.advantages[trained])
            np.testing.assert_array_equal(e["returns"], e["advantages"])  # experience_maker: advantages = returns.clone()
            np.testing.assert_array_equal(e["loss_weights"][am], batch.loss_weights[trained])
            np.testing.assert_array_equal(e["call_index"][am], batch.call_index[trained])
            self.assertEqual(e["routed_experts"].shape, (batch.rows, T - 1, LAYERS, TOP_K))
            self.assertTrue(np.all(e["action_log_probs"][~am] == 0))
            np.testing.assert_array_equal(e["rewards"], np.array([i.reward for i in batch.row_info], dtype=np.float32))
            np.testing.assert_array_equal(e["info"]["reward"], e["rewards"])

    def test_reward_position_is_openrlhf_eos_index(self):
        """openrlhf/models/utils.py compute_reward: eos_indices = A - 1 - action_mask.fliplr().argmax(1), the last
        action position: the token the batch's last trained token is, one column to the left."""
        batch, _, _ = random_batch(4)
        e = to_openrlhf(batch, as_numpy=True)
        am = e["action_mask"].astype(np.int64)
        eos = am.shape[1] - 1 - np.argmax(am[:, ::-1], axis=1)
        for r, s in rows_of(batch):
            self.assertEqual(int(eos[r]), int(np.flatnonzero(batch.loss_mask[s])[-1]) - 1)

    def test_packed_samples(self):
        """openrlhf/models/ring_attn_utils.py unpad_and_slice_tensor (no ring group): unpad_input over
        attention_mask, position_ids clip(cumsum(mask) - 1, 0) per sample."""
        for seed in SEEDS:
            batch, _, _ = random_batch(seed)
            e = to_openrlhf(batch, packed=True, as_numpy=True)
            # Unpadding the padded rows gives the served batch back: it is already packed.
            self.assertEqual(list(e["packed_sequences"][0]), list(batch.token_ids))
            np.testing.assert_array_equal(e["cu_seqlens"], batch.offsets)
            np.testing.assert_array_equal(e["packed_seq_lens"], np.diff(batch.offsets))
            self.assertEqual(list(e["packed_sequences"][0]), list(e["sequences"].reshape(-1)[e["packed_indices"]]))
            expected = np.concatenate([np.arange(n) for n in np.diff(batch.offsets)])
            np.testing.assert_array_equal(e["packed_position_ids"][0], expected)

    def test_a_trained_first_token_is_refused(self):
        batch, _, _ = random_batch(0)
        batch.loss_mask = batch.loss_mask.copy()
        batch.loss_mask[batch.offsets[2]] = 1
        with self.assertRaisesRegex(ValueError, "row 2 trains its first token"):
            to_openrlhf(batch, as_numpy=True)
        to_verl(batch, as_numpy=True)  # verl and TRL hold it: an empty prompt

    @unittest.skipIf(torch is None, NO_TORCH)
    def test_torch_tensors(self):
        batch, _, _ = random_batch(2)
        e = to_openrlhf(batch, packed=True)
        self.assertEqual(e["action_mask"].dtype, torch.bool)
        self.assertEqual(e["sequences"].dtype, torch.int64)
        self.assertEqual(e["action_log_probs"].dtype, torch.float32)
        self.assertIsInstance(e["info"]["reward"], torch.Tensor)
        # Actor.forward: action_log_probs = log_probs[:, -A:] * action_mask with A = action_mask.shape[1] = T - 1
        log_probs = torch.randn(e["sequences"].shape, dtype=torch.float32)[:, :-1]
        A = e["action_mask"].shape[1]
        self.assertEqual(A, log_probs.shape[1])


class ServedBatch(unittest.TestCase):
    """The client's own Batch with RowInfo messages generated from proto/rlgate/v1/trainer.proto: the field names
    the adapters read are the protocol's."""

    def test_a_client_batch_with_protobuf_row_info(self):
        from rlgate_client import Batch, load_protos

        pb = load_protos()[0]
        fake, truth_group, truth_rollout = random_batch(7)
        infos = [
            pb.RowInfo(
                rollout_id=i.rollout_id,
                trajectory_id=i.trajectory_id,
                group=i.group,
                generation=i.generation,
                late=i.late,
                reward=i.reward,
                no_signal=i.no_signal,
            )
            for i in fake.row_info
        ]
        batch = Batch(
            batch_id=1,
            rows=len(infos),
            offsets=fake.offsets,
            token_ids=fake.token_ids,
            loss_mask=fake.loss_mask,
            logprobs=fake.logprobs,
            advantages=fake.advantages,
            loss_weights=fake.loss_weights,
            row_info=infos,
            call_index=fake.call_index,
            estimator="grpo",
            loss_agg="token-mean",
            trained_tokens=int(fake.loss_mask.sum()),
        )
        for out in (to_verl(batch, as_numpy=True)["non_tensor_batch"], to_trl(batch, as_numpy=True), to_openrlhf(batch, as_numpy=True)):
            self.assertEqual(partition(list(out["uid"])), partition(truth_group))
            self.assertEqual(partition(list(out["rollout_uid"])), partition(truth_rollout))
        t = to_verl(batch, as_numpy=True)["batch"]
        self.assertNotIn("routed_experts", t)
        np.testing.assert_array_equal(t["call_index"][t["response_mask"] == 1], fake.call_index[fake.loss_mask == 1])


class TRL(unittest.TestCase):
    """trl/trainer/grpo_trainer.py GRPOTrainer._generate_and_score_completions and _compute_loss."""

    def test_prompt_left_completion_right_and_tool_mask(self):
        for seed in SEEDS:
            batch, _, _ = random_batch(seed)
            o = to_trl(batch, pad_token_id=7, as_numpy=True)
            P, C = o["prompt_ids"].shape[1], o["completion_ids"].shape[1]
            for r, s in rows_of(batch):
                row, m = batch.token_ids[s], batch.loss_mask[s]
                p = int(np.flatnonzero(m)[0])
                self.assertEqual(list(o["prompt_ids"][r]), [7] * (P - p) + list(row[:p]))
                self.assertEqual(list(o["prompt_mask"][r]), [0] * (P - p) + [1] * p)
                n = len(row) - p
                self.assertEqual(list(o["completion_ids"][r]), list(row[p:]) + [7] * (C - n))
                self.assertEqual(list(o["completion_mask"][r]), [1] * n + [0] * (C - n))
                # tool_mask: 0 on tool results, padded with 1
                self.assertEqual(list(o["tool_mask"][r]), list(m[p:]) + [1] * (C - n))
            loss_mask = (o["completion_mask"] * o["tool_mask"]) == 1  # _compute_loss: completion_mask * tool_mask
            trained = batch.loss_mask == 1
            self.assertEqual(int(o["num_items_in_batch"]), int(trained.sum()))
            self.assertEqual(list(o["completion_ids"][loss_mask]), list(batch.token_ids[trained]))
            np.testing.assert_array_equal(o["advantages"][loss_mask], batch.advantages[trained])
            np.testing.assert_array_equal(o["sampling_per_token_logps"][loss_mask], batch.logprobs[trained])
            np.testing.assert_array_equal(o["old_per_token_logps"], o["sampling_per_token_logps"])
            np.testing.assert_array_equal(o["loss_weights"][loss_mask], batch.loss_weights[trained])

    def test_sequence_advantages(self):
        batch, _, _ = random_batch(8)
        o = to_trl(batch, per_token_advantages=False, as_numpy=True)
        self.assertEqual(o["advantages"].shape, (batch.rows,))
        for r, s in rows_of(batch):
            self.assertAlmostEqual(float(o["advantages"][r]), float(batch.advantages[s][batch.loss_mask[s] == 1][0]), places=6)
        per_token, _, _ = random_batch(8, per_token=True)
        with self.assertRaisesRegex(ValueError, "advantages differ across its trained tokens .*reinforce"):
            to_trl(per_token, per_token_advantages=False, as_numpy=True)

    def test_uids(self):
        batch, truth_group, truth_rollout = random_batch(11)
        o = to_trl(batch, as_numpy=True)
        self.assertEqual(partition(o["uid"]), partition(truth_group))
        self.assertEqual(partition(o["rollout_uid"]), partition(truth_rollout))
        self.assertEqual(group_uid(batch.row_info[-1]), "rollout:" + batch.row_info[-1].rollout_id)
        # The core's own group keys (rl-core/core/groups.ts): fill order, explicit round, late part.
        info = SimpleNamespace(rollout_id="r", group="task-1", generation=3, late=False, round=0)
        self.assertEqual(group_uid(info), "group:task-1#3")
        info.round, info.generation = 42, 42
        self.assertEqual(group_uid(info), "group:task-1@42")
        info.late = True
        self.assertEqual(group_uid(info), "group:task-1@42+late")

    @unittest.skipIf(torch is None, NO_TORCH)
    def test_torch_loss_like_grpo_trainer(self):
        """_compute_loss with loss_type "grpo"-style clipping at ratio 1: per_token_loss = -advantages (B, C), the
        batch's weights aggregate it; equal to the core's sum(loss_weights * -advantages)."""
        batch, _, _ = random_batch(10, per_token=True)
        o = to_trl(batch)
        per_token_logps = o["old_per_token_logps"].clone().requires_grad_(True)
        ratio = torch.exp(per_token_logps - o["old_per_token_logps"])
        per_token_loss = -torch.min(ratio * o["advantages"], torch.clamp(ratio, 0.8, 1.2) * o["advantages"])
        loss = (per_token_loss * o["loss_weights"]).sum()
        expected = float(np.sum(batch.loss_weights.astype(np.float64) * -batch.advantages))
        self.assertAlmostEqual(float(loss), expected, places=5)
        loss.backward()
        mask = (o["completion_mask"] * o["tool_mask"]) == 1
        self.assertTrue(torch.all(per_token_logps.grad[~mask] == 0))


if __name__ == "__main__":
    unittest.main()
