// kernels.h: run-time selection of the codecs' SIMD kernels.
//
// Every kernel family has a scalar version and, where it pays, an AVX2+FMA
// version compiled with a target attribute, so one binary runs everywhere and
// tests can force each kernel in turn (the simdjson approach).
//
//   for (qd::codec::Kernel k : qd::codec::AvailableKernels()) Check(k);
#ifndef QUANTDIFF_CODECS_KERNELS_H_
#define QUANTDIFF_CODECS_KERNELS_H_

#include <string_view>
#include <vector>

namespace qd::codec {

enum class Kernel { kScalar, kAvx2 };

// Kernels this processor can run, slowest (scalar) first.
std::vector<Kernel> AvailableKernels();
// The fastest available kernel, unless QD_KERNEL=scalar|avx2 forces one.
Kernel BestKernel();
std::string_view KernelName(Kernel kernel);
// True when kernel asks for AVX2 code and this build has some (x86-64 only);
// a kernel family without it runs its scalar version.
bool HasAvx2Code(Kernel kernel);

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_KERNELS_H_
