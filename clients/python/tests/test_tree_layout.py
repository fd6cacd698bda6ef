"""The tree layout through the Python client, on real batches: test/tree-layout.test.ts drives sessions whose calls
share most of their tokens (moving context, compaction, continued, branching) through the gateway into cores, and
runs this with RLGATE_TREE_CORES (their addresses) and RLGATE_TREE_ROLLOUTS (rollouts to wait for).

Each batch is read twice from the same core, as rows and as a tree: the tree converts back to the rows exactly, its
ancestor mask is every row's causal mask, its block form equals the dense mask, and the PyTorch trainer's loss
(clipped surrogate with the entropy bonus, the core's loss weights) and its gradients are the same in both layouts,
in float64, within 1e-5.
"""
import dataclasses
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CORES = [a for a in os.environ.get("RLGATE_TREE_CORES", "").split(",") if a]
ROLLOUTS = int(os.environ.get("RLGATE_TREE_ROLLOUTS", "0"))


def read(address, layout):
    from rlgate_client import TrainerClient

    out, seen = [], set()
    with TrainerClient(address) as client:
        for batch in client.batches(max_in_flight=64, layout=layout):
            out.append(batch)
            seen.update(info.rollout_id for info in batch.row_info)
            if len(seen) >= ROLLOUTS:
                break
    return sorted(out, key=lambda b: b.batch_id)


@unittest.skipUnless(CORES, "run by test/tree-layout.test.ts, which starts the gateway and the cores")
class TreeLayoutTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pairs = []
        for address in CORES:
            rows, tree = read(address, "rows"), read(address, "tree")
            assert [b.batch_id for b in rows] == [b.batch_id for b in tree]
            cls.pairs.extend(zip(rows, tree))

    def test_views_without_copies(self):
        for _, t in self.pairs:
            self.assertEqual(t.layout, "tree")
            for name in ("token_ids", "parents", "positions", "subtree_ends", "token_rows", "row_nodes", "logprobs", "loss_weights"):
                a = getattr(t, name)
                self.assertFalse(a.flags.owndata, name)  # numpy.frombuffer over the message
            self.assertEqual(t.row_tokens, int(t.offsets[-1]))
            self.assertLess(t.tokens, t.row_tokens + 1)

    def test_to_rows_is_the_rows_batch(self):
        for r, t in self.pairs:
            back = t.to_rows()
            for name in ("token_ids", "loss_mask", "logprobs", "advantages", "loss_weights", "call_index"):
                np.testing.assert_array_equal(getattr(back, name), getattr(r, name), err_msg=name)
            for row in range(r.rows):
                self.assertEqual([c and c.seq for c in t.token_calls(row)], [c and c.seq for c in r.token_calls(row)])
            from rlgate_client.adapters import to_verl

            a, b = to_verl(t, as_numpy=True)["batch"], to_verl(r, as_numpy=True)["batch"]
            for k in a:
                np.testing.assert_array_equal(a[k], b[k], err_msg=k)

    def test_ancestor_mask_is_each_rows_causal_mask(self):
        from rlgate_client.tree import ancestor_mask

        for r, t in self.pairs:
            dense = ancestor_mask(t)
            for row in range(r.rows):
                nodes = t.row_nodes[r.row(row)]
                n = nodes.size
                np.testing.assert_array_equal(dense[np.ix_(nodes, nodes)], np.tril(np.ones((n, n), dtype=bool)))
                # and nothing outside the row's own path for its tokens
                self.assertEqual(int(dense[nodes].sum()), n * (n + 1) // 2)

    def test_block_form_equals_the_dense_mask(self):
        from rlgate_client.tree import ancestor_mask, block_mask, block_mask_dense

        for _, t in self.pairs:
            dense = ancestor_mask(t)
            for size in (16, 64, 128):
                blocks = block_mask(t, size)
                nb = blocks["kv_num_blocks"].shape[0]
                padded = np.zeros((nb * size, nb * size), dtype=bool)
                padded[: t.tokens, : t.tokens] = dense
                got = block_mask_dense(blocks, padded)[: t.tokens, : t.tokens]  # padding is the kernel's to drop
                np.testing.assert_array_equal(got, dense, err_msg="block %d" % size)
                skipped = nb * nb - int(blocks["kv_num_blocks"].sum()) - int(blocks["full_kv_num_blocks"].sum())
                self.assertGreater(skipped, 0)

    def test_loss_and_gradients_equal_in_float64(self):
        import torch

        from rlgate_client.torch_policy import TinyLM
        from rlgate_client.torch_trainer import forward, surrogate, token_temperatures

        torch.set_default_dtype(torch.float64)
        try:
            for r, t in self.pairs:
                vocab = np.unique(r.token_ids)
                ids = {int(v): i for i, v in enumerate(vocab)}
                longest = int(np.diff(r.offsets).max())
                torch.manual_seed(0)
                model = TinyLM(len(vocab), dim=16, layers=2, heads=2, max_len=longest)

                def loss_and_grads(batch):
                    batch = dataclasses.replace(batch, token_ids=np.array([ids[int(x)] for x in batch.token_ids], dtype=np.int32))
                    model.zero_grad()
                    new, entropy = forward(model, batch, token_temperatures(batch))
                    loss = surrogate(batch, new, 0.2, entropy, 0.05)
                    loss.backward()
                    return float(loss), {n: p.grad.clone() for n, p in model.named_parameters()}

                rows_loss, rows_grads = loss_and_grads(r)
                tree_loss, tree_grads = loss_and_grads(t)
                self.assertNotEqual(rows_loss, 0.0)
                self.assertLess(abs(rows_loss - tree_loss), 1e-5, (rows_loss, tree_loss))
                for n in rows_grads:
                    diff = float((rows_grads[n] - tree_grads[n]).abs().max())
                    self.assertLess(diff, 1e-5, n)
                self.assertGreater(max(float(g.abs().max()) for g in rows_grads.values()), 0.0)
                print("batch %d: %d rows, %d row tokens, %d tree tokens, loss rows %.12f tree %.12f"
                      % (r.batch_id, r.rows, r.tokens, t.tokens, rows_loss, tree_loss), file=sys.stderr)
        finally:
            torch.set_default_dtype(torch.float32)


if __name__ == "__main__":
    unittest.main()
