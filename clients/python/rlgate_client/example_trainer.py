"""An example trainer loop against an RL core: pull batches, "recompute" logprobs, report them, print figures.

There is no model here: the recomputed logprobs are the inference server's plus seeded noise (--noise), a
stand-in for a forward pass. With a real policy, replace `recompute_logprobs`. The loss shown is the usual
clipped policy-gradient surrogate at ratio exp(new - old), aggregated by the core's per-token loss weights:
    loss = sum(loss_weights * -min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A))
Batches come at least once: one the core sends again (after a restart, or a stream that broke before the ack) has
the same batch id, and is acked and skipped here. Each line also shows what the rows carry beside tokens: the
policy versions that sampled them (--policy-version: the lag of each token behind it), the calls (turns) per row
from the per-token call index, and how many rows a call cut at its length limit ended (overlong).

Run:  rlgate-example-trainer --core 127.0.0.1:8702        (after pip install ./clients/python)
      python3 clients/python/example_trainer.py --core …    (from a checkout)
"""
import argparse
import hashlib
import json
import os
import sys
import time

import grpc
import numpy as np

from . import TrainerClient, sampling


def recompute_logprobs(batch, rng, noise):
    return batch.logprobs + rng.normal(0.0, noise, size=batch.tokens).astype(np.float32)


def surrogate_loss(batch, new_logprobs, clip=0.2):
    mask = batch.loss_mask.astype(bool)
    ratio = np.exp(np.where(mask, new_logprobs - batch.logprobs, 0.0))
    a = batch.advantages
    per_token = -np.minimum(ratio * a, np.clip(ratio, 1 - clip, 1 + clip) * a)
    return float(np.sum(batch.loss_weights * np.where(mask, per_token, 0.0)))


def token_policy_versions(batch):
    """The policy version that sampled each token ("" on context), from the call index and the rows' calls."""
    out = np.full(batch.tokens, "", dtype=object)
    for r in range(batch.rows):
        s = batch.row(r)
        calls = batch.row_info[r].calls
        idx = batch.call_index[s]
        versions = np.array([c.policy_version for c in calls] + [""], dtype=object)
        out[s] = versions[np.where(idx >= 0, idx, len(calls))]
    return out


def policy_lag(batch, current):
    """Per trained token: how many versions behind `current` its sampler was (numeric versions only)."""
    mask = batch.loss_mask.astype(bool)
    lags = []
    for version in token_policy_versions(batch)[mask]:
        digits = str(version).lstrip("v")  # "7" or "v7"
        if digits.isdigit():
            lags.append(current - int(digits))
    return lags


def row_summary(batch, r):
    s = batch.row(r)
    mask = batch.loss_mask[s].astype(bool)
    adv = batch.advantages[s][mask]
    info = batch.row_info[r]
    idx = batch.call_index[s]
    return {
        "rollout_id": info.rollout_id,
        "trajectory_id": info.trajectory_id,
        "group": info.group,
        "generation": info.generation,
        "round": info.round,
        "late": info.late,
        "group_key": info.group_key,
        "segment": info.segment,
        "harness": info.harness,
        "reward": info.reward,
        "no_signal": info.no_signal,
        "finish_reason": info.finish_reason,
        "policy_version": info.policy_version,
        "calls": [dict(seq=c.seq, policy_version=c.policy_version, finish_reason=c.finish_reason, **sampling(c)) for c in info.calls],
        # Trained tokens per call (turn), by the per-token call index: per-turn credit starts here.
        "trained_per_call": [int(((idx == k) & mask).sum()) for k in range(len(info.calls))],
        "call_index_sha256": hashlib.sha256(idx.tobytes()).hexdigest(),
        "tokens": int(s.stop - s.start),
        "trained": int(mask.sum()),
        "adv_min": float(adv.min()) if adv.size else 0.0,
        "adv_max": float(adv.max()) if adv.size else 0.0,
        "adv_masked_out_max_abs": float(np.abs(batch.advantages[s][~mask]).max()) if (~mask).any() else 0.0,
        "weight_sum": float(batch.loss_weights[s].sum()),
        "tokens_sha256": hashlib.sha256(batch.token_ids[s].tobytes()).hexdigest(),
        "mask_sha256": hashlib.sha256(batch.loss_mask[s].tobytes()).hexdigest(),
    }


def say(text):
    """Progress for the person watching, on stderr: stdout carries only batch lines (one JSON each with --json)."""
    print("rlgate-example-trainer: " + text, file=sys.stderr, flush=True)


def connect(client, address, patience_s):
    """The core's status, once it answers: a core still starting gets `patience_s`; none at all ends the trainer
    with a sentence (the stream itself would wait for a core forever, silently)."""
    until = time.monotonic() + patience_s
    while True:
        try:
            return client.status()
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() >= until:
                why = "%s: %s" % (error.code().name, error.details())
                hint = (
                    "start one (npx rlgate core --gateway 127.0.0.1:8701) or give its address with --core HOST:PORT"
                    if error.code() == grpc.StatusCode.UNAVAILABLE
                    else "check --token (RLGATE_CORE_TOKEN) and the TLS options"
                )
                raise SystemExit("rlgate-example-trainer: no RL core answers at %s (%s): %s" % (address, why, hint))
            time.sleep(0.5)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--core", default="127.0.0.1:8702", help="the RL core's trainer service (host:port)")
    p.add_argument("--token", default=os.environ.get("RLGATE_CORE_TOKEN"))
    p.add_argument("--max-batches", type=int, default=0, help="stop after this many batches (0: run until interrupted)")
    p.add_argument("--noise", type=float, default=0.01, help="std of the stand-in model's logprob noise")
    p.add_argument("--importance-cap", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--policy-version", type=int, default=None, help="the trainer's current policy version (numeric): prints the lag of each batch's tokens")
    p.add_argument("--json", action="store_true", help="one JSON line per batch, rows included")
    p.add_argument("--tls-ca", help="PEM CA the core's certificate is checked against (TLS; beyond loopback default: system roots)")
    p.add_argument("--tls-cert", help="PEM client certificate, for a core that requires one (mutual TLS)")
    p.add_argument("--tls-key", help="PEM private key of --tls-cert")
    p.add_argument("--tls-server-name", help="name the core's certificate is checked for, when not the host dialed")
    p.add_argument("--insecure", action="store_true", help="plaintext even beyond loopback")
    p.add_argument("--connect-timeout", type=float, default=15.0, help="seconds to wait for the core to answer before giving up")
    args = p.parse_args()

    rng = np.random.default_rng(args.seed)
    done = 0
    seen = set()  # batch ids trained on: a batch sent again keeps its id
    tls = dict(tls_ca=args.tls_ca, tls_cert=args.tls_cert, tls_key=args.tls_key, tls_server_name=args.tls_server_name)
    with TrainerClient(args.core, token=args.token, insecure=args.insecure, **tls) as client:
        status = connect(client, args.core, args.connect_timeout)
        gateways = ", ".join(status.gateways) or "none"
        say(
            "connected to the RL core at %s (%s; gateways: %s; %d rollouts received, %d groups pending, %d batches ready). "
            "Waiting for a batch: it comes when a group's rollouts are finished at the gateway (a reward posted, or "
            "rlgate run's grading), as many as the core's --group-size or each rollout's declared group size"
            % (args.core, status.estimator, gateways, status.rollouts_received, status.groups_pending, status.batches_ready)
        )
        # Rows whatever the core's --layout: this example reads rows (row_info, per-row figures), not tries.
        for batch in client.batches(trainer="example-trainer", layout="rows"):
            if batch.batch_id in seen:
                client.ack([batch.batch_id])
                if not args.json:
                    print("batch %d: sent again, already trained: acked and skipped" % batch.batch_id, flush=True)
                continue
            seen.add(batch.batch_id)
            new_logprobs = recompute_logprobs(batch, rng, args.noise)
            loss = surrogate_loss(batch, new_logprobs)
            report = client.report_logprobs(batch.batch_id, new_logprobs, ack=True, importance_cap=args.importance_cap)
            overall = report["harnesses"].get("*", {})
            iw = report["importance_weights"]
            mask = batch.loss_mask.astype(bool)
            versions = sorted({c.policy_version for info in batch.row_info for c in info.calls})
            turns = [len(info.calls) for info in batch.row_info]
            overlong = sum(1 for info in batch.row_info if info.finish_reason == "length")
            lags = policy_lag(batch, args.policy_version) if args.policy_version is not None else []
            if args.json:
                print(json.dumps({
                    "batch_id": batch.batch_id,
                    "rows": batch.rows,
                    "tokens": batch.tokens,
                    "trained_tokens": int(mask.sum()),
                    "groups": batch.groups,
                    "estimator": batch.estimator,
                    "loss_agg": batch.loss_agg,
                    "loss": loss,
                    "weights_sum": float(batch.loss_weights.sum()),
                    "loss_tokens": batch.loss_tokens,
                    "rollouts": batch.rollouts,
                    "batch_unit": batch.batch_unit,
                    "policy_versions": versions,
                    "max_policy_lag": max(lags) if lags else None,
                    "overlong_rows": overlong,
                    "consistency": report["harnesses"],
                    "importance_weight_mean": float(iw[mask].mean()) if iw is not None and mask.any() else None,
                    "acked": report["acked"],
                    "row_details": [row_summary(batch, r) for r in range(batch.rows)],
                }), flush=True)
            else:
                adv = batch.advantages[mask]
                print(
                    "batch %d: %d rows of %d rollouts, %d tokens (%d trained), %d groups | adv mean %+.3f std %.3f | loss %+.5f | "
                    "policy %s%s, calls/row %.1f, overlong %d | logprobs vs inference: pearson %.4f, k3 KL %.2e, |dlogp| p50 %.4f p99 %.4f"
                    % (batch.batch_id, batch.rows, batch.rollouts, batch.tokens, int(mask.sum()), batch.groups,
                       float(adv.mean()) if adv.size else 0.0, float(adv.std()) if adv.size else 0.0, loss,
                       ",".join(v or "?" for v in versions) or "?", (" (lag <= %d)" % max(lags)) if lags else "",
                       float(np.mean(turns)) if turns else 0.0, overlong,
                       overall.get("pearson", float("nan")), overall.get("k3_kl", float("nan")),
                       overall.get("abs_diff_p50", float("nan")), overall.get("abs_diff_p99", float("nan"))),
                    flush=True,
                )
            done += 1
            if args.max_batches and done >= args.max_batches:
                break


def run():
    """The console script's entry point: an interrupt ends the loop quietly."""
    try:
        main()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    run()
