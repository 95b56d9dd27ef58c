#include "codecs/kernels.h"

#include <cstdlib>

namespace qd::codec {
namespace {

bool HasAvx2Fma() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

}  // namespace

std::vector<Kernel> AvailableKernels() {
  std::vector<Kernel> kernels = {Kernel::kScalar};
  if (HasAvx2Fma()) kernels.push_back(Kernel::kAvx2);
  return kernels;
}

Kernel BestKernel() {
  static const Kernel best = [] {
    const std::vector<Kernel> available = AvailableKernels();
    if (const char* forced = std::getenv("QD_KERNEL")) {
      for (Kernel k : available) {
        if (KernelName(k) == forced) return k;
      }
    }
    return available.back();
  }();
  return best;
}

std::string_view KernelName(Kernel kernel) {
  switch (kernel) {
    case Kernel::kScalar: return "scalar";
    case Kernel::kAvx2: return "avx2";
  }
  return "unknown";
}

bool HasAvx2Code(Kernel kernel) {
#if defined(__x86_64__)
  return kernel == Kernel::kAvx2;
#else
  (void)kernel;
  return false;
#endif
}

}  // namespace qd::codec
