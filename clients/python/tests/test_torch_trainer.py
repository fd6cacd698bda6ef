"""The closed loop's pieces, one by one (rlgate_client.torch_policy, torch_server, torch_trainer).

- the padded batch forward gives every row the logprobs of its own forward (padding never leaks in);
- the logprobs the server reports for sampled tokens are what the trainer recomputes, at the call's temperature;
- the surrogate's gradient at ratio 1 is -loss_weight * advantage on trained tokens and 0 elsewhere, and a ratio
  past the clip on the advantage's side gives no gradient;
- the server answers /v1/completions in vLLM's layout (choice-level prompt_token_ids / token_ids, completions
  logprobs), text re-encodes to the sampled ids, a seed gives the same sample, and what it does not serve is a 4xx.

Run: python3 -m unittest discover -s clients/python/tests -p test_torch_trainer.py (needs python3-torch).
"""
import json
import os
import sys
import unittest
import urllib.error
import urllib.request

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

try:
    import torch
except ImportError:  # Debian: apt-get install python3-torch
    torch = None
NO_TORCH = "PyTorch is not installed for this Python (Debian: apt-get install python3-torch)"

if torch is not None:
    from rlgate_client import load_protos
    from rlgate_client.torch_policy import CharTokenizer, Policy, build_model
    from rlgate_client.torch_server import PolicyServer
    from rlgate_client.torch_trainer import Step, batch_forward, batch_logprobs, merged, surrogate, token_temperatures
    from rlgate_client.trainer import Batch


def make_batch(rows, temperatures=None, seed=0, names=None):
    """A Batch as the core serves it: rows of (ids, mask) back to back, one call per row (its temperature when given)."""
    pb = load_protos()[0]
    rng = np.random.default_rng(seed)
    ids = np.concatenate([np.asarray(r[0], dtype=np.int32) for r in rows])
    mask = np.concatenate([np.asarray(r[1], dtype=np.uint8) for r in rows])
    offsets = np.cumsum([0] + [len(r[0]) for r in rows]).astype(np.int32)
    infos = []
    for i, _ in enumerate(rows):
        info = pb.RowInfo(rollout_id=names[i] if names else "r%d" % i)
        call = info.calls.add(policy_version="0")
        if temperatures is not None:
            call.temperature = temperatures[i]
        infos.append(info)
    call_index = np.where(mask == 1, 0, -1).astype(np.int32)
    return Batch(
        batch_id=1,
        rows=len(rows),
        offsets=offsets,
        token_ids=ids,
        loss_mask=mask,
        logprobs=rng.normal(-1.0, 0.3, size=len(ids)).astype(np.float32),
        advantages=np.repeat(rng.normal(size=len(rows)), np.diff(offsets)).astype(np.float32),
        loss_weights=(mask / max(int(mask.sum()), 1)).astype(np.float32),
        row_info=infos,
        call_index=call_index,
    )


@unittest.skipIf(torch is None, NO_TORCH)
class TorchTrainerTest(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(1)
        self.tok = CharTokenizer()
        self.model = build_model(self.tok.vocab_size, seed=3, max_len=64).eval()

    def test_padded_forward_equals_each_rows_own_forward(self):
        rng = np.random.default_rng(1)
        rows = []
        for n in (3, 17, 9, 30):
            ids = rng.integers(0, self.tok.vocab_size, size=n)
            mask = np.r_[0, rng.integers(0, 2, size=n - 1)]
            rows.append((ids, mask))
        batch = make_batch(rows, temperatures=[1.0, 0.5, 1.3, 0.9])
        temps = token_temperatures(batch)
        with torch.no_grad():
            got, entropy = batch_forward(self.model, batch, temps)
            for r, (ids, mask) in enumerate(rows):
                s = batch.row(r)
                t = temps[s]
                logits = self.model(torch.from_numpy(np.asarray(ids, dtype=np.int64)[None]))[0, :-1].float()
                logp = torch.log_softmax(logits / torch.tensor(t[1:]).unsqueeze(-1), dim=-1)
                want = logp.gather(-1, torch.tensor(ids[1:]).unsqueeze(-1)).squeeze(-1).numpy()
                np.testing.assert_allclose(got[s][1:].numpy(), want, atol=2e-6)
                self.assertEqual(float(got[s][0]), 0.0)  # a row's first token has no context
                want_h = -(logp.exp() * logp).sum(-1).numpy()
                np.testing.assert_allclose(entropy[s][1:].numpy(), want_h, atol=2e-6)
        # Temperatures: the call's on its sampled tokens, 1 on context.
        self.assertTrue(np.all(temps[batch.row(1)][batch.loss_mask[batch.row(1)] == 1] == np.float32(0.5)))
        self.assertTrue(np.all(temps[batch.loss_mask == 0] == 1.0))

    def test_sampled_logprobs_are_what_training_recomputes(self):
        policy = Policy(self.model, self.tok)
        prompt = self.tok.encode("t0>")
        for temperature in (1.0, 0.7):
            out, lps, _, _, version = policy.sample(prompt, 12, temperature, policy.generator(7, 0))
            self.assertEqual(version, 0)
            ids = prompt + out
            mask = [0] * len(prompt) + [1] * len(out)
            batch = make_batch([(ids, mask)], temperatures=[temperature])
            with torch.no_grad():
                got = batch_logprobs(self.model, batch, token_temperatures(batch)).numpy()
            np.testing.assert_allclose(got[len(prompt) :], np.asarray(lps, dtype=np.float32), atol=2e-6)
        # The same seed, the same sample; another seed, (here) another.
        a = policy.sample(prompt, 12, 1.0, policy.generator(7, 0))[0]
        b = policy.sample(prompt, 12, 1.0, policy.generator(7, 0))[0]
        c = policy.sample(prompt, 12, 1.0, policy.generator(8, 0))[0]
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)

    def test_a_step_trains_the_same_rows_however_the_core_cut_it(self):
        rng = np.random.default_rng(4)
        rows = [(rng.integers(0, self.tok.vocab_size, size=n), np.r_[0, 0, np.ones(n - 2, dtype=int)]) for n in (5, 8, 4, 7)]
        temps = [1.0, 0.7, 1.0, 0.9]
        whole = make_batch(rows, temps, names=["a", "b", "c", "d"])
        # The same rows in two batches, in another order (advantages and weights carried over row by row).
        cut = []
        for part in ([3, 0], [2, 1]):
            b = make_batch([rows[i] for i in part], [temps[i] for i in part], names=["abcd"[i] for i in part])
            for k in ("logprobs", "advantages", "loss_weights"):
                setattr(b, k, np.concatenate([getattr(whole, k)[whole.row(i)] for i in part]))
            cut.append(b)
        results = []
        for batches in ([whole], cut):
            step = Step()
            for b in batches:
                step.add(b, token_temperatures(b), {"harnesses": {}})
            rows_, temps_ = merged(step)
            new, entropy = batch_forward(self.model, rows_, temps_)
            results.append(float(surrogate(rows_, new, 0.2, entropy, 0.05)))
            self.assertEqual([i.rollout_id for i in rows_.row_info], ["a", "b", "c", "d"])
        self.assertEqual(results[0], results[1])  # bit-equal, not just close

    def test_surrogate_gradient(self):
        rows = [([1, 2, 3, 4, 5], [0, 0, 1, 1, 0]), ([6, 7, 8], [0, 1, 1])]
        batch = make_batch(rows)
        new = torch.tensor(batch.logprobs.copy(), requires_grad=True)  # ratio 1 everywhere
        surrogate(batch, new, 0.2).backward()
        want = np.where(batch.loss_mask == 1, -batch.loss_weights * batch.advantages, 0.0)
        np.testing.assert_allclose(new.grad.numpy(), want, atol=1e-7)

        # Past the clip on the advantage's side (ratio 1.5 > 1.2 with A > 0; 0.5 < 0.8 with A < 0): no gradient.
        adv = batch.advantages
        shift = np.where(adv > 0, np.log(1.5), np.log(0.5)).astype(np.float32)
        new = torch.tensor(batch.logprobs + shift, requires_grad=True)
        surrogate(batch, new, 0.2).backward()
        np.testing.assert_allclose(new.grad.numpy(), 0.0, atol=1e-9)

        # The entropy bonus: -coef * weight * dH on trained tokens only.
        new = torch.tensor(batch.logprobs.copy())
        entropy = torch.ones(batch.tokens, requires_grad=True)
        surrogate(batch, new, 0.2, entropy, 0.05).backward()
        np.testing.assert_allclose(entropy.grad.numpy(), np.where(batch.loss_mask == 1, -0.05 * batch.loss_weights, 0.0), atol=1e-9)


@unittest.skipIf(torch is None, NO_TORCH)
class PolicyServerTest(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(1)
        self.tok = CharTokenizer()
        self.policy = Policy(build_model(self.tok.vocab_size, seed=0, max_len=64), self.tok, name="tiny")
        self.server = PolicyServer(self.policy).start()

    def tearDown(self):
        self.server.close()

    def post(self, path, body):
        req = urllib.request.Request(self.server.url + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as res:
                return res.status, json.loads(res.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def get(self, path):
        with urllib.request.urlopen(self.server.url + path, timeout=10) as res:
            raw = res.read()
            return res.status, json.loads(raw) if raw else None

    def test_completions_in_vllms_layout(self):
        body = {"model": "tiny", "prompt": "t1>", "max_tokens": 6, "temperature": 0.8, "seed": 5, "logprobs": 2, "return_token_ids": True, "n": 2}
        status, res = self.post("/v1/completions", body)
        self.assertEqual(status, 200, res)
        self.assertEqual(res["object"], "text_completion")
        self.assertEqual(len(res["choices"]), 2)
        for i, choice in enumerate(res["choices"]):
            self.assertEqual(choice["index"], i)
            self.assertEqual(choice["prompt_token_ids"], self.tok.encode("t1>"))
            ids = choice["token_ids"]
            self.assertEqual(self.tok.encode(choice["text"]), ids)  # text re-encodes to the sampled ids
            lp = choice["logprobs"]
            self.assertEqual(len(lp["token_logprobs"]), len(ids))
            self.assertEqual(lp["tokens"], [self.tok.decode([t]) for t in ids])
            self.assertEqual(lp["text_offset"], list(range(len(ids))))
            for tok, top, value in zip(lp["tokens"], lp["top_logprobs"], lp["token_logprobs"]):
                self.assertEqual(top[tok], value)  # the sampled token is listed beside the top ones
                self.assertGreaterEqual(len(top), 2)
            self.assertIn(choice["finish_reason"], ("stop", "length"))
            if choice["finish_reason"] == "stop":
                self.assertEqual(ids[-1], self.tok.stop_id)
            else:
                self.assertEqual(len(ids), 6)
        self.assertEqual(res["usage"]["completion_tokens"], sum(len(c["token_ids"]) for c in res["choices"]))
        # The same request, the same answer; without return_token_ids / logprobs those fields are null.
        self.assertEqual(self.post("/v1/completions", body)[1]["choices"], res["choices"])
        status, plain = self.post("/v1/completions", {"prompt": [11, 2, 12], "max_tokens": 3, "seed": 1})
        self.assertEqual(status, 200, plain)
        c = plain["choices"][0]
        self.assertIsNone(c["token_ids"])
        self.assertIsNone(c["prompt_token_ids"])
        self.assertIsNone(c["logprobs"])

    def test_small_routes(self):
        self.assertEqual(self.get("/health"), (200, None))
        status, models = self.get("/v1/models")
        self.assertEqual(models["data"][0]["id"], "tiny")
        self.assertEqual(models["data"][0]["max_model_len"], 64)
        self.assertEqual(self.get("/policy")[1], {"model": "tiny", "version": 0})
        self.policy.load(self.policy.model.state_dict(), 3)
        self.assertEqual(self.get("/policy")[1]["version"], 3)

    def test_what_it_does_not_serve_is_a_clear_4xx(self):
        cases = [
            ("/v1/completions", {"prompt": "t0>", "stream": True}, 400, "stream"),
            ("/v1/completions", {"prompt": "hello"}, 400, "outside the model's alphabet"),
            ("/v1/completions", {"prompt": [99]}, 400, "outside the vocabulary"),
            ("/v1/completions", {"prompt": ""}, 400, "empty"),
            ("/v1/completions", {"prompt": "t0>", "model": "other"}, 404, "does not exist"),
            ("/v1/completions", {"prompt": "t0>", "top_p": 0.9}, 400, "top_p"),
            ("/v1/completions", {"prompt": "t0>", "max_tokens": 100}, 400, "positions"),
            ("/v1/chat/completions", {"messages": []}, 404, "completions only"),
        ]
        for path, body, code, text in cases:
            status, res = self.post(path, body)
            self.assertEqual(status, code, (body, res))
            self.assertIn(text, res["error"]["message"], body)


if __name__ == "__main__":
    unittest.main()
