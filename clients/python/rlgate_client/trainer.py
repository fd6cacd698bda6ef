"""Client of an RL core's Trainer service (proto/rlgate/v1/trainer.proto).

Per-token arrays are numpy views over the message's bytes (numpy.frombuffer, no copy); they are read-only.
Every unary call carries a deadline.

TLS as in the TypeScript client: plaintext by default only on loopback; beyond it TLS with the system's roots
(or tls_ca), unless insecure=True. tls_cert/tls_key present a client certificate (mutual TLS).
"""
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence

import grpc
import numpy as np

from ._protos import load

MAX_MESSAGE_BYTES = 512 * 1024 * 1024
LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def _host(target: str) -> str:
    if target.startswith("["):
        return target[1 : target.index("]")]
    return target.rsplit(":", 1)[0] if target.count(":") == 1 else target


def _read(path: Optional[str]) -> Optional[bytes]:
    if not path:
        return None
    with open(path, "rb") as f:
        return f.read()


@dataclass
class Batch:
    batch_id: int
    rows: int
    offsets: np.ndarray  # int32, rows + 1
    token_ids: np.ndarray  # int32
    loss_mask: np.ndarray  # uint8
    logprobs: np.ndarray  # float32, the inference server's
    advantages: np.ndarray  # float32
    loss_weights: np.ndarray  # float32: loss = sum(loss_weights * per_token_loss)
    row_info: list  # RowInfo messages: rollout_id, trajectory_id, group, generation, round, late, task, harness, reward,
    # segment, calls (seq, policy_version, temperature / top_p / top_k when set, finish_reason), finish_reason,
    # policy_version (of the row's last call), no_signal, staleness and stale_tokens (rlgate core --max-staleness)
    call_index: np.ndarray = None  # int32 per token: index into row_info[r].calls; -1 on context
    estimator: str = ""
    normalize: str = ""
    loss_agg: str = ""
    trained_tokens: int = 0
    groups: int = 0
    rollouts: int = 0
    batch_unit: str = ""
    loss_tokens: int = 0  # the global token count N the loss weights are normalised by (0: per batch)
    current_version: str = ""  # the core's current policy version when the batch was packed
    max_staleness: int = 0  # the largest row_info[r].staleness: current minus the oldest trained token's version
    stale_tokens: int = 0  # trained tokens older than current - max_staleness (rlgate core --stale keep)
    # MoE routing replay (serve --routed-experts), else None: uint8/uint16 [tokens, layers, top_k], aligned with
    # token_ids; row r's routing for replay is routed_experts[offsets[r] : offsets[r + 1] - 1] ([len - 1, L, K]:
    # its last token was never a model input, its entry is 0). See docs/routing-replay.md.
    routed_experts: Optional[np.ndarray] = None
    # "rows", or "tree" (rlgate_client.tree): every per-token array above then holds one entry per node of each
    # rollout's token trie, in depth-first order, and `offsets` delimit rows over `row_nodes`. Int32 views:
    layout: str = "rows"
    parents: Optional[np.ndarray] = None  # per token, its parent's index (-1 at a trie's root)
    positions: Optional[np.ndarray] = None  # per token, its depth: the position id it has in every row through it
    subtree_ends: Optional[np.ndarray] = None  # per token, its subtree's end: q attends to k iff k <= q < end[k]
    token_rows: Optional[np.ndarray] = None  # per token, the row whose fields (and calls) it carries
    row_nodes: Optional[np.ndarray] = None  # per row token, its tree token: field[row_nodes] is the rows layout
    trie_offsets: Optional[np.ndarray] = None  # tries + 1 (one trie per rollout)
    row_tokens: int = 0  # tokens in the rows layout

    @property
    def tokens(self) -> int:
        return int(self.token_ids.shape[0])

    def to_rows(self) -> "Batch":
        """This batch in the rows layout (itself when it is; rlgate_client.tree.to_rows)."""
        from .tree import to_rows

        return to_rows(self)

    def row(self, r: int) -> slice:
        """Row r's slice of the per-token arrays (rows layout; in a tree batch, of row_nodes)."""
        return slice(int(self.offsets[r]), int(self.offsets[r + 1]))

    def row_routing(self, r: int) -> Optional[np.ndarray]:
        """Row r's routed experts as the trainers replay them: [len - 1, layers, top_k] (None without routing)."""
        if self.routed_experts is None:
            return None
        if self.layout == "tree":  # a copy: the row's tokens gathered from the tree
            return self.routed_experts[self.row_nodes[self.row(r)][:-1]]
        return self.routed_experts[int(self.offsets[r]) : int(self.offsets[r + 1]) - 1]

    def token_calls(self, r: int) -> list:
        """The CallInfo of every token of row r (None on context)."""
        if self.layout == "tree":  # a tree token's call_index points into the calls of its token_rows row
            own = {c.seq: c for c in self.row_info[r].calls}
            out = []
            for t in self.row_nodes[self.row(r)]:
                ci = int(self.call_index[t])
                out.append(own.get(self.row_info[int(self.token_rows[t])].calls[ci].seq) if ci >= 0 else None)
            return out
        calls = self.row_info[r].calls
        return [calls[i] if i >= 0 else None for i in self.call_index[self.row(r)]]


def sampling(call) -> Dict[str, float]:
    """temperature / top_p / top_k of a CallInfo, those the request set."""
    return {k: getattr(call, k) for k in ("temperature", "top_p", "top_k") if call.HasField(k)}


def _batch(m) -> Batch:
    return Batch(
        batch_id=m.batch_id,
        rows=m.rows,
        offsets=np.frombuffer(m.offsets, dtype="<i4"),
        token_ids=np.frombuffer(m.token_ids, dtype="<i4"),
        loss_mask=np.frombuffer(m.loss_mask, dtype=np.uint8),
        logprobs=np.frombuffer(m.logprobs, dtype="<f4"),
        advantages=np.frombuffer(m.advantages, dtype="<f4"),
        loss_weights=np.frombuffer(m.loss_weights, dtype="<f4"),
        row_info=list(m.row_info),
        call_index=np.frombuffer(m.call_index, dtype="<i4") if m.call_index else np.full(len(m.token_ids) // 4, -1, dtype=np.int32),
        estimator=m.estimator,
        normalize=m.normalize,
        loss_agg=m.loss_agg,
        trained_tokens=m.trained_tokens,
        groups=m.groups,
        rollouts=m.rollouts,
        batch_unit=m.batch_unit,
        loss_tokens=m.loss_tokens,
        current_version=m.current_version,
        max_staleness=m.max_staleness,
        stale_tokens=m.stale_tokens,
        routed_experts=_routed_experts(m),
        **_tree_fields(m),
    )


def _tree_fields(m) -> dict:
    """A tree batch's structure as int32 views (nothing for a rows batch)."""
    if m.layout != "tree":
        return {"row_tokens": m.row_tokens or len(m.token_ids) // 4}
    view = lambda b: np.frombuffer(b, dtype="<i4")  # noqa: E731
    return {
        "layout": "tree",
        "parents": view(m.parents),
        "positions": view(m.positions),
        "subtree_ends": view(m.subtree_ends),
        "token_rows": view(m.token_rows),
        "row_nodes": view(m.row_nodes),
        "trie_offsets": view(m.trie_offsets),
        "row_tokens": m.row_tokens,
    }


def _routed_experts(m) -> Optional[np.ndarray]:
    """The batch's routed experts viewed as [tokens, layers, top_k] without a copy (None when it carries none)."""
    if not m.routed_experts:
        return None
    dtype = {"uint8": np.uint8, "uint16": np.dtype("<u2")}[m.routed_experts_dtype]
    return np.frombuffer(m.routed_experts, dtype=dtype).reshape(-1, m.moe_layers, m.moe_top_k)


def _f32(a) -> bytes:
    return np.ascontiguousarray(a, dtype="<f4").tobytes()


def _consistency(c) -> Dict[str, float]:
    return {
        "tokens": c.tokens,
        "pearson": c.pearson,
        "k3_kl": c.k3_kl,
        "abs_diff_mean": c.abs_diff_mean,
        "abs_diff_p50": c.abs_diff_p50,
        "abs_diff_p99": c.abs_diff_p99,
        "abs_diff_max": c.abs_diff_max,
    }


class _PolicyUpdate:
    def __init__(self, client: "TrainerClient", version, mode: str, timeout_s: float):
        self._client, self._version, self._mode, self._timeout_s = client, version, mode, timeout_s

    def __enter__(self):
        return self._client.pause_policy(self._mode, self._timeout_s)

    def __exit__(self, exc_type, *exc):
        self._client.resume_policy(self._version if exc_type is None else None)
        return False


class TrainerClient:
    def __init__(
        self,
        address: str,
        token: Optional[str] = None,
        deadline_s: float = 30.0,
        tls_ca: Optional[str] = None,
        tls_cert: Optional[str] = None,
        tls_key: Optional[str] = None,
        tls_server_name: Optional[str] = None,
        insecure: bool = False,
    ):
        self._pb, grpc_mod, _, _ = load()
        options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.keepalive_time_ms", 30000),
        ]
        target = address.replace("grpc://", "")
        wanted = any((tls_ca, tls_cert, tls_key, tls_server_name))
        if insecure or (not wanted and _host(target) in LOOPBACK):
            self._channel = grpc.insecure_channel(target, options=options)
        else:
            if bool(tls_cert) != bool(tls_key):
                raise ValueError("a TLS client certificate needs its key (and the key its certificate)")
            creds = grpc.ssl_channel_credentials(_read(tls_ca), _read(tls_key), _read(tls_cert))
            if tls_server_name:
                options.append(("grpc.ssl_target_name_override", tls_server_name))
            self._channel = grpc.secure_channel(target, creds, options=options)
        self._stub = grpc_mod.TrainerStub(self._channel)
        self._metadata = [("authorization", "Bearer " + token)] if token else []
        self._deadline = deadline_s
        self._streams: List[grpc.Future] = []

    def batches(self, trainer: str = "python", max_in_flight: int = 2, layout: str = "") -> Iterator[Batch]:
        """Batches as they become ready (blocks while none is). Ack each one to get more than max_in_flight.
        layout: "rows" or "tree" (rlgate_client.tree); "" the core's (rlgate core --layout)."""
        request = self._pb.StreamBatchesRequest(trainer=trainer, max_in_flight=max_in_flight, layout=layout)
        # Long-lived: no deadline. wait_for_ready: a trainer started before its core waits for it.
        call = self._stub.StreamBatches(request, metadata=self._metadata, wait_for_ready=True)
        self._streams.append(call)
        try:
            for message in call:
                yield _batch(message)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                raise
        finally:
            call.cancel()
            self._streams.remove(call)

    def ack(self, batch_ids: Sequence[int]) -> int:
        res = self._stub.AckBatch(self._pb.AckBatchRequest(batch_ids=list(batch_ids)), timeout=self._deadline, metadata=self._metadata)
        return res.acked

    def report_logprobs(
        self, batch_id: int, logprobs: np.ndarray, ack: bool = False, importance_cap: float = 0.0, kind: str = "policy"
    ) -> dict:
        """The trainer's logprobs for every token of the batch (mask-1 ones are read, and must be finite).

        kind "policy": consistency with the inference server per harness (and importance weights with a cap);
        kind "ref": the reference policy's, kept with the batch for KL per row (row_kl) and KL in the reward: with
        the core's --kl-coef, "kl_advantages" is the batch's advantages with -kl_coef * KL in the reward (else None).
        """
        req = self._pb.LogprobReport(batch_id=batch_id, logprobs=_f32(logprobs), ack=ack, importance_cap=importance_cap, kind=kind)
        res = self._stub.ReportLogprobs(req, timeout=self._deadline, metadata=self._metadata)
        return {
            "harnesses": {c.harness: _consistency(c) for c in res.harnesses},
            "importance_weights": np.frombuffer(res.importance_weights, dtype="<f4") if res.importance_weights else None,
            "acked": res.acked,
            "row_kl": [{"row": k.row, "tokens": k.tokens, "k1": k.k1, "k2": k.k2, "k3": k.k3} for k in res.row_kl],
            "kl_advantages": np.frombuffer(res.kl_advantages, dtype="<f4") if res.kl_advantages else None,
        }

    def compute_advantages(
        self,
        values: Optional[np.ndarray] = None,
        batch_id: int = 0,
        offsets: Optional[np.ndarray] = None,
        loss_mask: Optional[np.ndarray] = None,
        rewards: Optional[Sequence[float]] = None,
        group_ids: Optional[Sequence[int]] = None,
        estimator: str = "gae",
        gamma: Optional[float] = None,
        lam: Optional[float] = None,
        whiten: Optional[bool] = None,
        token_rewards: Optional[np.ndarray] = None,
        normalize: str = "none",
        kl_coef: float = 0.0,
        kl_kind: str = "",
        layout: str = "",
    ) -> dict:
        """Advantages over a served batch (batch_id) or your own layout, with your values for GAE.

        GAE: gamma and lam together or neither (gamma = lambda = 1); reinforce++: gamma is its discount. kl_coef > 0
        (gae, reinforce++ over a served batch whose ref logprobs were reported): KL in the reward.
        """
        req = self._pb.AdvantageRequest(batch_id=batch_id, estimator=estimator, normalize=normalize, kl_coef=kl_coef, kl_kind=kl_kind, layout=layout)
        if offsets is not None:
            req.rows = len(offsets) - 1
            req.offsets = np.ascontiguousarray(offsets, dtype="<i4").tobytes()
            req.loss_mask = np.ascontiguousarray(loss_mask, dtype=np.uint8).tobytes()
            req.rewards.extend(float(r) for r in rewards)
            if group_ids is not None:
                req.group_ids.extend(int(g) for g in group_ids)
        if values is not None:
            req.values = _f32(values)
        if token_rewards is not None:
            req.token_rewards = _f32(token_rewards)
        if estimator == "reinforce++":
            if gamma is not None:
                req.gamma = gamma
        elif gamma is not None or lam is not None or whiten is not None:
            # As given: the core refuses gamma without lambda (and the reverse) rather than guessing the other.
            req.gae.SetInParent()
            if gamma is not None:
                req.gae.gamma = gamma
            if lam is not None:
                setattr(req.gae, "lambda", lam)  # a Python keyword
            if whiten is not None:
                req.gae.whiten = whiten
        res = self._stub.ComputeAdvantages(req, timeout=self._deadline, metadata=self._metadata)
        return {
            "advantages": np.frombuffer(res.advantages, dtype="<f4"),
            "returns": np.frombuffer(res.returns, dtype="<f4") if res.returns else None,
            "loss_mask": np.frombuffer(res.loss_mask, dtype=np.uint8),
        }

    def status(self):
        return self._stub.Status(self._pb.StatusRequest(), timeout=self._deadline, metadata=self._metadata)

    def pause_policy(self, mode: str = "abort", timeout_s: float = 0.0, deadline_s: Optional[float] = None):
        """Pauses every gateway the core relays to (rlgate core --gateway-api) before a weight update.

        mode "abort": running answers are ended and continued after the resume; "wait": they finish first (the call
        answers once they have: give deadline_s room); "keep": frozen, they go on under the new weights. Repeatable;
        each gateway resumes on its own after timeout_s (0: its default, 300 s). Returns the PolicyState
        (paused, current_version, gateways).
        """
        req = self._pb.PausePolicyRequest(mode=mode, timeout_s=timeout_s)
        return self._stub.PausePolicy(req, timeout=deadline_s or self._deadline, metadata=self._metadata)

    def resume_policy(self, version=None, deadline_s: Optional[float] = None):
        """Resumes the gateways after a weight update; version (str or int) names the new weights: calls from now on
        record it, and it becomes the core's current version (rlgate core --max-staleness). Repeatable."""
        req = self._pb.ResumePolicyRequest(version="" if version is None else str(version))
        return self._stub.ResumePolicy(req, timeout=deadline_s or self._deadline, metadata=self._metadata)

    def update_policy(self, version, mode: str = "abort", timeout_s: float = 0.0):
        """A context manager around a weight update: paused on entry, resumed with `version` on exit (also when the
        update raised: the gateways then resume without a new version, the old weights still serving).

            with client.update_policy(step):
                load_weights(...)
        """
        return _PolicyUpdate(self, version, mode, timeout_s)

    def close(self):
        for call in list(self._streams):
            call.cancel()
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
