#!/usr/bin/env python3
"""The example trainer (rlgate_client/example_trainer.py), run from a checkout without installing the package.

Installed (pip install ./clients/python), the same program is `rlgate-example-trainer`.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rlgate_client.example_trainer import run  # noqa: E402

if __name__ == "__main__":
    run()
