// The numeric kernels as plain C++ functions: no napi.h here, so they can be tested, benchmarked and
// called from the N-API shims (addon.cc) alike. Every function validates what it reads and returns an
// RlgStatus; none throws and none allocates what the caller sees.
//
// Ragged batches: `offsets` has rows + 1 entries, offsets[0] == 0, non-decreasing, offsets[rows] == tokens;
// row r owns tokens [offsets[r], offsets[r + 1]). Row-level values are double, token-level values float.
// `threads` <= 1 runs on the calling thread; `device` 0 = CPU, 1 = CUDA (token-level kernels only).
#ifndef RLGATE_KERNELS_H
#define RLGATE_KERNELS_H

#include <cstdint>

#include "status.h"

namespace rlgate {

struct Exec {
  int threads = 1;
  int device = 0;
};

int check_offsets(const int32_t* offsets, int64_t rows, int64_t tokens);

// Per-group count, mean, unbiased std (0 when count < 2) and weighted mean (sum w*x / sum w; equals the
// mean when weights is null; 0 when the weights sum to 0). Rows with group id -1 are skipped.
struct GroupStatsArgs {
  const double* values;
  const int32_t* group_ids;
  const double* weights;  // nullable
  int64_t rows;
  int64_t num_groups;
  int32_t* out_count;
  double* out_mean;
  double* out_std;
  double* out_weighted_mean;
};
int group_stats(const GroupStatsArgs& a);

// out[t] = mask[t] ? row_values[row(t)] : 0 (mask nullable = all ones).
struct BroadcastRowsArgs {
  const int32_t* offsets;
  int64_t rows;
  const double* row_values;
  const uint8_t* mask;
  float* out;
  int64_t tokens;
};
int broadcast_rows(const BroadcastRowsArgs& a, Exec e);

// out[t] = mask[t] && index[t] >= 0 ? values[index[t]] : 0.
struct GatherTokensArgs {
  const double* values;
  int64_t num_values;
  const int32_t* index;
  const uint8_t* mask;
  float* out;
  int64_t tokens;
};
int gather_tokens(const GatherTokensArgs& a, Exec e);

// out[r] = number of tokens of row r with mask 1.
struct RowCountsArgs {
  const int32_t* offsets;
  int64_t rows;
  const uint8_t* mask;
  int64_t tokens;
  int32_t* out;
};
int row_counts(const RowCountsArgs& a, Exec e);

// GAE as a reverse scan per row that skips mask-0 tokens: they neither consume nor break the recurrence.
// For mask-1 tokens t, with t' the next mask-1 token of the row (V = 0, A = 0 past the last one):
//   delta_t = r_t + gamma * V(t') - V(t);  A_t = delta_t + gamma * lambda * A(t');  R_t = A_t + V(t).
// Mask-0 tokens get A = R = 0 and their rewards are ignored. r_t is rewards[t] (nullable: 0), plus, at each
// row's last mask-1 token, row_rewards[row] (nullable: none), summed in double.
struct GaeArgs {
  const int32_t* offsets;
  int64_t rows;
  const float* rewards;
  const double* row_rewards;
  const float* values;
  const uint8_t* mask;
  int64_t tokens;
  double gamma;
  double lambda;
  float* out_advantages;
  float* out_returns;
};
int masked_gae(const GaeArgs& a, Exec e);

// Masked whitening per segment (row_segment nullable = one segment; -1 = row left out, output 0):
// out = (x - mean) / sqrt(var + eps) (+ mean when !shift_mean) on mask-1 tokens, 0 elsewhere.
// var is the unbiased variance (n - 1) when `unbiased`, else the population variance; 0 when n < 2.
struct WhitenArgs {
  const int32_t* offsets;
  int64_t rows;
  const float* x;
  const uint8_t* mask;
  int64_t tokens;
  const int32_t* row_segment;
  int64_t num_segments;
  bool shift_mean;
  bool unbiased;
  double eps;
  float* out;
};
int masked_whiten(const WhitenArgs& a, Exec e);

// Mean leaf reward under every node of a forest. parent[i] is -1 (a root) or < i. leaf_node[k] is the node
// where leaf k's reward enters (-1 = skipped). out_value[i] = 0 where no leaf lies under node i.
struct TreeValuesArgs {
  const int32_t* parent;
  int64_t nodes;
  const int32_t* leaf_node;
  const double* leaf_reward;
  int64_t leaves;
  double* out_value;
  int32_t* out_leaf_count;
};
int tree_node_values(const TreeValuesArgs& a);

// out = mask ? min(exp(logp_old - logp_rollout), cap) : 0.
struct ImportanceArgs {
  const float* logp_old;
  const float* logp_rollout;
  const uint8_t* mask;
  int64_t tokens;
  double cap;
  float* out;
};
int importance_weights(const ImportanceArgs& a, Exec e);

// Per-token KL(pi || ref) estimators from logp (policy) and logp_ref:
//   k1 = logp - ref;  k2 = (logp - ref)^2 / 2;  k3 = exp(d) - d - 1 with d = clamp(ref - logp, -20, 20),
//   clamped to [-10, 10] (as verl's low_var_kl). Mask-0 tokens get 0.
struct KlArgs {
  const float* logp;
  const float* logp_ref;
  const uint8_t* mask;
  int64_t tokens;
  int kind;
  float* out;
};
int kl_divergence(const KlArgs& a, Exec e);

// Per-token loss weights w such that sum_t w_t * loss_t equals verl's agg_loss(loss, mask, mode) on the
// batch; see rl-core/kernels/README.md. Zero overrides mean "from this batch".
struct LossWeightsArgs {
  const int32_t* offsets;
  int64_t rows;
  const uint8_t* mask;
  int64_t tokens;
  int mode;
  double max_len;
  double total_tokens;
  double total_seqs;
  float* out;
};
int loss_weights(const LossWeightsArgs& a, Exec e);

int hardware_threads();

// The instruction set the CPU kernels run with (vec_math.h's SimdIsa: 0 baseline x86-64 / other
// architectures, 1 AVX2, 2 AVX-512): the CPU's best, capped by RLGATE_SIMD=avx2|base. Fixed per process.
int simd_isa();

}  // namespace rlgate

#endif
