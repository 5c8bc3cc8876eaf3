// Times the persistent decode kernel (src/cuda/decode_layers.cu) alone on constant-filled weights of a
// decoder shape, and breaks one launch down by phase from its globaltimer trace: where the time
// between grid barriers goes, and when each CTA's producer starts streaming each phase.
//
//   photon_decode_layers_bench [H I nq nkv hd layers ctx iterations in_flight]
//   (defaults: Llama-3.2-1B, 16 layers, context 192, 50 launches, no cap on the weight loads in
//   flight; in_flight = DecodeLayersArgs::max_in_flight, in ring stages)
//
// Prints ms per launch and GB/s of layer weights for each set of left-out work (flags of
// DecodeLayersArgs), then the trace of one full launch: per phase, the mean and the max over CTAs of
// its duration (averaged over layers), in microseconds.
#include <cstdio>
#include <cstdlib>

#if defined(PHOTON_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "cuda/decode_layers.cuh"

namespace {

#define CHECK_CUDA(expr)                                                                     \
  do {                                                                                       \
    const cudaError_t e_ = (expr);                                                           \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s failed: %s\n", #expr, cudaGetErrorString(e_));               \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

void* filled(size_t bytes, int byte) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, bytes));
  CHECK_CUDA(cudaMemset(p, byte, bytes));
  return p;
}

template <class T>
T* uploaded(const std::vector<T>& v) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, v.size() * sizeof(T)));
  CHECK_CUDA(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return static_cast<T*>(p);
}

const char* kPhaseNames[15] = {"",         "norm",        "qkv",   "barrier", "attention",
                               "barrier",  "merge",       "o",     "barrier", "norm",
                               "gate_up",  "barrier",     "mlp in", "down",   "barrier"};

}  // namespace

int main(int argc, char** argv) {
  using namespace photon::cuda;
  auto arg = [&](int i, long d) { return argc > i ? std::atol(argv[i]) : d; };
  const int H = int(arg(1, 2048)), I = int(arg(2, 8192)), nq = int(arg(3, 32)), nkv = int(arg(4, 8));
  const int hd = int(arg(5, 64)), layers = int(arg(6, 16)), ctx = int(arg(7, 192)), iters = int(arg(8, 50));
  const int in_flight = int(arg(9, 0));  // DecodeLayersArgs::max_in_flight
  int sms = 0, major = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  if (layers > kDecodeLayersMaxLayers || !decode_layers_applies(major, sms, H, I, nq, nkv, hd)) {
    std::fprintf(stderr, "the persistent kernel does not serve this shape on this device\n");
    return 1;
  }
  const int bs = 16, blocks = (ctx + bs - 1) / bs + 1;
  const size_t qkv_n = size_t(nq + 2 * nkv) * hd;
  DecodeLayersArgs a;
  size_t layer_bytes = 0;
  // The decoder's block-major KV pool (docs/kv-cache-layout.md): [blocks][layer][k | v][bs][nkv][hd].
  const size_t kv_row = size_t(nkv) * hd;
  auto* kv_pool = static_cast<__nv_bfloat16*>(filled(2 * size_t(blocks) * layers * 2 * bs * kv_row, 0x3c));
  for (int l = 0; l < layers; ++l) {
    const size_t sizes[4] = {qkv_n * H, size_t(H) * nq * hd, size_t(2) * I * H, size_t(H) * I};
    layer_bytes = 2 * (sizes[0] + sizes[1] + sizes[2] + sizes[3]);
    DecodeLayerPtrs& L = a.layers[l];
    L.qkv_w = static_cast<const __nv_bfloat16*>(filled(2 * sizes[0], 0x3c));
    L.o_w = static_cast<const __nv_bfloat16*>(filled(2 * sizes[1], 0x3c));
    L.gate_up_w = static_cast<const __nv_bfloat16*>(filled(2 * sizes[2], 0x3c));
    L.down_w = static_cast<const __nv_bfloat16*>(filled(2 * sizes[3], 0x3c));
    L.input_norm = static_cast<const __nv_bfloat16*>(filled(2 * size_t(H), 0x3f));
    L.post_norm = static_cast<const __nv_bfloat16*>(filled(2 * size_t(H), 0x3f));
    L.k_cache = kv_pool + size_t(2 * l) * bs * kv_row;
    L.v_cache = kv_pool + size_t(2 * l + 1) * bs * kv_row;
  }
  std::vector<int> table(static_cast<size_t>(blocks));
  for (int b = 0; b < blocks; ++b) table[size_t(b)] = b;
  std::vector<float> freq(size_t(hd / 2));
  for (int i = 0; i < hd / 2; ++i) freq[size_t(i)] = 1.f / float(1 << (i % 16));
  a.num_layers = layers;
  a.x = static_cast<__nv_bfloat16*>(filled(2 * size_t(H), 0x3c));
  a.qkv = static_cast<__nv_bfloat16*>(filled(2 * qkv_n, 0));
  a.mlp = static_cast<__nv_bfloat16*>(filled(2 * size_t(I), 0));
  a.partials = static_cast<float*>(filled(4 * size_t(decode_layers_partial_floats(nq, hd)), 0));
  a.sync = static_cast<unsigned*>(filled(8, 0));
  a.positions = uploaded(std::vector<int>{ctx - 1});
  a.context_lens = uploaded(std::vector<int>{ctx});
  a.block_tables = uploaded(table);
  a.slot_mapping = uploaded(std::vector<int>{ctx - 1});
  a.inv_freq = uploaded(freq);
  a.hidden = H, a.intermediate = I, a.num_q_heads = nq, a.num_kv_heads = nkv, a.head_dim = hd;
  a.block_size = bs, a.kv_block_stride = 2 * layers * bs, a.num_slots = int64_t(blocks) * bs;
  a.eps = 1e-5f, a.scale = 0.125f;
  a.max_in_flight = in_flight;

  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreate(&stream));
  cudaEvent_t t0, t1;
  CHECK_CUDA(cudaEventCreate(&t0));
  CHECK_CUDA(cudaEventCreate(&t1));
  auto launch = [&]() {
    if (!launch_decode_layers(a, sms, stream).has_value()) {
      std::fprintf(stderr, "launch_decode_layers failed\n");
      std::exit(1);
    }
  };
  std::printf("H %d I %d nq %d nkv %d hd %d layers %d ctx %d in-flight cap %d: %.1f MB per layer, %d SMs\n", H, I, nq,
              nkv, hd, layers, ctx, in_flight, double(layer_bytes) / 1e6, sms);
  const char* names[4] = {"full", "no dot products", "no attention", "neither"};
  for (int flags = 0; flags < 4; ++flags) {
    a.flags = flags;
    for (int i = 0; i < 3; ++i) launch();
    CHECK_CUDA(cudaEventRecord(t0, stream));
    for (int i = 0; i < iters; ++i) launch();
    CHECK_CUDA(cudaEventRecord(t1, stream));
    CHECK_CUDA(cudaEventSynchronize(t1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, t0, t1));
    const double per = double(ms) / iters;
    std::printf("%-16s %.4f ms per launch, %.0f GB/s of layer weights\n", names[flags], per,
                double(layer_bytes) * layers / (per * 1e-3) / 1e9);
  }

  a.flags = 0;
  const size_t n = size_t(sms) * layers * kDecodeLayersTraceEvents;
  a.trace = static_cast<long long*>(filled(n * sizeof(long long), 0));
  launch();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  std::vector<long long> tr(n);
  CHECK_CUDA(cudaMemcpy(tr.data(), a.trace, n * sizeof(long long), cudaMemcpyDeviceToHost));
  auto at = [&](int cta, int l, int e) { return tr[(size_t(cta) * layers + size_t(l)) * kDecodeLayersTraceEvents + size_t(e)]; };
  std::printf("phase (us, mean over CTAs / max over CTAs, averaged over layers 1..%d)\n", layers - 1);
  for (int e = 1; e < 15; ++e) {
    double mean = 0, mx = 0;
    for (int l = 1; l < layers; ++l) {
      double sum = 0, m = 0;
      for (int c = 0; c < sms; ++c) {
        const double d = double(at(c, l, e) - at(c, l, e - 1)) * 1e-3;
        sum += d;
        m = std::max(m, d);
      }
      mean += sum / sms;
      mx += m;
    }
    std::printf("  %2d %-10s %7.2f %7.2f\n", e, kPhaseNames[e], mean / (layers - 1), mx / (layers - 1));
  }
  double layer_us = 0;
  for (int l = 1; l + 1 < layers; ++l) layer_us += double(at(0, l + 1, 0) - at(0, l, 0)) * 1e-3;
  std::printf("  layer (CTA 0): %.2f us\n", layer_us / std::max(1, layers - 2));
  std::printf("producer: first chunk of each phase issued, us after the layer's start (CTA mean / max)\n");
  const char* ph[4] = {"qkv", "o", "gate_up", "down"};
  for (int p = 0; p < 4; ++p) {
    double mean = 0, mx = 0;
    for (int l = 1; l < layers; ++l) {
      double sum = 0, m = -1e30;
      for (int c = 0; c < sms; ++c) {
        const double d = double(at(c, l, 16 + p) - at(c, l, 0)) * 1e-3;
        sum += d;
        m = std::max(m, d);
      }
      mean += sum / sms;
      mx += m;
    }
    std::printf("  %-8s %7.2f %7.2f\n", ph[p], mean / (layers - 1), mx / (layers - 1));
  }
  return 0;
}

#else
int main() {
  std::fprintf(stderr, "photon_decode_layers_bench: this build has no CUDA backend\n");
  return 1;
}
#endif
