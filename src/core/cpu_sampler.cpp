// CPU sampler (temporary: lands in the next commit; see docs/sampling.md).
#include "core/cpu_ops.hpp"

namespace photon::cpu {

Result<void> sample(ThreadPool&, CpuScratch&, Tensor, const SampleBatch&, const SampleOutput&) {
  return fail(Errc::unsupported, "cpu sample: the CPU sampler is not in this build yet");
}

}  // namespace photon::cpu
