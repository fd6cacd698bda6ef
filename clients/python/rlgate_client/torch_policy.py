"""A tiny causal language model for the closed-loop example: the policy that samples and the policy that trains.

One token is one character of a small alphabet (CharTokenizer), so text and token ids map one to one: a prompt the
harness builds from earlier text re-encodes to exactly the ids the model saw and sampled, and the gateway's prefix
tree continues every turn from the previous one. TinyLM is a 2-layer pre-norm transformer (learned positions,
causal attention written out, no dropout), small enough to sample and train on a CPU in milliseconds.

Sampling and training compute a token's logprob with the same function (`next_token_logprobs` over a full forward
of the prefix, float32, logits divided by the call's temperature), so the logprobs the server reports are the ones the
trainer recomputes up to float rounding of different tensor shapes.
"""
import math
import threading
from typing import Iterator, List, NamedTuple, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

# "\n" ends an answer (the model's stop token); digits, "t", ">" and "=" write prompts, answers and tool results.
DEFAULT_ALPHABET = "\n0123456789t>= "


class CharTokenizer:
    """A token is one character of `alphabet`; the id is its position in it."""

    def __init__(self, alphabet: str = DEFAULT_ALPHABET, stop: str = "\n"):
        if len(set(alphabet)) != len(alphabet):
            raise ValueError("the alphabet repeats a character")
        if stop not in alphabet:
            raise ValueError("the stop token %r is not in the alphabet" % stop)
        self.alphabet = alphabet
        self._ids = {c: i for i, c in enumerate(alphabet)}
        self.stop_id = self._ids[stop]

    @property
    def vocab_size(self) -> int:
        return len(self.alphabet)

    def encode(self, text: str) -> List[int]:
        unknown = sorted({c for c in text if c not in self._ids})
        if unknown:
            raise ValueError(
                "characters outside the model's alphabet %r: %s" % (self.alphabet, ", ".join(repr(c) for c in unknown))
            )
        return [self._ids[c] for c in text]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.alphabet[i] for i in ids)

    def check_ids(self, ids: Sequence[int]) -> None:
        for i in ids:
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < self.vocab_size:
                raise ValueError("token id %r is outside the vocabulary [0, %d)" % (i, self.vocab_size))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor, blocked: torch.Tensor) -> torch.Tensor:
        """blocked: True where query i must not see key j, [n, n] or [b, 1, n, n]."""
        b, n, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, n, h, d // h).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // h)
        att = att.masked_fill(blocked, float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    """A causal transformer over token ids: (batch, length) int64 → (batch, length, vocab) float32 logits."""

    def __init__(self, vocab: int, dim: int = 64, layers: int = 2, heads: int = 4, max_len: int = 128):
        super().__init__()
        if dim % heads:
            raise ValueError("dim must be a multiple of heads")
        self.max_len = max_len
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)
        self.register_buffer("causal", torch.ones(max_len, max_len, dtype=torch.bool).triu(1), persistent=False)

    def forward(self, ids: torch.Tensor, positions: Optional[torch.Tensor] = None, attend: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Causal over each row of `ids`; or, given `positions` [b, n] and `attend` [b, n, n] (True where query i
        may see key j: its ancestors in a token trie, itself included), tree attention over a packed trie."""
        n = ids.shape[1]
        if positions is None:
            if n > self.max_len:
                raise ValueError("sequence of %d tokens is longer than the model's %d positions" % (n, self.max_len))
            x = self.tok(ids) + self.pos(torch.arange(n, device=ids.device))
            blocked = self.causal[:n, :n]
        else:
            if int(positions.max()) >= self.max_len:
                raise ValueError("a token at depth %d is past the model's %d positions" % (int(positions.max()), self.max_len))
            x = self.tok(ids) + self.pos(positions)
            blocked = ~attend.unsqueeze(1)
        for block in self.blocks:
            x = block(x, blocked)
        return self.head(self.ln(x))


def next_token_logprobs(logits: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
    """log softmax(logits / T) in float32 (float64 logits stay float64); a temperature of 0 (greedy) scores at 1."""
    t = torch.where(temperature > 0, temperature, torch.ones_like(temperature))
    x = logits if logits.dtype == torch.float64 else logits.float()
    return torch.log_softmax(x / t.to(x.dtype).unsqueeze(-1), dim=-1)


PAUSE_MODES = ("abort", "wait", "keep")


class Token(NamedTuple):
    """One sampled token: its id, logprob, the top_n (id, logprob) at its position, and the policy version that sampled it."""

    id: int
    logprob: float
    top: List[Tuple[int, float]]
    version: int


class Policy:
    """The served model: a copy of the trainer's weights, swapped whole under a lock when a step is done.

    Weight updates under running generations (vLLM's `POST /pause?mode=` / `POST /resume`, docs/weight-updates.md):
    while paused no generation starts; a running one is ended at its next token (abort: its finish_reason is "abort",
    and one that arrives during an abort-mode pause is ended at once, before any token, since only a request sent
    before the gateway began holding calls can arrive then), frozen until the resume and then sampled on by the new
    weights (keep), or run to its end before the pause answers (wait). Each token is sampled under the lock, so every
    token has exactly one version: the weights that computed it.
    """

    def __init__(self, model: TinyLM, tokenizer: CharTokenizer, name: str = "rlgate-tiny", seed: int = 0):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.version = 0
        self.lock = threading.Condition()
        self.paused = False
        self.pause_mode: Optional[str] = None
        self._aborts = 0  # abort-mode pauses so far: a generation that started before the latest one ends
        self._running = 0
        self._rng = torch.Generator().manual_seed(seed)

    def load(self, state_dict, version: int) -> None:
        with self.lock:
            self.model.load_state_dict(state_dict)
            self.version = version

    def pause(self, mode: str) -> None:
        """Pauses generation in `mode`; returns once the pause holds (wait: once running generations ended). Pausing
        again while paused is the same pause (in its first mode)."""
        if mode not in PAUSE_MODES:
            raise ValueError("mode must be one of %s; got %r" % (", ".join(PAUSE_MODES), mode))
        with self.lock:
            if not self.paused:
                self.paused = True
                self.pause_mode = mode
                if mode == "abort":
                    self._aborts += 1
            if self.pause_mode == "wait":
                while self._running:
                    self.lock.wait()

    def resume(self) -> None:
        with self.lock:
            self.paused = False
            self.lock.notify_all()

    def generator(self, seed: Optional[int], choice: int) -> torch.Generator:
        """A request's own generator when it gives a seed (reproducible whatever the order of calls), else the server's."""
        if seed is None:
            return self._rng
        return torch.Generator().manual_seed((int(seed) * 1_000_003 + choice) % (2**63))

    def generate(
        self, prompt: Sequence[int], max_tokens: int, temperature: float, generator: torch.Generator, top_n: int = 0
    ) -> "Generation":
        """The tokens sampled after `prompt`, one at a time as they are sampled (iterate the Generation)."""
        if len(prompt) + max_tokens > self.model.max_len:
            raise ValueError(
                "prompt (%d tokens) + max_tokens (%d) exceeds the model's %d positions"
                % (len(prompt), max_tokens, self.model.max_len)
            )
        return Generation(self, prompt, max_tokens, temperature, generator, top_n)

    @torch.no_grad()
    def _next(self, seq: List[int], t: torch.Tensor, temperature: float, generator: torch.Generator, top_n: int) -> Token:
        """One token after `seq` (the caller holds the lock). A full forward of the prefix (no KV cache): the same
        computation as training's."""
        logits = self.model(torch.tensor([seq], dtype=torch.long))[0, -1]
        logp = next_token_logprobs(logits.unsqueeze(0), t)[0]
        if temperature > 0:
            tok = int(torch.multinomial(logp.exp(), 1, generator=generator).item())
        else:
            tok = int(torch.argmax(logp).item())
        top: List[Tuple[int, float]] = []
        if top_n > 0:
            values, ids = torch.topk(logp, min(top_n, logp.shape[0]))
            top = [(int(i), float(v)) for i, v in zip(ids.tolist(), values.tolist())]
        return Token(tok, float(logp[tok].item()), top, self.version)

    def sample(
        self, prompt: Sequence[int], max_tokens: int, temperature: float, generator: torch.Generator, top_n: int = 0
    ) -> Tuple[List[int], List[float], List[List[Tuple[int, float]]], str, int]:
        """Samples up to max_tokens ids after `prompt`; stops after the stop token.

        Returns (ids, their logprobs, the top_n (id, logprob) per position, finish_reason, the policy version of the
        first token — of the answer's start when it has none).
        """
        generation = self.generate(prompt, max_tokens, temperature, generator, top_n)
        version = self.version
        tokens = list(generation)
        if tokens:
            version = tokens[0].version
        return [t.id for t in tokens], [t.logprob for t in tokens], [t.top for t in tokens], generation.finish_reason, version


class Generation:
    """One answer being sampled: iterating it yields each Token as it is sampled (a token at a time under the policy's
    lock, so generations interleave and weights can change between two tokens); `finish_reason` is "stop", "length" or
    "abort" once it ended."""

    def __init__(self, policy: Policy, prompt, max_tokens: int, temperature: float, generator: torch.Generator, top_n: int):
        self.policy = policy
        self.prompt = list(prompt)
        self.max_tokens = max_tokens
        self.temperature = float(temperature)
        self.generator = generator
        self.top_n = top_n
        self.finish_reason: Optional[str] = None

    def __iter__(self) -> Iterator[Token]:
        p = self.policy
        with p.lock:
            if p.paused and p.pause_mode == "abort":
                self.finish_reason = "abort"
                return
            while p.paused:
                p.lock.wait()
            p._running += 1
            epoch = p._aborts
        try:
            seq = list(self.prompt)
            t = torch.tensor([self.temperature])
            for _ in range(self.max_tokens):
                with p.lock:
                    while p.paused and p.pause_mode == "keep":
                        p.lock.wait()
                    if p._aborts != epoch:  # an abort-mode pause since it started: the weights changed under it
                        self.finish_reason = "abort"
                        return
                    token = p._next(seq, t, self.temperature, self.generator, self.top_n)
                seq.append(token.id)
                yield token
                if token.id == p.tokenizer.stop_id:
                    self.finish_reason = "stop"
                    return
            self.finish_reason = "length"
        finally:
            with p.lock:
                p._running -= 1
                p.lock.notify_all()


def build_model(vocab: int, seed: int, dim: int = 64, layers: int = 2, heads: int = 4, max_len: int = 128) -> TinyLM:
    """The same initial weights for the same seed."""
    torch.manual_seed(seed)
    return TinyLM(vocab, dim=dim, layers=layers, heads=heads, max_len=max_len)
