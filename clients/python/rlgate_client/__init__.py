"""Python client of rlgate's RL core (grpcio + numpy)."""
from .trainer import Batch, TrainerClient, sampling
from ._protos import load as load_protos
from .versions import token_versions

__all__ = ["Batch", "TrainerClient", "load_protos", "sampling", "token_versions"]
