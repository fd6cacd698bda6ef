"""The policy version of each token of a training batch, in either layout (docs/weight-updates.md).

A call's CallInfo carries ``version_runs`` when a weight update fell inside its answer: runs over its trained
(loss-mask 1) tokens in order; every other token of a call has the call's ``policy_version``. Context tokens
(call index -1) have none (None). The same rule as the TypeScript client's ``tokenVersions``.
"""
from typing import List, Optional


def token_versions(batch) -> List[Optional[str]]:
    n = len(batch.token_ids)
    out: List[Optional[str]] = [None] * n
    tree = batch.layout == "tree"
    offsets = batch.offsets
    row = 0
    seen = {}
    for t in range(n):
        c = int(batch.call_index[t])
        if c < 0:
            continue
        if tree:
            r = int(batch.token_rows[t])
        else:
            while row + 1 < len(offsets) - 1 and t >= int(offsets[row + 1]):
                row += 1
            r = row
        calls = batch.row_info[r].calls
        if c >= len(calls):
            continue
        call = calls[c]
        runs = list(call.version_runs)
        if not runs or int(batch.loss_mask[t]) != 1:
            out[t] = call.policy_version
            continue
        # A call's runs are over its trained tokens in the row that trains them (the core writes them so per row):
        # in `tree` a trained token's row is the one it takes its fields from (token_rows), in depth-first order.
        key = (r, c)
        k = seen.get(key, 0)
        seen[key] = k + 1
        version = runs[0].version
        for run in runs:
            if run.start <= k:
                version = run.version
        out[t] = version
    return out
