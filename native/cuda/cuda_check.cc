// Stand-alone check of the CUDA kernels for GPU machines that have a compiler but no Node.js:
// runs every token kernel on the CPU (native/src/kernels.cc, itself checked against the TypeScript
// reference by rl-core/kernels/native.test.ts) and on the GPU (rlgate_cuda.so, loaded the way the addon
// loads it), compares them within 1e-5, then prints a bench line. Built and run by gpu-check.sh; it
// must sit next to rlgate_cuda.so. Exit status: 0 all equal, 1 a mismatch or error, 2 no CUDA device.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../src/cuda_loader.h"
#include "../src/kernels.h"

using namespace rlgate;

namespace {

struct Batch {
  std::vector<int32_t> offsets;
  std::vector<uint8_t> mask;
  std::vector<float> rewards, values, logp_old, logp_rollout, logp_ref;
  std::vector<double> row_values;
  std::vector<int32_t> segments, index;
  int64_t rows() const { return static_cast<int64_t>(offsets.size()) - 1; }
  int64_t tokens() const { return offsets.back(); }
};

Batch make_batch(uint32_t seed, int rows, int min_len, int max_len, int mean_run, double empty_rate) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Batch b;
  b.offsets.assign(1, 0);
  for (int r = 0; r < rows; ++r) {
    int len = u(g) < empty_rate ? 0 : min_len + static_cast<int>(u(g) * (max_len - min_len + 1));
    b.offsets.push_back(b.offsets.back() + len);
  }
  const int64_t n = b.tokens();
  b.mask.resize(n);
  for (int r = 0; r < rows; ++r) {
    int on = 0, left = 0;
    for (int64_t t = b.offsets[r]; t < b.offsets[r + 1]; ++t) {
      if (left == 0) {
        on ^= 1;
        left = 1 + static_cast<int>(u(g) * 2 * mean_run);
      }
      --left;
      b.mask[t] = static_cast<uint8_t>(on ^ 1);
    }
  }
  for (int64_t t = 0; t < n; ++t) {
    b.rewards.push_back(u(g) < 0.01 ? static_cast<float>(u(g) * 2 - 1) : 0.0f);
    b.values.push_back(static_cast<float>(u(g) * 2 - 1));
    const float lp = static_cast<float>(-std::fabs(std::log(u(g) + 1e-12)) * 0.5);
    b.logp_rollout.push_back(lp);
    b.logp_old.push_back(lp + static_cast<float>((u(g) - 0.5) * 0.2));
    b.logp_ref.push_back(lp + static_cast<float>((u(g) - 0.5) * 0.4));
    b.index.push_back(static_cast<int32_t>(t % 13) - 1);
  }
  for (int r = 0; r < rows; ++r) {
    b.row_values.push_back(std::sin(r));
    b.segments.push_back(r % 4 - 1);
  }
  return b;
}

using Kernel = std::function<int(const Batch&, Exec, std::vector<float>& out)>;

std::vector<std::pair<std::string, Kernel>> kernels() {
  std::vector<std::pair<std::string, Kernel>> k;
  k.emplace_back("broadcastRows", [](const Batch& b, Exec e, std::vector<float>& o) {
    return broadcast_rows({b.offsets.data(), b.rows(), b.row_values.data(), b.mask.data(), o.data(), b.tokens()}, e);
  });
  k.emplace_back("gatherTokens", [](const Batch& b, Exec e, std::vector<float>& o) {
    static const std::vector<double> v = {-2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5};
    return gather_tokens({v.data(), static_cast<int64_t>(v.size()), b.index.data(), b.mask.data(), o.data(), b.tokens()}, e);
  });
  k.emplace_back("rowCounts", [](const Batch& b, Exec e, std::vector<float>& o) {
    std::vector<int32_t> c(b.rows());
    int s = row_counts({b.offsets.data(), b.rows(), b.mask.data(), b.tokens(), c.data()}, e);
    o.resize(b.rows());
    for (int64_t r = 0; r < b.rows(); ++r) o[r] = static_cast<float>(c[r]);
    return s;
  });
  k.emplace_back("maskedGae", [](const Batch& b, Exec e, std::vector<float>& o) {
    o.resize(2 * b.tokens());  // advantages, then returns
    return masked_gae({b.offsets.data(), b.rows(), b.rewards.data(), nullptr, b.values.data(), b.mask.data(), b.tokens(),
                       0.99, 0.95, o.data(), o.data() + b.tokens()},
                      e);
  });
  k.emplace_back("maskedGae(rowRewards)", [](const Batch& b, Exec e, std::vector<float>& o) {
    o.resize(2 * b.tokens());
    return masked_gae({b.offsets.data(), b.rows(), nullptr, b.row_values.data(), b.values.data(), b.mask.data(),
                       b.tokens(), 0.99, 0.95, o.data(), o.data() + b.tokens()},
                      e);
  });
  k.emplace_back("maskedWhiten", [](const Batch& b, Exec e, std::vector<float>& o) {
    return masked_whiten({b.offsets.data(), b.rows(), b.values.data(), b.mask.data(), b.tokens(), nullptr, 1, true, true,
                          1e-8, o.data()},
                         e);
  });
  k.emplace_back("maskedWhiten(segments)", [](const Batch& b, Exec e, std::vector<float>& o) {
    return masked_whiten({b.offsets.data(), b.rows(), b.values.data(), b.mask.data(), b.tokens(), b.segments.data(), 3,
                          false, true, 1e-8, o.data()},
                         e);
  });
  k.emplace_back("importanceWeights", [](const Batch& b, Exec e, std::vector<float>& o) {
    return importance_weights({b.logp_old.data(), b.logp_rollout.data(), b.mask.data(), b.tokens(), 1.05, o.data()}, e);
  });
  for (int kind : {RLG_K1, RLG_K2, RLG_K3}) {
    k.emplace_back("klDivergence.k" + std::to_string(kind), [kind](const Batch& b, Exec e, std::vector<float>& o) {
      return kl_divergence({b.logp_old.data(), b.logp_ref.data(), b.mask.data(), b.tokens(), kind, o.data()}, e);
    });
  }
  for (int mode = RLG_TOKEN_MEAN; mode <= RLG_SEQ_MEAN_TOKEN_SUM_NORM; ++mode) {
    k.emplace_back("lossWeights." + std::to_string(mode), [mode](const Batch& b, Exec e, std::vector<float>& o) {
      return loss_weights({b.offsets.data(), b.rows(), b.mask.data(), b.tokens(), mode, 0, 0, 0, o.data()}, e);
    });
  }
  return k;
}

int compare(const std::string& label, const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) {
    std::printf("FAIL %s: %zu values, expected %zu\n", label.c_str(), got.size(), want.size());
    return 1;
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const double a = got[i], b = want[i];
    if (std::isnan(b) ? !std::isnan(a) : !(a == b || std::fabs(a - b) <= 1e-5 * std::max(1.0, std::fabs(b)))) {
      std::printf("FAIL %s[%zu]: cuda %.9g, cpu %.9g\n", label.c_str(), i, a, b);
      return 1;
    }
  }
  return 0;
}

double best_ms(const std::function<void()>& fn, int repeat) {
  fn();
  double best = 1e300;
  for (int i = 0; i < repeat; ++i) {
    auto t = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
  }
  return best;
}

}  // namespace

int main() {
  // RLGATE_CHECK_DRY=1 puts the multi-threaded CPU path in the GPU's place, to exercise this program
  // where there is no GPU.
  const bool dry = std::getenv("RLGATE_CHECK_DRY") != nullptr && std::string(std::getenv("RLGATE_CHECK_DRY")) == "1";
  const Exec device = dry ? Exec{4, 0} : Exec{1, 1};
  std::printf("CUDA library: %s, devices: %d, CPU threads: %d\n",
              cuda_library_state() == kCudaLibraryLoaded ? "loaded" : cuda_library_state() == 0 ? "absent" : "broken",
              cuda_device_count(), hardware_threads());
  if (cuda_device_count() == 0 && !dry) {
    std::printf("no CUDA device: nothing to check\n");
    return 2;
  }
  int failures = 0;
  const struct {
    const char* name;
    uint32_t seed;
    int rows, min_len, max_len, mean_run;
    double empty;
  } shapes[] = {
      {"small ragged, empty rows", 21, 37, 0, 700, 9, 0.15},
      {"one long row", 22, 1, 300000, 300000, 50, 0},
      {"256 rows x 1k-4k", 23, 256, 1000, 4000, 120, 0},
      {"no tokens", 24, 5, 0, 0, 1, 1.0},
  };
  for (const auto& s : shapes) {
    Batch b = make_batch(s.seed, s.rows, s.min_len, s.max_len, s.mean_run, s.empty);
    for (auto& [name, run] : kernels()) {
      std::vector<float> cpu(b.tokens()), gpu(b.tokens());
      int sc = run(b, Exec{1, 0}, cpu);
      int sg = run(b, device, gpu);
      if (sc != RLG_OK || sg != RLG_OK) {
        std::printf("FAIL %s / %s: status cpu %d, cuda %d\n", s.name, name.c_str(), sc, sg);
        ++failures;
        continue;
      }
      failures += compare(std::string(s.name) + " / " + name, gpu, cpu);
    }
  }
  {
    std::vector<double> v = {1.0};
    std::vector<int32_t> idx = {0, 3};
    std::vector<float> o(2);
    int st = gather_tokens({v.data(), 1, idx.data(), nullptr, o.data(), 2}, device);
    if (st != RLG_BAD_INDEX) {
      std::printf("FAIL gather with a bad index: status %d, expected %d\n", st, RLG_BAD_INDEX);
      ++failures;
    }
  }
  {
    // gamma * lambda > 1 over a long row of zeros: every advantage is 0. The scan's chunk factor
    // (gamma * lambda)^(m-1) overflows to inf there, and must never be multiplied by a carry of 0.
    const int64_t n = 300000;
    std::vector<int32_t> offs = {0, static_cast<int32_t>(n)};
    std::vector<float> zeros(n, 0.0f), adv(n, NAN), ret(n, NAN);
    std::vector<uint8_t> all(n, 1);
    int st = masked_gae({offs.data(), 1, zeros.data(), nullptr, zeros.data(), all.data(), n, 2.0, 1.0, adv.data(), ret.data()},
                        device);
    int64_t nonzero = 0;
    for (int64_t t = 0; t < n; ++t) nonzero += adv[t] != 0.0f || ret[t] != 0.0f;
    if (st != RLG_OK || nonzero != 0) {
      std::printf("FAIL GAE with gamma * lambda = 2 over %lld zeros: status %d, %lld values not 0 (first: %g)\n",
                  static_cast<long long>(n), st, static_cast<long long>(nonzero), adv[0]);
      ++failures;
    }
  }
  std::printf("%s: CUDA kernels %s the CPU kernels\n", failures ? "FAIL" : "ok", failures ? "differ from" : "equal");
  // RLGATE_CHECK_NO_BENCH=1: the check only (the CPU emulation of the CUDA library, rl-core/kernels/cuda-emulation.test.ts).
  const char* no_bench = std::getenv("RLGATE_CHECK_NO_BENCH");
  if (no_bench != nullptr && std::string(no_bench) == "1") return failures ? 1 : 0;

  Batch big = make_batch(7, 256, 8000, 32000, 256, 0);
  const double tokens = static_cast<double>(big.tokens());
  std::printf("\nbench: %lld tokens (256 rows x 8k-32k); Mtokens/s, CUDA including host<->device copies\n",
              static_cast<long long>(big.tokens()));
  std::printf("%-22s %10s %10s %10s\n", "kernel", "cpu 1T", "cpu MT", "cuda");
  for (auto& [name, run] : kernels()) {
    if (name != "maskedGae" && name != "maskedWhiten" && name != "importanceWeights" && name != "klDivergence.k3" &&
        name != "broadcastRows")
      continue;
    std::vector<float> out(big.tokens());
    auto rate = [&](Exec e) { return tokens / best_ms([&] { run(big, e, out); }, 3) / 1e3; };
    std::printf("%-22s %10.0f %10.0f %10.0f\n", name.c_str(), rate(Exec{1, 0}), rate(Exec{0, 0}), rate(device));
  }
  return failures ? 1 : 0;
}
