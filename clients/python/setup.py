"""Builds the generated gRPC modules into the package (rlgate/v1/*_pb2.py, *_pb2_grpc.py) with grpc_tools.protoc.

The .proto files are read from ../../proto (the checkout this folder is part of) or RLGATE_PROTO_DIR. Nothing
generated is committed, and nothing is generated at first use: an installed client imports what was built here.
"""
import importlib.util
import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def _protos():
    """rlgate_client/_protos.py alone (the package's __init__ needs numpy, which building does not)."""
    spec = importlib.util.spec_from_file_location("_rlgate_protos", os.path.join(HERE, "rlgate_client", "_protos.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generate(out):
    protos = _protos()
    root = os.environ.get("RLGATE_PROTO_DIR") or os.path.normpath(os.path.join(HERE, "..", "..", "proto"))
    missing = [f for f in protos.PROTO_FILES if not os.path.isfile(os.path.join(root, f))]
    if missing:
        raise SystemExit(
            "rlgate-client: cannot find %s under %s; build from an rlgate checkout (pip install ./clients/python) "
            "or set RLGATE_PROTO_DIR to its proto/ folder" % (", ".join(missing), root)
        )
    protos.protoc(root, out)
    for package in ("rlgate", os.path.join("rlgate", "v1")):
        init = os.path.join(out, package, "__init__.py")
        if not os.path.exists(init):
            with open(init, "w") as f:
                f.write('"""Generated from rlgate\'s proto/ when rlgate-client was built."""\n')


class BuildPyWithProtos(build_py):
    """build_py, then the generated modules next to the package in the build folder (the wheel takes all of it)."""

    def run(self):
        super().run()
        generate(self.build_lib)


setup(cmdclass={"build_py": BuildPyWithProtos})
