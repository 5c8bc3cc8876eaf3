#include "cuda/common.cuh"
#include "cuda/gemv_int8_skinny.cuh"
#include "cuda/launch.cuh"
#include "cuda/mma.cuh"
#include "cuda/skinny_epilogue.cuh"

namespace photon::cuda {

namespace {

// Two signed codes of w (bytes 2 * hi and 2 * hi + 1) as a bf16x2, exactly: the byte b + 128 in
// the low mantissa bits of 2^23 gives 2^23 + b + 128 as a float; subtracting 2^23 + 128 leaves b.
__device__ __forceinline__ uint32_t codes_to_bf16x2(uint32_t w_biased, int hi) {
  const float lo_f = __uint_as_float(__byte_perm(w_biased, 0x4B000000u, 0x7650u | unsigned(2 * hi))) - 8388736.f;
  const float hi_f = __uint_as_float(__byte_perm(w_biased, 0x4B000000u, 0x7650u | unsigned(2 * hi + 1))) - 8388736.f;
  return pack_bf16x2(lo_f, hi_f);
}
__device__ __forceinline__ uint32_t word(const uint4& v, int j) { return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w; }

// Block of W warps: weight rows [16 b, 16 b + 16) (rows past N read row N - 1 and are never
// written), all of K in 64-k chunks; NT n-tiles of 8 activation rows; IF chunks in flight per warp.
// SILU: each output has two weight rows, gate row n and up row N + n (codes and scales), a chunk's
// activation fragments feeding both products; the epilogue writes silu(g) * u.
template <int NT, int W, int IF, class Out, bool ADD, bool SILU>
__global__ void __launch_bounds__(W * 32, 16 / W) gemv_int8_skinny_kernel(GemvInt8Args a) {
  constexpr int kWarps = W;
  constexpr int kMats = SILU ? 2 : 1;
  __shared__ float partial[kWarps][kMats * NT * 4][32];
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = int(blockIdx.x) * 16;
  const int N = a.N, K = a.K, M = a.M, group = a.group;  // group % 64 == 0
  const int groups = (K + group - 1) / group;
  // A chunk's group: a shift where group / 64 is a power of two (an integer division by a runtime
  // value costs ~20 instructions per use).
  const int per = group / 64, per_shift = __ffs(per) - 1;
  const bool per_pow2 = (per & (per - 1)) == 0;
  const int r_lo = min(row0 + g, N - 1), r_hi = min(row0 + g + 8, N - 1);
  const int8_t* w_lo[kMats];
  const int8_t* w_hi[kMats];
  const float* s_lo[kMats];
  const float* s_hi[kMats];
#pragma unroll
  for (int m = 0; m < kMats; ++m) {
    w_lo[m] = a.w + (int64_t(m) * N + r_lo) * K + 16 * t;
    w_hi[m] = a.w + (int64_t(m) * N + r_hi) * K + 16 * t;
    s_lo[m] = a.scales + (int64_t(m) * N + r_lo) * groups;
    s_hi[m] = a.scales + (int64_t(m) * N + r_hi) * groups;
  }
  const int chunks = K / 64;
  const int rounds = ceil_div(chunks, kWarps * IF);

  uint4 wa[IF][kMats], wb[IF][kMats];
  float sa[IF][kMats], sb[IF][kMats];
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
  auto load_w = [&](int u, int c) {  // codes and scales do not depend on earlier kernels
    const bool in = c < chunks;
    const int gi = in ? (per_pow2 ? c >> per_shift : c / per) : 0;
#pragma unroll
    for (int m = 0; m < kMats; ++m) {
      wa[u][m] = in ? __ldcs(reinterpret_cast<const uint4*>(w_lo[m] + 64 * c)) : zero;
      wb[u][m] = in ? __ldcs(reinterpret_cast<const uint4*>(w_hi[m] + 64 * c)) : zero;
      sa[u][m] = in ? __ldg(s_lo[m] + gi) : 0.f;
      sb[u][m] = in ? __ldg(s_hi[m] + gi) : 0.f;
    }
  };
#pragma unroll
  for (int u = 0; u < IF; ++u) load_w(u, warp + u * kWarps);
  pdl_wait();
  pdl_launch_dependents();

  const SkinnyOut<NT> e(row0, N, M);  // this thread's output element (skinny_epilogue.cuh)
  float res = 0.f;
  if constexpr (ADD) {
    res = e.residual(a.out);
  }

  const bf16* x_row[NT];
  bool x_live[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int m = nt * 8 + g;
    x_live[nt] = m < M;
    x_row[nt] = a.x + int64_t(x_live[nt] ? m : 0) * K + 16 * t;
  }
  uint4 xv[IF][NT][2];  // k 16t..16t+7 and 16t+8..16t+15 of the chunk
  auto load_x = [&](int u, int c) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const bool in = c < chunks && x_live[nt];
      xv[u][nt][0] = in ? __ldg(reinterpret_cast<const uint4*>(x_row[nt] + 64 * c)) : zero;
      xv[u][nt][1] = in ? __ldg(reinterpret_cast<const uint4*>(x_row[nt] + 64 * c + 8)) : zero;
    }
  };
#pragma unroll
  for (int u = 0; u < IF; ++u) load_x(u, warp + u * kWarps);

  float acc[kMats][NT][4];
#pragma unroll
  for (int m = 0; m < kMats; ++m)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) acc[m][nt][0] = acc[m][nt][1] = acc[m][nt][2] = acc[m][nt][3] = 0.f;
  for (int r = 0; r < rounds; ++r) {
#pragma unroll
    for (int u = 0; u < IF; ++u) {
#pragma unroll
      for (int m = 0; m < kMats; ++m) {
        const uint4 la = make_uint4(wa[u][m].x ^ 0x80808080u, wa[u][m].y ^ 0x80808080u, wa[u][m].z ^ 0x80808080u,
                                    wa[u][m].w ^ 0x80808080u);
        const uint4 lb = make_uint4(wb[u][m].x ^ 0x80808080u, wb[u][m].y ^ 0x80808080u, wb[u][m].z ^ 0x80808080u,
                                    wb[u][m].w ^ 0x80808080u);
        float part[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) part[nt][0] = part[nt][1] = part[nt][2] = part[nt][3] = 0.f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          // A: a0 / a2 row g, a1 / a3 row g + 8; codes 4j, 4j + 1 then 4j + 2, 4j + 3 of the lane's 16.
          const uint32_t af[4] = {codes_to_bf16x2(word(la, j), 0), codes_to_bf16x2(word(lb, j), 0),
                                  codes_to_bf16x2(word(la, j), 1), codes_to_bf16x2(word(lb, j), 1)};
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const uint4& xs = xv[u][nt][j >> 1];
            const uint32_t b0 = (j & 1) ? xs.z : xs.x, b1 = (j & 1) ? xs.w : xs.y;
            mma_bf16_16816(part[nt], af, b0, b1);
          }
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {  // C rows: entries 0, 1 weight row g, entries 2, 3 row g + 8
          acc[m][nt][0] += sa[u][m] * part[nt][0];
          acc[m][nt][1] += sa[u][m] * part[nt][1];
          acc[m][nt][2] += sb[u][m] * part[nt][2];
          acc[m][nt][3] += sb[u][m] * part[nt][3];
        }
      }
      const int c = warp + ((r + 1) * IF + u) * kWarps;
      load_w(u, c);
      load_x(u, c);
    }
  }

  skinny_store<kMats, NT, kWarps, SILU, ADD, Out>(partial, acc, e, res, a.out);
}

template <int NT, int W, int IF>
cudaError_t launch_ntw(const GemvInt8Args& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(ceil_div(a.N, 16))), block(unsigned(W * 32));
  if (a.out_f32)
    return launch_kernel(gemv_int8_skinny_kernel<NT, W, IF, float, false, false>, grid, block, 0, stream, a);
  if (a.accumulate)
    return launch_kernel(gemv_int8_skinny_kernel<NT, W, IF, bf16, true, false>, grid, block, 0, stream, a);
  if (a.silu)  // two matrices: half the chunks in flight, the same code bytes per lane
    return launch_kernel(gemv_int8_skinny_kernel<NT, W, (IF / 2 > 0 ? IF / 2 : 1), bf16, false, true>, grid, block, 0, stream, a);
  return launch_kernel(gemv_int8_skinny_kernel<NT, W, IF, bf16, false, false>, grid, block, 0, stream, a);
}

template <int NT, int IF>
cudaError_t launch_nt(const GemvInt8Args& a, int32_t num_sms, cudaStream_t stream) {
  return ceil_div(a.N, 16) <= num_sms ? launch_ntw<NT, 16, IF>(a, stream) : launch_ntw<NT, 8, IF>(a, stream);
}

}  // namespace

PHOTON_PRELOAD_UNIT(gemv_int8_skinny, gemv_int8_skinny_kernel<1, 8, 4, bf16, false, false>)

bool gemv_int8_skinny_applies(const GemvInt8Args& a) {
  return a.M >= kGemvInt8SkinnyMinRows && a.M <= kGemvInt8SkinnyMaxRows && a.N > 0 && a.K > 0 && a.K % 64 == 0 &&
         a.group > 0 && a.group % 64 == 0 && a.out != nullptr && a.x != nullptr && a.w != nullptr &&
         a.scales != nullptr && is_aligned(a.x, 16) && is_aligned(a.w, 16) && !(a.accumulate && a.out_f32) &&
         !(a.silu && (a.accumulate || a.out_f32));
}

Status launch_gemv_int8_skinny(const GemvInt8Args& a, int32_t num_sms, cudaStream_t stream) {
  if (!gemv_int8_skinny_applies(a))
    return bad_launch("gemv_int8_skinny",
                      "needs 1 <= M <= 16, K and group multiples of 64, 16-byte aligned x and codes, bf16 out to "
                      "accumulate into, SwiGLU without accumulate and with a bf16 out");
  if (num_sms <= 0) return bad_launch("gemv_int8_skinny", "num_sms must be positive");
  const cudaError_t err = a.M <= 8 ? launch_nt<1, 4>(a, num_sms, stream) : launch_nt<2, 3>(a, num_sms, stream);
  PHOTON_CUDA_TRY(err);
  return {};
}

}  // namespace photon::cuda
