{
  "targets": [
    {
      "target_name": "rlgate_native",
      "sources": ["src/addon.cc", "src/kernels.cc", "src/cuda_loader.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_DISABLE_CPP_EXCEPTIONS", "NAPI_VERSION=8"],
      "cflags!": ["-O2"],
      "cflags_cc!": ["-O2", "-std=gnu++17"],
      "cflags": ["-O3"],
      "cflags_cc": ["-O3", "-std=c++17", "-fopenmp-simd", "-ffp-contract=off", "-fno-trapping-math", "-fvisibility=hidden", "-Wno-psabi"],
      "libraries": ["-ldl", "-lpthread"],
      "xcode_settings": {
        "GCC_OPTIMIZATION_LEVEL": "3",
        "OTHER_CPLUSPLUSFLAGS": ["-std=c++17", "-ffp-contract=off"]
      }
    },
    {
      "target_name": "rlgate_cuda",
      "type": "none",
      "conditions": [
        ["OS=='linux'", {
          "actions": [
            {
              "action_name": "nvcc",
              "inputs": ["cuda/kernels.cu", "cuda/build.sh", "src/cuda_api.h", "src/status.h"],
              "outputs": ["<(PRODUCT_DIR)/rlgate_cuda.stamp"],
              "action": ["sh", "cuda/build.sh", "<(PRODUCT_DIR)/rlgate_cuda.stamp"]
            }
          ]
        }]
      ]
    }
  ]
}
