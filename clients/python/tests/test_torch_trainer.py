"""The closed loop's pieces, one by one (rlgate_client.torch_policy, torch_server, torch_trainer).

- the padded batch forward gives every row the logprobs of its own forward (padding never leaks in);
- the logprobs the server reports for sampled tokens are what the trainer recomputes, at the call's temperature;
- the surrogate's gradient at ratio 1 is -loss_weight * advantage on trained tokens and 0 elsewhere, and a ratio
  past the clip on the advantage's side gives no gradient;
- the server answers /v1/completions in vLLM's layout (choice-level prompt_token_ids / token_ids, completions
  logprobs), whole or streamed (the stream's chunks join to the whole answer), text re-encodes to the sampled ids, a
  seed gives the same sample, and what it does not serve is a 4xx;
- weight updates under running generations as vLLM's /pause and /resume do them: abort ends a stream with an abort
  chunk (before its first token: the prompt ids still come first), keep freezes a generation and the new weights
  sample the rest, wait answers once running generations ended; every token records the version that sampled it;
- the policy server in its own process serves the weights the trainer hands it (POST /update_weights), bit for bit,
  as the version named, and refuses what is not a state dict of its model;
- a step's staleness comes from its tokens' versions, and stale tokens train against the proximal policy with
  truncated importance weights while fresh ones train as plain PPO.

Run: python3 -m unittest discover -s clients/python/tests -p test_torch_trainer.py (needs python3-torch).
"""
import io
import json
import os
import sys
import threading
import time
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
    from rlgate_client.torch_policy_process import PolicyProcess
    from rlgate_client.torch_server import PolicyServer
    from rlgate_client.torch_trainer import (
        Staleness,
        Step,
        batch_forward,
        batch_logprobs,
        merged,
        off_policy,
        surrogate,
        token_temperatures,
    )
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


    def test_staleness_and_off_policy_weights_follow_each_tokens_version(self):
        # Row 0: one call whose answer an update split (tokens 0-1 by version 3, 2-3 by 4); row 1: a call of version 4.
        batch = make_batch([([1, 2, 3, 4, 5, 6], [0, 0, 1, 1, 1, 1]), ([7, 8, 9], [0, 1, 1])])
        call = batch.row_info[0].calls[0]
        call.policy_version = "3"
        call.version_runs.add(start=0, version="3")
        call.version_runs.add(start=2, version="4")
        batch.row_info[1].calls[0].policy_version = "4"
        st = Staleness(batch, current=4)
        np.testing.assert_array_equal(st.age, [-1, -1, 1, 1, 0, 0, -1, 0, 0])  # -1 on context
        self.assertEqual(st.versions, ["3", "4"])
        self.assertEqual(st.figures(), {"staleness_mean": 2 / 6, "staleness_max": 1, "stale_tokens": 2, "unversioned_tokens": 0})
        proximal = torch.from_numpy(batch.logprobs.copy()) + 0.5
        old, weights, _ = off_policy(batch, proximal, st.stale, cap=1.5)
        stale = st.stale
        np.testing.assert_allclose(old.numpy()[stale], proximal.numpy()[stale])
        np.testing.assert_allclose(old.numpy()[~stale], batch.logprobs[~stale])
        np.testing.assert_allclose(weights.numpy()[stale], 1.5)  # exp(0.5) = 1.65, truncated at the cap
        np.testing.assert_allclose(weights.numpy()[~stale], 1.0)
        # A synchronous step (every token fresh) is plain PPO: the same loss as without the weights.
        sync = make_batch([([1, 2, 3], [0, 1, 1])])
        st = Staleness(sync, current=0)
        self.assertFalse(st.stale.any())
        old, weights, _ = off_policy(sync, torch.from_numpy(sync.logprobs.copy()) + 0.3, st.stale, cap=2.0)
        new = torch.from_numpy(sync.logprobs.copy()) + 0.1
        self.assertEqual(float(surrogate(sync, new, 0.2, old=old, behaviour_weights=weights)), float(surrogate(sync, new, 0.2)))


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
        data = b"" if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server.url + path, data=data, method="POST", headers={"content-type": "application/json"})
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
        self.assertEqual(self.get("/policy")[1], {"model": "tiny", "version": 0, "paused": False})
        self.policy.load(self.policy.model.state_dict(), 3)
        self.assertEqual(self.get("/policy")[1]["version"], 3)
        self.assertEqual(self.get("/is_paused")[1], {"is_paused": False})
        self.assertEqual(self.post("/tokenize", {"prompt": "t1>"})[1]["tokens"], self.tok.encode("t1>"))
        self.assertEqual(self.post("/detokenize", {"tokens": self.tok.encode("t1>")})[1], {"prompt": "t1>"})

    def test_what_it_does_not_serve_is_a_clear_4xx(self):
        cases = [
            ("/v1/completions", {"prompt": "t0>", "stream": True, "n": 2}, 400, "stream"),
            ("/v1/completions", {"prompt": "t0>", "stream_options": {"include_usage": True}}, 400, "stream"),
            ("/pause?mode=now", None, 400, "mode must be one of"),
            ("/tokenize", {"prompt": "hello"}, 400, "outside the model's alphabet"),
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

    def stream(self, body):
        """The chunks of a streamed completion (an open response: read them with next(); [DONE] ends it)."""
        req = urllib.request.Request(self.server.url + "/v1/completions", data=json.dumps({**body, "stream": True}).encode(),
                                     headers={"content-type": "application/json"})
        res = urllib.request.urlopen(req, timeout=10)
        self.assertEqual(res.headers["content-type"], "text/event-stream")

        def chunks():
            with res:
                for line in res:
                    if line.startswith(b"data: "):
                        if line.strip() == b"data: [DONE]":
                            return
                        yield json.loads(line[6:])

        return chunks()

    def test_a_stream_is_the_whole_answer_a_token_at_a_time(self):
        body = {"prompt": "t1>", "max_tokens": 8, "temperature": 0.8, "seed": 5, "logprobs": 1, "return_token_ids": True}
        whole = self.post("/v1/completions", body)[1]["choices"][0]
        chunks = list(self.stream({**body, "stream_options": {"include_usage": True}}))
        usage = chunks.pop()
        self.assertEqual(usage["choices"], [])
        choices = [c["choices"][0] for c in chunks]
        self.assertEqual(choices[0]["prompt_token_ids"], self.tok.encode("t1>"))
        self.assertTrue(all(c["prompt_token_ids"] is None for c in choices[1:]))
        self.assertTrue(all(len(c["token_ids"]) == 1 for c in choices))
        self.assertEqual(sum((c["token_ids"] for c in choices), []), whole["token_ids"])
        self.assertEqual("".join(c["text"] for c in choices), whole["text"])
        self.assertEqual(sum((c["logprobs"]["token_logprobs"] for c in choices), []), whole["logprobs"]["token_logprobs"])
        self.assertEqual(sum((c["logprobs"]["text_offset"] for c in choices), []), whole["logprobs"]["text_offset"])
        self.assertEqual([c["finish_reason"] for c in choices], [None] * (len(choices) - 1) + [whole["finish_reason"]])
        self.assertEqual(usage["usage"]["completion_tokens"], len(whole["token_ids"]))

    def slow_and_endless(self):
        """The served model never samples its stop token (every answer runs to max_tokens) and samples a token each
        20 ms: an update sent after an answer's first token lands in its middle."""
        with torch.no_grad():
            self.policy.model.head.bias[self.tok.stop_id] = -1e4
        sample = self.policy._next

        def slow(*args):
            time.sleep(0.02)
            return sample(*args)

        self.policy._next = slow

    def test_an_abort_mode_pause_ends_running_streams_and_new_ones_at_once(self):
        self.slow_and_endless()
        body = {"prompt": "t0>", "max_tokens": 40, "seed": 1, "return_token_ids": True}
        chunks = self.stream(body)
        first = next(chunks)["choices"][0]
        self.assertEqual(self.post("/pause?mode=abort", None), (200, {"status": "paused"}))
        self.assertEqual(self.get("/is_paused")[1], {"is_paused": True})
        rest = [c["choices"][0] for c in chunks]
        self.assertEqual(rest[-1]["finish_reason"], "abort")
        self.assertEqual(rest[-1]["text"], "")
        ids = first["token_ids"] + sum((c["token_ids"] for c in rest), [])
        self.assertLess(len(ids), 40)  # ended before max_tokens
        # The same request again while paused: ended at once, its prompt ids on a chunk before the abort.
        late = [c["choices"][0] for c in self.stream(body)]
        self.assertEqual([c["finish_reason"] for c in late], [None, "abort"])
        self.assertEqual(late[0]["prompt_token_ids"], self.tok.encode("t0>"))
        self.assertEqual(late[0]["token_ids"], [])
        # A whole answer is answered as aborted too; after the resume the request samples in full.
        self.assertEqual(self.post("/v1/completions", body)[1]["choices"][0]["finish_reason"], "abort")
        self.assertEqual(self.post("/resume", None), (200, {"status": "resumed"}))
        again = self.post("/v1/completions", body)[1]["choices"][0]
        self.assertEqual(again["finish_reason"], "length")
        self.assertEqual(again["token_ids"][: len(ids)], ids)  # the same seed: the same start

    def test_keep_freezes_a_generation_and_the_new_weights_sample_the_rest(self):
        self.slow_and_endless()
        tokens = iter(self.policy.generate(self.tok.encode("t0>"), 12, 1.0, self.policy.generator(2, 0)))
        before = [next(tokens) for _ in range(3)]
        self.policy.pause("keep")

        def update():
            time.sleep(0.2)  # the generation is frozen meanwhile
            self.policy.load(self.policy.model.state_dict(), 1)
            self.policy.resume()

        threading.Thread(target=update).start()
        t0 = time.monotonic()
        after = list(tokens)
        self.assertGreaterEqual(time.monotonic() - t0, 0.15)
        self.assertEqual([t.version for t in before], [0, 0, 0])
        self.assertEqual([t.version for t in after], [1] * 9)

    def test_wait_answers_once_running_generations_ended(self):
        self.slow_and_endless()
        chunks = self.stream({"prompt": "t0>", "max_tokens": 30, "seed": 1})
        next(chunks)
        paused = []
        waiter = threading.Thread(target=lambda: paused.append(self.post("/pause?mode=wait", None)))
        waiter.start()
        rest = [c["choices"][0] for c in chunks]  # the stream runs to its end: wait does not abort it
        waiter.join(10)
        self.assertEqual(rest[-1]["finish_reason"], "length")
        self.assertEqual(paused, [(200, {"status": "paused"})])
        self.post("/resume", None)


if __name__ == "__main__":
    unittest.main()


@unittest.skipIf(torch is None, NO_TORCH)
class PolicyProcessTest(unittest.TestCase):
    def test_the_server_process_samples_with_the_weights_handed_to_it(self):
        torch.set_num_threads(1)
        tok = CharTokenizer()
        trained = build_model(tok.vocab_size, seed=5, max_len=64)  # not the server's own initial weights (seed 0)
        server = PolicyProcess("127.0.0.1:0", "tiny", 0, dict(dim=64, layers=2, heads=4, max_len=64), tok.alphabet).start()
        try:
            server.load(trained.state_dict(), 3)
            with urllib.request.urlopen(server.url + "/policy", timeout=10) as res:
                self.assertEqual(json.loads(res.read())["version"], 3)
            body = {"model": "tiny", "prompt": "t0>", "max_tokens": 8, "seed": 11, "logprobs": 0, "return_token_ids": True}
            req = urllib.request.Request(server.url + "/v1/completions", data=json.dumps(body).encode(), method="POST")
            with urllib.request.urlopen(req, timeout=10) as res:
                choice = json.loads(res.read())["choices"][0]
            # The same sample and logprobs as the handed weights give in this process: float32, bit for bit.
            local = Policy(trained, tok, name="tiny")
            ids, lps, _, _, _ = local.sample(tok.encode("t0>"), 8, 1.0, local.generator(11, 0))
            self.assertEqual(choice["token_ids"], ids)
            self.assertEqual(choice["logprobs"]["token_logprobs"], lps)
            # Weights of another shape, or no state dict at all: a 400, and the served version stays.
            for payload in (build_model(tok.vocab_size, seed=0, dim=32, max_len=64).state_dict(), None):
                req = urllib.request.Request(server.url + "/update_weights?version=4", method="POST",
                                             data=b"junk" if payload is None else _saved(payload))
                with self.assertRaises(urllib.error.HTTPError) as refused:
                    urllib.request.urlopen(req, timeout=10)
                self.assertEqual(refused.exception.code, 400)
            with urllib.request.urlopen(server.url + "/policy", timeout=10) as res:
                self.assertEqual(json.loads(res.read())["version"], 3)
        finally:
            server.close()


def _saved(state_dict) -> bytes:
    buffer = io.BytesIO()
    torch.save(state_dict, buffer)
    return buffer.getvalue()
