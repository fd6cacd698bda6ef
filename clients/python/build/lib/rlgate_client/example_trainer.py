"""An example trainer loop against an RL core: pull batches, "recompute" logprobs, report them, print figures.

There is no model here: the recomputed logprobs are the inference server's plus seeded noise (--noise), a
stand-in for a forward pass. With a real policy, replace `recompute_logprobs`. The loss shown is the usual
clipped policy-gradient surrogate at ratio exp(new - old), aggregated by the core's per-token loss weights:
    loss = sum(loss_weights * -min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A))

Run:  rlgate-example-trainer --core 127.0.0.1:8702        (after pip install ./clients/python)
      python3 clients/python/example_trainer.py --core …    (from a checkout)
"""
import argparse
import hashlib
import json
import os

import numpy as np

from .trainer import TrainerClient


def recompute_logprobs(batch, rng, noise):
    return batch.logprobs + rng.normal(0.0, noise, size=batch.tokens).astype(np.float32)


def surrogate_loss(batch, new_logprobs, clip=0.2):
    mask = batch.loss_mask.astype(bool)
    ratio = np.exp(np.where(mask, new_logprobs - batch.logprobs, 0.0))
    a = batch.advantages
    per_token = -np.minimum(ratio * a, np.clip(ratio, 1 - clip, 1 + clip) * a)
    return float(np.sum(batch.loss_weights * np.where(mask, per_token, 0.0)))


def row_summary(batch, r):
    s = batch.row(r)
    mask = batch.loss_mask[s].astype(bool)
    adv = batch.advantages[s][mask]
    info = batch.row_info[r]
    return {
        "rollout_id": info.rollout_id,
        "trajectory_id": info.trajectory_id,
        "group": info.group,
        "harness": info.harness,
        "reward": info.reward,
        "tokens": int(s.stop - s.start),
        "trained": int(mask.sum()),
        "adv_min": float(adv.min()) if adv.size else 0.0,
        "adv_max": float(adv.max()) if adv.size else 0.0,
        "adv_masked_out_max_abs": float(np.abs(batch.advantages[s][~mask]).max()) if (~mask).any() else 0.0,
        "weight_sum": float(batch.loss_weights[s].sum()),
        "tokens_sha256": hashlib.sha256(batch.token_ids[s].tobytes()).hexdigest(),
        "mask_sha256": hashlib.sha256(batch.loss_mask[s].tobytes()).hexdigest(),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--core", default="127.0.0.1:8702", help="the RL core's trainer service (host:port)")
    p.add_argument("--token", default=os.environ.get("RLGATE_CORE_TOKEN"))
    p.add_argument("--max-batches", type=int, default=0, help="stop after this many batches (0: run until interrupted)")
    p.add_argument("--noise", type=float, default=0.01, help="std of the stand-in model's logprob noise")
    p.add_argument("--importance-cap", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="one JSON line per batch, rows included")
    p.add_argument("--tls-ca", help="PEM CA the core's certificate is checked against (TLS; beyond loopback default: system roots)")
    p.add_argument("--tls-cert", help="PEM client certificate, for a core that requires one (mutual TLS)")
    p.add_argument("--tls-key", help="PEM private key of --tls-cert")
    p.add_argument("--tls-server-name", help="name the core's certificate is checked for, when not the host dialed")
    p.add_argument("--insecure", action="store_true", help="plaintext even beyond loopback")
    args = p.parse_args()

    rng = np.random.default_rng(args.seed)
    done = 0
    tls = dict(tls_ca=args.tls_ca, tls_cert=args.tls_cert, tls_key=args.tls_key, tls_server_name=args.tls_server_name)
    with TrainerClient(args.core, token=args.token, insecure=args.insecure, **tls) as client:
        for batch in client.batches(trainer="example-trainer"):
            new_logprobs = recompute_logprobs(batch, rng, args.noise)
            loss = surrogate_loss(batch, new_logprobs)
            report = client.report_logprobs(batch.batch_id, new_logprobs, ack=True, importance_cap=args.importance_cap)
            overall = report["harnesses"].get("*", {})
            iw = report["importance_weights"]
            mask = batch.loss_mask.astype(bool)
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
                    "consistency": report["harnesses"],
                    "importance_weight_mean": float(iw[mask].mean()) if iw is not None and mask.any() else None,
                    "acked": report["acked"],
                    "row_details": [row_summary(batch, r) for r in range(batch.rows)],
                }), flush=True)
            else:
                adv = batch.advantages[mask]
                print(
                    "batch %d: %d rows, %d tokens (%d trained), %d groups | adv mean %+.3f std %.3f | loss %+.5f | "
                    "logprobs vs inference: pearson %.4f, k3 KL %.2e, |dlogp| p50 %.4f p99 %.4f"
                    % (batch.batch_id, batch.rows, batch.tokens, int(mask.sum()), batch.groups,
                       float(adv.mean()) if adv.size else 0.0, float(adv.std()) if adv.size else 0.0, loss,
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
