// Status codes shared by the C++ kernels, the CUDA library and rl-core/kernels/errors.ts.
// Kernels never throw: they return one of these, and the TypeScript side turns it into an error in one place.
#ifndef RLGATE_STATUS_H
#define RLGATE_STATUS_H

enum RlgStatus {
  RLG_OK = 0,
  RLG_BAD_ARGUMENT = 1,     // wrong type, length or value of an argument
  RLG_BAD_OFFSETS = 2,      // row offsets not 0-based, not non-decreasing, or not ending at the token count
  RLG_BAD_INDEX = 3,        // a group, segment, node or leaf index out of range
  RLG_BAD_TREE = 4,         // parent[i] must be -1 or < i (nodes in topological order)
  RLG_BAD_MODE = 5,         // unknown loss-aggregation mode or KL kind
  RLG_CUDA_UNAVAILABLE = 6, // device = CUDA asked for, but no CUDA library or no device
  RLG_CUDA_ERROR = 7,       // a CUDA runtime call failed
  RLG_OUT_OF_MEMORY = 8,
};

// Loss-aggregation modes (verl's loss_agg_mode names).
enum RlgLossMode {
  RLG_TOKEN_MEAN = 0,
  RLG_SEQ_MEAN_TOKEN_MEAN = 1,
  RLG_SEQ_MEAN_TOKEN_SUM = 2,
  RLG_SEQ_MEAN_TOKEN_SUM_NORM = 3,
};

// KL estimators (Schulman, "Approximating KL divergence", 2020).
enum RlgKlKind { RLG_K1 = 1, RLG_K2 = 2, RLG_K3 = 3 };

#endif
