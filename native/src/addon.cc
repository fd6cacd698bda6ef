// N-API shims: unpack TypedArrays and numbers, call the plain C++ kernels (kernels.h), return the status.
// Every kernel `name` is exported twice: `name(...)` runs on the calling thread and returns a status
// number; `nameAsync(...)` runs on the libuv pool (std::threads inside) and returns a Promise of one.
// The async variant holds references to its arrays until it settles; callers must not touch them meanwhile.
// Only TypedArrays and numbers cross; errors are status codes, turned into exceptions by the TypeScript
// loader (rl-core/kernels/index.ts). Built with NAPI_DISABLE_CPP_EXCEPTIONS.
#include <napi.h>

#include <string>
#include <utility>
#include <vector>

#include "cuda_loader.h"
#include "kernels.h"
#include "vec_math.h"

namespace {

using Keep = std::vector<Napi::ObjectReference>;

class Args {
 public:
  Args(const Napi::CallbackInfo& info, Keep* keep) : info_(info), keep_(keep) {}

  // The next argument as a TypedArray of `type`; `len` gets its element count (-1 for an allowed null).
  template <class T>
  T* array(napi_typedarray_type type, int64_t* len, bool nullable = false) {
    Napi::Value v = info_[next_++];
    *len = -1;
    if (nullable && (v.IsNull() || v.IsUndefined())) return nullptr;
    if (!v.IsTypedArray()) return fail<T>();
    napi_typedarray_type actual;
    size_t length = 0;
    void* data = nullptr;
    // The C call, not TypedArray::ArrayBuffer(): it also serves arrays over a SharedArrayBuffer.
    if (napi_get_typedarray_info(info_.Env(), v, &actual, &length, &data, nullptr, nullptr) != napi_ok) return fail<T>();
    if (actual != type) return fail<T>();
    *len = static_cast<int64_t>(length);
    if (keep_ != nullptr) keep_->push_back(Napi::Persistent(v.As<Napi::Object>()));
    return static_cast<T*>(data);
  }

  double number() {
    Napi::Value v = info_[next_++];
    if (!v.IsNumber()) {
      ok_ = false;
      return 0.0;
    }
    return v.As<Napi::Number>().DoubleValue();
  }

  int64_t integer() { return static_cast<int64_t>(number()); }

  rlgate::Exec exec() {
    rlgate::Exec e;
    e.threads = static_cast<int>(integer());
    e.device = static_cast<int>(integer());
    if (e.device != 0 && e.device != 1) ok_ = false;
    return e;
  }

  bool ok() const { return ok_; }

 private:
  template <class T>
  T* fail() {
    ok_ = false;
    return nullptr;
  }

  const Napi::CallbackInfo& info_;
  Keep* keep_;
  size_t next_ = 0;
  bool ok_ = true;
};

// A mask may be null (all ones) or must match the token count.
bool mask_fits(int64_t mask_len, int64_t tokens) { return mask_len == -1 || mask_len == tokens; }

struct GroupStatsKernel {
  rlgate::GroupStatsArgs a{};
  bool Parse(Args& p) {
    int64_t nv, ng, nw, c, m, s, wm;
    a.values = p.array<double>(napi_float64_array, &nv);
    a.group_ids = p.array<int32_t>(napi_int32_array, &ng);
    a.weights = p.array<double>(napi_float64_array, &nw, true);
    a.num_groups = p.integer();
    a.out_count = p.array<int32_t>(napi_int32_array, &c);
    a.out_mean = p.array<double>(napi_float64_array, &m);
    a.out_std = p.array<double>(napi_float64_array, &s);
    a.out_weighted_mean = p.array<double>(napi_float64_array, &wm);
    a.rows = nv;
    return p.ok() && ng == nv && mask_fits(nw, nv) && c == a.num_groups && m == c && s == c && wm == c;
  }
  int Run() { return rlgate::group_stats(a); }
};

struct BroadcastRowsKernel {
  rlgate::BroadcastRowsArgs a{};
  rlgate::Exec e;
  bool Parse(Args& p) {
    int64_t no, nr, nm, nout;
    a.offsets = p.array<int32_t>(napi_int32_array, &no);
    a.row_values = p.array<double>(napi_float64_array, &nr);
    a.mask = p.array<uint8_t>(napi_uint8_array, &nm, true);
    a.out = p.array<float>(napi_float32_array, &nout);
    e = p.exec();
    a.rows = no - 1;
    a.tokens = nout;
    return p.ok() && no >= 1 && nr == a.rows && mask_fits(nm, nout);
  }
  int Run() { return rlgate::broadcast_rows(a, e); }
};

struct GatherTokensKernel {
  rlgate::GatherTokensArgs a{};
  rlgate::Exec e;
  bool Parse(Args& p) {
    int64_t nv, ni, nm, nout;
    a.values = p.array<double>(napi_float64_array, &nv);
    a.index = p.array<int32_t>(napi_int32_array, &ni);
    a.mask = p.array<uint8_t>(napi_uint8_array, &nm, true);
    a.out = p.array<float>(napi_float32_array, &nout);
    e = p.exec();
    a.num_values = nv;
    a.tokens = nout;
    return p.ok() && ni == nout && mask_fits(nm, nout);
  }
  int Run() { return rlgate::gather_tokens(a, e); }
};

struct RowCountsKernel {
  rlgate::RowCountsArgs a{};
  rlgate::Exec e;
  bool Parse(Args& p) {
    int64_t no, nm, nout;
    a.offsets = p.array<int32_t>(napi_int32_array, &no);
    a.mask = p.array<uint8_t>(napi_uint8_array, &nm);
    a.out = p.array<int32_t>(napi_int32_array, &nout);
    e = p.exec();
    a.rows = no - 1;
    a.tokens = nm;
    return p.ok() && no >= 1 && nout == a.rows;
  }
  int Run() { return rlgate::row_counts(a, e); }
};

struct GaeKernel {
  rlgate::GaeArgs a{};
  rlgate::Exec e;
  bool Parse(Args& p) {
    int64_t no, nr, nrr, nv, nm, na, nret;
    a.offsets = p.array<int32_t>(napi_int32_array, &no);
    a.rewards = p.array<float>(napi_float32_array, &nr, true);
    a.row_rewards = p.array<double>(napi_float64_array, &nrr, true);
    a.values = p.array<float>(napi_float32_array, &nv);
    a.mask = p.array<uint8_t>(napi_uint8_array, &nm);
    a.gamma = p.number();
    a.lambda = p.number();
    a.out_advantages = p.array<float>(napi_float32_array, &na);
    a.out_returns = p.array<float>(napi_float32_array, &nret);
    e = p.exec();
    a.rows = no - 1;
    a.tokens = nv;
    return p.ok() && no >= 1 && (nr == -1 || nr == nv) && (nrr == -1 || nrr == a.rows) && nm == nv && na == nv &&
           nret == nv;
  }
  int Run() { return rlgate::masked_gae(a, e); }
};

struct WhitenKernel {
  rlgate::WhitenArgs a{};
  rlgate::Exec e;
  bool Parse(Args& p) {
    int64_t no, nx, nm, ns, nout;
    a.offsets = p.array<int32_t>(napi_int32_array, &no);
    a.x = p.array<float>(napi_float32_array, &nx);
    a.mask = p.array<uint8_t>(napi_uint8_array, &nm);
    a.row_segment = p.array<int32_t>(napi_int32_array, &ns, true);
    a.num_segments = p.integer();
    a.shift_mean = p.number() != 0.0;
    a.unbiased = p.number() != 0.0;
    a.eps = p.number();
    a.out = p.array<float>(napi_float32_array, &nout);
    e = p.exec();
    a.rows = no - 1;
    a.tokens = nx;
    return p.ok() && no >= 1 && nm == nx && nout == nx && (ns == -1 || ns == a.rows);
  }
  int Run() { return rlgate::masked_whiten(a, e); }
};

struct TreeValuesKernel {
  rlgate::TreeValuesArgs a{};
  bool Parse(Args& p) {
    int64_t np, nl, nr, nv, nc;
    a.parent = p.array<int32_t>(napi_int32_array, &np);
    a.leaf_node = p.array<int32_t>(napi_int32_array, &nl);
    a.leaf_reward = p.array<double>(napi_float64_array, &nr);
    a.out_value = p.array<double>(napi_float64_array, &nv);
    a.out_leaf_count = p.array<int32_t>(napi_int32_array, &nc);
    a.nodes = np;
    a.leaves = nl;
    return p.ok() && nr == nl && nv == np && nc == np;
  }
  int Run() { return rlgate::tree_node_values(a); }
};

struct ImportanceKernel {
  rlgate::ImportanceArgs a{};
  rlgate::Exec e;
  bool Parse(Args& p) {
    int64_t n1, n2, nm, nout;
    a.logp_old = p.array<float>(napi_float32_array, &n1);
    a.logp_rollout = p.array<float>(napi_float32_array, &n2);
    a.mask = p.array<uint8_t>(napi_uint8_array, &nm, true);
    a.cap = p.number();
    a.out = p.array<float>(napi_float32_array, &nout);
    e = p.exec();
    a.tokens = n1;
    return p.ok() && n2 == n1 && nout == n1 && mask_fits(nm, n1);
  }
  int Run() { return rlgate::importance_weights(a, e); }
};

struct KlKernel {
  rlgate::KlArgs a{};
  rlgate::Exec e;
  bool Parse(Args& p) {
    int64_t n1, n2, nm, nout;
    a.logp = p.array<float>(napi_float32_array, &n1);
    a.logp_ref = p.array<float>(napi_float32_array, &n2);
    a.mask = p.array<uint8_t>(napi_uint8_array, &nm, true);
    a.kind = static_cast<int>(p.integer());
    a.out = p.array<float>(napi_float32_array, &nout);
    e = p.exec();
    a.tokens = n1;
    return p.ok() && n2 == n1 && nout == n1 && mask_fits(nm, n1);
  }
  int Run() { return rlgate::kl_divergence(a, e); }
};

struct LossWeightsKernel {
  rlgate::LossWeightsArgs a{};
  rlgate::Exec e;
  bool Parse(Args& p) {
    int64_t no, nm, nout;
    a.offsets = p.array<int32_t>(napi_int32_array, &no);
    a.mask = p.array<uint8_t>(napi_uint8_array, &nm);
    a.mode = static_cast<int>(p.integer());
    a.max_len = p.number();
    a.total_tokens = p.number();
    a.total_seqs = p.number();
    a.out = p.array<float>(napi_float32_array, &nout);
    e = p.exec();
    a.rows = no - 1;
    a.tokens = nm;
    return p.ok() && no >= 1 && nout == nm;
  }
  int Run() { return rlgate::loss_weights(a, e); }
};

template <class K>
Napi::Value RunSync(const Napi::CallbackInfo& info) {
  K k;
  Args p(info, nullptr);
  int status = k.Parse(p) ? k.Run() : RLG_BAD_ARGUMENT;
  return Napi::Number::New(info.Env(), status);
}

template <class K>
class KernelWorker : public Napi::AsyncWorker {
 public:
  KernelWorker(Napi::Env env, K kernel, Keep keep)
      : Napi::AsyncWorker(env, "rlgate:kernel"),
        deferred_(Napi::Promise::Deferred::New(env)),
        kernel_(kernel),
        keep_(std::move(keep)) {}

  Napi::Promise Promise() const { return deferred_.Promise(); }

 protected:
  void Execute() override { status_ = kernel_.Run(); }
  void OnOK() override { deferred_.Resolve(Napi::Number::New(Env(), status_)); }

 private:
  Napi::Promise::Deferred deferred_;
  K kernel_;
  Keep keep_;  // keeps the arrays (and their memory) alive while the worker runs
  int status_ = RLG_OK;
};

template <class K>
Napi::Value RunAsync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Keep keep;
  K k;
  Args p(info, &keep);
  if (!k.Parse(p)) {
    auto d = Napi::Promise::Deferred::New(env);
    d.Resolve(Napi::Number::New(env, RLG_BAD_ARGUMENT));
    return d.Promise();
  }
  auto* worker = new KernelWorker<K>(env, k, std::move(keep));
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

Napi::Value Info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("hardwareThreads", Napi::Number::New(env, rlgate::hardware_threads()));
  o.Set("cudaLibrary", Napi::Number::New(env, rlgate::cuda_library_state()));
  o.Set("abi", Napi::Number::New(env, 2));  // 2: maskedGae takes (rewards | null, rowRewards | null)
  static const char* const kIsaNames[] = {"base", "avx2", "avx512"};  // rlgate::SimdIsa
  o.Set("simd", Napi::String::New(env, kIsaNames[rlgate::simd_isa()]));
  return o;
}

// Probes the driver (slow on first call where a GPU exists), so it is separate from Info.
Napi::Value CudaDeviceCount(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), rlgate::cuda_device_count());
}

template <class K>
void Export(Napi::Env env, Napi::Object exports, const char* name) {
  exports.Set(name, Napi::Function::New(env, RunSync<K>, name));
  std::string async_name = std::string(name) + "Async";
  exports.Set(async_name, Napi::Function::New(env, RunAsync<K>, async_name));
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  Export<GroupStatsKernel>(env, exports, "groupStats");
  Export<BroadcastRowsKernel>(env, exports, "broadcastRows");
  Export<GatherTokensKernel>(env, exports, "gatherTokens");
  Export<RowCountsKernel>(env, exports, "rowCounts");
  Export<GaeKernel>(env, exports, "maskedGae");
  Export<WhitenKernel>(env, exports, "maskedWhiten");
  Export<TreeValuesKernel>(env, exports, "treeNodeValues");
  Export<ImportanceKernel>(env, exports, "importanceWeights");
  Export<KlKernel>(env, exports, "klDivergence");
  Export<LossWeightsKernel>(env, exports, "lossWeights");
  exports.Set("info", Napi::Function::New(env, Info, "info"));
  exports.Set("cudaDeviceCount", Napi::Function::New(env, CudaDeviceCount, "cudaDeviceCount"));
  return exports;
}

}  // namespace

NODE_API_MODULE(rlgate_native, Init)
