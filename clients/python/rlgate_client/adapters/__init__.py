"""Served batches as the tensors verl, OpenRLHF and TRL train on (docs/trainers.md).

NumPy at import; torch when tensors are asked for (as_numpy=False, the default); a framework only when its own
object is asked for (to_verl(as_dataproto=True), to_openrlhf(as_experience=True)).
"""
from ._layout import PER_TOKEN_FIELDS, Layout, group_uid, side_arrays
from .openrlhf import to_openrlhf
from .trl import to_trl
from .verl import agent_loop_output, to_verl

__all__ = ["PER_TOKEN_FIELDS", "Layout", "agent_loop_output", "group_uid", "side_arrays", "to_openrlhf", "to_trl", "to_verl"]
