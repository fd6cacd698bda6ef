"""Python client of rlgate's RL core (grpcio + numpy)."""
from .trainer import Batch, TrainerClient
from ._protos import load as load_protos

__all__ = ["Batch", "TrainerClient", "load_protos"]
