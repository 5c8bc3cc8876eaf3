// The CUDA backend's factory. Free of CUDA headers: the engine and tools
// include it when PHOTON_HAVE_CUDA is defined (a build with src/cuda).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/backend.hpp"
#include "photon/result.hpp"

namespace photon {

struct CudaBackendOptions {
  int32_t device = 0;                          // CUDA device ordinal
  size_t gemm_workspace_bytes = size_t(32) << 20;  // cuBLASLt workspace, reused by every matmul
  bool cuda_graphs = true;                     // replay decode-only steps from per-batch-size CUDA graphs
  int32_t max_graph_batch = 256;               // the largest decode batch that gets a graph
  // 2..64-row matmuls (decode batches) on the gemv_mma tensor-core kernel (sm_90+) instead of
  // cuBLASLt. Off by default: measured slower than cuBLASLt on the H200 (docs/performance.md).
  bool mma_decode_matmul = false;
  // Decode attention on sm_90+: the context splits of a sequence merge inside a thread-block
  // cluster (distributed shared memory) rather than through a global workspace.
  bool decode_attention_clusters = true;
  // Decode batches (2..16 rows) on the skinny tensor-core kernels: bf16 matmuls with N <= 8192 (a
  // layer's qkv, o and down) and the gate/up product with SwiGLU on gemv_skinny instead of cuBLASLt
  // (+ silu_mul), int8 weights' matmuls on gemv_int8_skinny instead of the int8 GEMV or
  // dequantize + cuBLASLt: measured faster at every such batch size (docs/performance.md, rows 34,
  // 39, 40). Also single-stream steps' small bf16 products (N * K <= 12 Mi) and gate/up + SwiGLU at
  // K < 2048 (rows 41, 55). The environment variable PHOTON_CUDA_SKINNY=0 / 1 overrides it for any
  // backend (tests, engine).
  bool skinny_decode_matmul = true;
  // Single-sequence decode steps (one token) run every decoder layer in one persistent kernel
  // (sm_90+, bf16 weights, hd 64 or 128; docs/persistent-decode.md); other steps, and shapes it
  // does not serve, run the per-op kernels. Off by default: measured slower than the per-op
  // kernels on the H200 (its grid barriers cost about what a kernel boundary does; see
  // docs/persistent-decode.md, "Measured").
  bool persistent_decode = false;
  // The persistent kernel's cap on weight loads in flight, in ring stages (DecodeLayersArgs::
  // max_in_flight; 0: none). PHOTON_CUDA_PERSISTENT_INFLIGHT=N overrides it (measurements).
  int32_t persistent_max_in_flight = 0;
  // Which one-row GEMV products (the single-stream products it serves) issue each lane's first round
  // of weight loads before pdl_wait(), while the kernel before finishes (GemvArgs::early_weights),
  // and whether those split K over half as many warps (GemvArgs::early_half_ks: the early variant
  // holds 64 registers, 4 blocks per SM, so Llama-3.2-1B's down projection needs half the blocks to
  // fit in one wave). Session 9 measured `large` (N and K both >= 4096: every Qwen3-8B product,
  // none of Llama-3.2-1B's) without the halving as the best (row 51: every product early lost 1.5% at
  // Llama-3.2-1B); session 10 measured every product early with the halving 1.8% faster than none
  // at Llama-3.2-1B (row 54). PHOTON_CUDA_GEMV_EARLY=0 / 1 / d / h (none / all / narrow_n / wide_n)
  // and PHOTON_CUDA_GEMV_EARLY_HALF_KS=0 / 1 override them for any backend (measurements);
  // narrow_n / wide_n: only products with N below / at least 8192 (Llama-3.2-1B: its down
  // projection / its LM head).
  enum class GemvEarly : uint8_t { none, large, all, narrow_n, wide_n };
  GemvEarly gemv_early_weights = GemvEarly::all;
  bool gemv_early_half_ks = true;
  // With early weights: how many of a lane's first round of 8 loads go out before pdl_wait()
  // (GemvArgs::early_chunks, 1-8; the rest right after it). 8 floods the memory system ahead of the
  // block's first dependent read and of the kernel before's release (the gate/up projection's 3 us
  // boundary in session 13's step trace); 3-4 measured best at Llama-3.2-1B: single stream 0.745
  // -> 0.724 ms/token, 16 sequences 1.017 -> 1.005 ms/step (docs/performance.md, row 67).
  // PHOTON_CUDA_GEMV_EARLY_CHUNKS=1..8 overrides it (measurements).
  int32_t gemv_early_chunks = 4;
  // With early weights and x staged: a lane's weight loads per round (GemvArgs::unroll: 2, 4 or 8)
  // for the add-mode products (down), the SwiGLU products (gate/up), the qkv products with the RoPE
  // epilogue and the other plain ones (the LM head). Rounds of 4 halve the bytes in flight over the
  // grid (~8.6 MB at 4 blocks of 256 threads per SM, still above the ~3.5 MB that 4.2 TB/s needs at
  // an unloaded DRAM latency), so a dependent read likely queues behind less; at Llama-3.2-1B they
  // measured 1.5-2% faster per token than 8 (most of it in the LM head), at Qwen3-8B 0.3-1.1%;
  // rounds of 2 measured 4-7% slower (docs/performance.md, row 78). The qkv products keep 8: all
  // their weights are one round, issued before the x read.
  // PHOTON_CUDA_GEMV_UNROLL=<add><silu><rope><plain> (digits, e.g. 8888) overrides them
  // (measurements).
  int32_t gemv_unroll_add = 4, gemv_unroll_silu = 4, gemv_unroll_rope = 8, gemv_unroll_plain = 4;
  // One-row products with a norm in plain mode (the LM head) with at least gemv_passes_min_n
  // outputs (0: none) and rows of at most gemv_passes_max_row_bytes run as one wave of blocks (4
  // per SM) that stage x once and stream many column groups, the next tile of loads in flight
  // through each column's epilogue (GemvArgs::passes_grid), where a row is a multiple of 64 16-byte
  // chunks (bf16 K % 512 == 0, int8 K % 1024 == 0). A block of the plain launch streams only 16 KB
  // of 2 KB rows against its x staging: Qwen3-0.6B's bf16 LM head measured 1.3% faster per token
  // with it, Llama-3.2-1B's int8 LM head (K = 2048) 2.3% (docs/performance.md, row 97), Qwen3-0.6B's
  // int8 head (K = 1024: 1 KB rows) 3.3-4.5% (row 98); 4 KB rows (Llama-3.2-1B's bf16 head) measured
  // 0.5-1.0% slower (rows 79, 101), and grids of 2 or 3 blocks per SM 3-12% slower (row 101).
  // Results are bit-identical either way.
  // PHOTON_CUDA_GEMV_PASSES_MIN_N and PHOTON_CUDA_GEMV_PASSES_MAX_ROW_BYTES override them
  // (measurements; a minimum of 0 turns it off).
  int64_t gemv_passes_min_n = 65536;
  int64_t gemv_passes_max_row_bytes = 2048;
  // Which decode steps rotate q and the new K/V rows inside the decode attention kernel
  // (Backend::rope_attention: no rope_qkv kernel, q never stored) instead of rope_qkv + attention.
  // By default the steps of two or more sequences of models whose query width nq * hd is at least
  // 4096 (the 8B shapes, where it measured 0.8-1.6% faster at 16 sequences, row 50); the 1B-class
  // shapes (Llama-3.2-1B, Qwen3-0.6B: width 2048) measured the same or up to 1.8% slower with it
  // (docs/performance.md, row 50), and one-sequence steps of the 4B and 8B shapes 0.6-1.4% slower
  // since the single-pass kernels (row 95: the fused kernel's blocks, a whole SM's registers each,
  // wait for the qkv GEMV's blocks to leave before they can load their cached rows).
  // PHOTON_CUDA_ROPE_IN_ATTENTION=0 / 1 (never / always) overrides it for any backend (measurements).
  enum class RopeInAttention : uint8_t { never, wide_queries, always };
  RopeInAttention rope_in_decode_attention = RopeInAttention::wide_queries;
  // Decode steps that graphs serve end their graph with the one-pass sampler when every row allows
  // it (Backend::run_step_sampled; at most 64 rows, greedy or uncut Gumbel-max draws, no penalty,
  // no top-n logprobs): the sampler launches with PDL after the LM head inside the graph, and its
  // row parameters travel in the plan's copy. PHOTON_CUDA_SAMPLE_IN_GRAPH=0 / 1 overrides it.
  bool sample_in_graph = true;
  // Sampled decode graph steps alternate between two plan regions, and a step's plan is copied on
  // a side stream while the step before runs (it waits only for the step that last read its
  // region), so no copy sits between two steps' graphs (cuda/plan_staging.hpp;
  // docs/step-overlap.md, "The plan copy off the stream"). Off: one region, every copy on the
  // backend's stream after the step before. PHOTON_CUDA_PLAN_COPY_STREAM=0 / 1 overrides it.
  bool plan_copy_stream = true;
  // The LM head screen (docs/lm-head-screen.md): the loader keeps an int8 copy of a bf16 head
  // (group 128; heads of K % 1024 == 0, K <= 16384, and up to ~540k ids), and sampled one-row
  // decode graphs (sample_in_graph) stream it instead of the bf16 head, then draw exactly by
  // rescoring with the bf16 head the ids its error bounds cannot rule out. The ids are the bf16
  // head's; logprobs within the bound. Needs int8_one_row_gemv and gemv_norm.
  // PHOTON_CUDA_LM_HEAD_SCREEN=0 / 1 overrides it.
  bool lm_head_screen = true;
  // bf16 rows each screened-draw block prefetches into L2 (ScreenArgs::prefetch_rows: its best id's,
  // then its first candidates'), for the last block's exact logits: 1 measured level with 0 or up
  // to 0.1 us per token faster (docs/performance.md, row 113). PHOTON_CUDA_SCREEN_PREFETCH_ROWS
  // overrides it (measurements).
  int32_t screen_prefetch_rows = 1;
  // Diagnostics: every device allocation's address and size, one line on stderr each ("photon
  // cuda: allocated BYTES at PTR"), for placement experiments (docs/performance.md, row 117).
  // PHOTON_CUDA_LOG_ALLOCATIONS=1 sets it.
  bool log_allocations = false;
  // One-row products that read a norm's output (Backend::rmsnorm_matmul / rmsnorm_matmul_silu:
  // qkv, gate/up + SwiGLU from kSwiGluGemvMinK, the LM head) norm x inside the GEMV (GemvArgs::
  // norm_w) when the norm weights are bf16: no norm kernel (Llama-3.2-1B -0.7 to -1.8%, Qwen3-8B
  // -1.3% per token; docs/performance.md, row 57). PHOTON_CUDA_GEMV_NORM=0 / 1 overrides it.
  bool gemv_norm = true;
  // One-row GEMVs without a norm stage x in shared memory per block instead of every warp reading it
  // through L1 (GemvArgs::stage_x; K <= 16384): Llama-3.2-1B -0.3%, Qwen3-8B -0.7% per token
  // (docs/performance.md, row 58). PHOTON_CUDA_GEMV_STAGE_X=0 / 1 overrides it.
  bool gemv_stage_x = true;
  // One-token decode steps of models without q/k norms (Llama) do rope_qkv's work in the epilogue
  // of the qkv GEMV with the norm inside (Backend::rmsnorm_qkv_attention, GemvArgs::rope): no
  // rope_qkv kernel. Steps that rope_in_decode_attention selects keep RoPE there; Qwen3's q/k
  // norms need a whole head per block and keep their path. PHOTON_CUDA_GEMV_ROPE=0 / 1 overrides it.
  bool gemv_rope = true;
  // Decode attention of batches of at most attention_single_pass_max_seqs sequences (RoPE inside
  // or not) in the single-pass kernel (decode_attention_one.cu: no context splits, no merge between
  // blocks) while the staged block table keeps contexts within one chunk of its loads (512 keys at
  // hd 64, 256 at hd 128; 16 warps past half of that), with this many query heads per block: 1, 2
  // or 4; -1: by batch size (decode_attention_single_pass_heads); 0: always the split kernel.
  // Llama-3.2-1B at contexts of 128-192: single stream 0.79 -> 0.74 ms/token, B = 4 0.92 -> 0.86,
  // B = 16 1.044 -> 0.996 ms/step (docs/performance.md, row 64; rows 65-66: 16 warps, RoPE inside). PHOTON_CUDA_ATTN_ONE=0/1/2/4 and PHOTON_CUDA_ATTN_ONE_MAX_SEQS
  // override them.
  int32_t attention_single_pass_heads = -1;
  int32_t attention_single_pass_max_seqs = 16;
  // Load photon's kernel modules when the backend starts (kernel_preload.hpp) instead of when a
  // step first launches one of their kernels (CUDA's lazy loading): no mid-run stall (50-80 ms the
  // first time a single stream passed 512 keys), for 50-100 ms more at start on the H200 (all of
  // CUDA_MODULE_LOADING=EAGER, cuBLASLt's kernels included, costs ~1.3 s; docs/performance.md,
  // row 72). PHOTON_CUDA_PRELOAD=0 / 1 overrides it.
  bool preload_kernels = true;
  // One-row products of group-wise int8 weights (K % 16 == 0, power-of-two groups >= 16 dividing
  // K) on the one-row GEMV (GemvArgs::w8: x staged, early weights, the norm, SwiGLU and RoPE
  // epilogues inside, as for bf16) instead of the int8 GEMV with separate norm, RoPE and SwiGLU
  // kernels: Llama-3.2-1B int8 (group 128) single stream 0.762 -> 0.698 ms/token
  // (docs/performance.md, row 86). PHOTON_CUDA_INT8_GEMV=0 / 1 overrides it.
  bool int8_one_row_gemv = true;
  // One-row int8 products (K and group multiples of 64) on the tensor-core gemv_int8_skinny (its
  // M = 1 fragments padded to 8 rows) instead of the one-row GEMV. 1: the plain and add products
  // (o, down) whose N / 16 blocks fit one wave (N <= 16 x the SM count: Llama-3.2-1B, not the
  // Qwen3-8B or Llama 3B/8B shapes); 2: every plain, add and SwiGLU product (gate/up then after a
  // separate norm kernel); qkv stays on the GEMV (norm and RoPE inside). Measured (docs/
  // performance.md, row 87): Llama-3.2-1B int8 single stream 0.687 -> 0.667 ms/token (1) and
  // 0.658 (2); Qwen3-8B int8 2.885 -> 3.267 (2: its products take several waves), so 1 is the
  // default. PHOTON_CUDA_INT8_SKINNY_M1=0 / 1 / 2 overrides it.
  int32_t int8_skinny_one_row = 1;
};

// A Backend on options.device: bf16 activations and KV cache, bf16 weights,
// fp32 accumulation, one CUDA stream. Fails with Errc::cuda_error (message
// saying why) when no usable device or driver is present, and with
// Errc::unsupported on GPUs older than compute capability 8.0.
Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaBackendOptions& options = {});

// Device-to-device copy bandwidth of a CUDA backend's GPU in bytes per
// second, counting bytes read plus bytes written (the ceiling the bench
// compares against): the median of `iterations` timed copies of `bytes`.
// invalid_argument when `backend` is not a CUDA backend.
Result<double> cuda_copy_bandwidth(Backend& backend, size_t bytes, int32_t iterations);

// How many times a CUDA backend launched the persistent decode kernel (decode_layers) since it was
// made: eager steps and graph captures, not graph replays; 0 for a non-CUDA backend.
int64_t cuda_persistent_decode_launches(const Backend& backend);
// Decode steps a CUDA backend ran through a graph that ends with the sampler (run_step_sampled);
// 0 for other backends. For tests.
int64_t cuda_sampled_graph_steps(const Backend& backend);
// Of those, the steps launched with their input ids where the step before had sampled them, on the
// device (Backend::launch_step_sampled's prev_rows, taken without a wait); 0 for other backends.
// For tests.
int64_t cuda_device_id_steps(const Backend& backend);
// Sampled graph steps whose LM head ran through the screen (CudaBackendOptions::lm_head_screen); 0
// for other backends.
int64_t cuda_screened_steps(const Backend& backend);
// The ids those steps' draws rescored with the bf16 head, summed (the ids whose score bounds could
// not rule them out against the row's best lower bound; docs/lm-head-screen.md). Waits for the
// backend's stream; 0 for other backends and before the first screened step.
Result<int64_t> cuda_screen_rescored_ids(const Backend& backend);
// Decode attention launches a CUDA backend made with the single-pass kernel
// (CudaBackendOptions::attention_single_pass_heads; eager launches and graph captures, not
// replays); 0 for other backends. For tests.
int64_t cuda_single_pass_attention_launches(const Backend& backend);

// The GPU's name as the driver reports it ("NVIDIA H200"); empty for a non-CUDA backend.
std::string cuda_device_name(const Backend& backend);

}  // namespace photon
