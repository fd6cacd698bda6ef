// The Python that runs trainers unless told otherwise, one default for every command that names one: RLGATE_PYTHON,
// else Debian's /usr/bin/python3 (where apt puts grpcio, grpc-tools, numpy and torch; a `python3` first on PATH is
// often another interpreter, without them).
export const DEFAULT_PYTHON = process.env["RLGATE_PYTHON"] ?? "/usr/bin/python3";
