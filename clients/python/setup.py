"""Builds the generated gRPC modules into the package (rlgate/v1/*_pb2.py, *_pb2_grpc.py) with grpc_tools.protoc, and
declares the protobuf and grpcio releases those modules load with.

The .proto files are read from ../../proto (the checkout this folder is part of) or RLGATE_PROTO_DIR. Nothing
generated is committed, and nothing is generated at first use: an installed client imports what was built here.

Why the dependencies are computed: the generated code is only as old as the grpcio-tools that built it. pip's
isolated build takes the newest grpcio-tools from the index, whose modules refuse an older protobuf or grpcio at
import (`cannot import name 'runtime_version'`, `grpcio>=1.84 required`); a build with --no-build-isolation uses the
environment's own grpc_tools, whose modules fit the environment's protobuf. Either way, the wheel requires what its
modules check for, so pip installs a protobuf and grpcio they load with, or says at install time that it cannot.
"""
import atexit
import importlib.util
import os
import re
import shutil
import tempfile

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
    try:
        protos.protoc(root, out)
    except ImportError as error:
        raise SystemExit(
            "rlgate-client: building needs grpcio-tools (%s); with --no-build-isolation install it first "
            "(Debian: apt-get install python3-grpc-tools)" % error
        )
    for package in ("rlgate", os.path.join("rlgate", "v1")):
        init = os.path.join(out, package, "__init__.py")
        if not os.path.exists(init):
            with open(init, "w") as f:
                f.write('"""Generated from rlgate\'s proto/ when rlgate-client was built."""\n')


def requirements(out):
    """The protobuf and grpcio the modules generated into `out` load with, read from the checks they make."""
    protos = _protos()
    text = ""
    for module in protos.MODULES:
        with open(os.path.join(out, "rlgate", "v1", module + ".py")) as f:
            text += f.read()
    runtime = re.search(r"ValidateProtobufRuntimeVersion\(\s*[\w.]+,\s*(\d+),\s*(\d+),\s*(\d+),", text)
    if runtime:
        protobuf = "protobuf>=%s.%s.%s" % runtime.groups()
    else:
        # Code from a grpcio-tools older than protobuf 5.26 checks nothing, and a later protobuf major refuses it
        # ("Descriptors cannot be created directly"): the major of the protobuf it was built beside.
        from google.protobuf import __version__ as built_with

        protobuf = "protobuf>=%s,<%d" % (built_with, int(built_with.split(".")[0]) + 1)
    grpc = re.search(r"GRPC_GENERATED_VERSION = '([\d.]+)'", text)
    return [protobuf, "grpcio>=%s" % grpc.group(1) if grpc else "grpcio", "numpy"]


# Generated once per run of this script: the metadata step (dependencies) and the build step (the files) use the same.
GENERATED = tempfile.mkdtemp(prefix="rlgate-client-build.")
atexit.register(shutil.rmtree, GENERATED, True)
generate(GENERATED)


class BuildPyWithProtos(build_py):
    """build_py, then the generated modules next to the package in the build folder (the wheel takes all of it)."""

    def run(self):
        super().run()
        shutil.copytree(os.path.join(GENERATED, "rlgate"), os.path.join(self.build_lib, "rlgate"), dirs_exist_ok=True)


setup(cmdclass={"build_py": BuildPyWithProtos}, install_requires=requirements(GENERATED))
