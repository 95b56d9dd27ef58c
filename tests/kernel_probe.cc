// kernel_probe.cc: prints the kernel BestKernel() picks in this process, so
// kernel_dispatch_test can run it under different QD_KERNEL values (the
// choice is made once per process).
#include <cstdio>
#include <string>

#include "codecs/kernels.h"

int main() {
  std::printf("%s\n", std::string(qd::codec::KernelName(qd::codec::BestKernel())).c_str());
  return 0;
}
