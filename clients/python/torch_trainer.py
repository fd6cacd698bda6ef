#!/usr/bin/env python3
"""The PyTorch closed-loop trainer (rlgate_client/torch_trainer.py), run from a checkout without installing the package.

Installed (pip install ./clients/python), the same program is `rlgate-torch-trainer`. Needs torch (Debian: python3-torch).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rlgate_client.torch_trainer import run  # noqa: E402

if __name__ == "__main__":
    run()
