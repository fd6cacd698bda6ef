#include "cuda_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <mutex>
#include <string>

namespace rlgate {
namespace {

CudaApi g_api;
int g_state = kCudaLibraryAbsent;
int g_devices = -1;
std::once_flag g_load_once;
std::once_flag g_probe_once;

std::string library_path() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&cuda_library_state), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string self(info.dli_fname);
  auto slash = self.rfind('/');
  return (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) + "/rlgate_cuda.so";
}

template <class T>
bool resolve(void* lib, const char* name, T& slot) {
  slot = reinterpret_cast<T>(dlsym(lib, name));
  return slot != nullptr;
}

void load() {
  std::string path = library_path();
  if (path.empty()) return;
  if (access(path.c_str(), F_OK) != 0) return;  // not built here (no nvcc): CPU only
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    // Built but not loadable here (e.g. a glibc older than the build machine's): CPU only, reported as broken.
    g_state = kCudaLibraryBroken;
    return;
  }
  decltype(&rlg_cuda_abi_version) abi = nullptr;
  bool ok = resolve(lib, "rlg_cuda_abi_version", abi) && abi() == RLG_CUDA_ABI_VERSION &&
            resolve(lib, "rlg_cuda_device_count", g_api.device_count) &&
            resolve(lib, "rlg_cuda_broadcast_rows", g_api.broadcast_rows) &&
            resolve(lib, "rlg_cuda_gather_tokens", g_api.gather_tokens) &&
            resolve(lib, "rlg_cuda_row_counts", g_api.row_counts) &&
            resolve(lib, "rlg_cuda_masked_gae", g_api.masked_gae) &&
            resolve(lib, "rlg_cuda_masked_whiten", g_api.masked_whiten) &&
            resolve(lib, "rlg_cuda_importance_weights", g_api.importance_weights) &&
            resolve(lib, "rlg_cuda_kl", g_api.kl);
  g_state = ok ? kCudaLibraryLoaded : kCudaLibraryBroken;
}

}  // namespace

const CudaApi* cuda_api() {
  std::call_once(g_load_once, load);
  return g_state == kCudaLibraryLoaded ? &g_api : nullptr;
}

int cuda_library_state() {
  std::call_once(g_load_once, load);
  return g_state;
}

int cuda_device_count() {
  std::call_once(g_probe_once, [] {
    const CudaApi* api = cuda_api();
    g_devices = api == nullptr ? 0 : api->device_count();
  });
  return g_devices;
}

}  // namespace rlgate
