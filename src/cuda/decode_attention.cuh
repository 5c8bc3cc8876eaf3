// Paged decode attention: one new query token per sequence over its cached
// keys/values (flash-decoding). Each block owns (sequence, KV head, split of
// the context) and serves every query head of that KV head's group (GQA:
// K/V rows are read once per group, not once per query head).
// Splits: the launch has num_splits per (sequence, head group), fixed by the
// batch shape (graphs stay valid); each block decides on the device, from
// context_lens, how many the sequence uses (each used split holds at least
// one round of loads: 128 keys at hd 64, 64 at hd 128), so short contexts run
// one split and skip the merge, and unused split blocks exit after pdl_wait().
// Loads: a round issues its 8 K loads of 16 bytes per thread at once, and its
// V loads with them when the grid fits in one wave (otherwise after the
// softmax, keeping four blocks per SM at GQA 4), and fetches the next round's
// block-table entries meanwhile (the first round's before pdl_wait()). With V
// loaded with K, the first round's rows other than the current token's
// (written by rope_qkv in this step) are loaded before pdl_wait() too.
// Merge: with more than one used split, per-split partials (unnormalized sum,
// max, denominator) go to a workspace and the last of the used blocks of each
// (sequence, head group) merges them, loading 8 splits' partials at once (an
// arrival counter per group, reset by that block). With cluster_merge (sm_90)
// the splits of a (sequence, head group) form one thread-block cluster of at
// most 8 blocks instead: partials stay in shared memory and the used blocks
// merge a share each over distributed shared memory between two cluster
// barriers, with no workspace; a context is then spread over the splits in
// pieces of at least 32 keys. Launched with PDL.
// RoPE inside (qkv set: the decode half of Backend::rope_attention): q is
// not read; each block takes its query heads and its KV head's new K/V row
// from the packed projection, applies the q/k norms and RoPE at the token's
// position as rope_qkv does (same bf16 rounding points), keeps the new K/V row
// in shared memory for its own scores, and the block whose split holds that
// row (first head slice) writes it into the cache at slot_mapping, so no
// rope_qkv kernel runs and the roped q never goes through memory. The angles
// are formed before pdl_wait() (positions are staged before the step).
// Bytes: reads S * nkv * ctx * hd * 2 bytes of K plus the same of V (bf16)
// and S * ctx/block_size * 4 bytes of block table per head group, writes
// S*nq*hd*2 bytes (+ partials of S*nq*used*(hd+2)*4 bytes written and read
// back when a context uses more than one split, without cluster_merge).
// With RoPE inside: reads the q heads and the new K/V rows of qkv
// (S * (nq + 2 nkv) * hd * 2 bytes, q once per split) instead of q, and writes
// S * 2 * nkv * hd * 2 bytes of K/V into the cache.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda/cuda_status.hpp"

namespace photon::cuda {

struct DecodeAttentionArgs {
  __nv_bfloat16* out = nullptr;            // [S, nq, hd]
  const __nv_bfloat16* q = nullptr;        // [S, nq, hd]: token s is sequence s's only query
  __nv_bfloat16* k_cache = nullptr;        // [num_blocks, block_size, nkv, hd] rows, blocks kv_block_stride apart;
                                           // written only with qkv set
  __nv_bfloat16* v_cache = nullptr;        // same shape
  const int32_t* block_tables = nullptr;   // [S, max_blocks_per_seq]
  const int32_t* context_lens = nullptr;   // [S]; the query sits at position ctx - 1; 0 gives a zero row
  float* partial_out = nullptr;            // [S, nq, num_splits, hd] workspace, used when num_splits > 1
  float* partial_ml = nullptr;             // [S, nq, num_splits, 2] (running max in log2 units, denominator)
  int32_t* arrivals = nullptr;             // [S, nkv * head slices], zero before the first launch
  int32_t num_seqs = 0;                    // S
  int32_t num_q_heads = 0;                 // nq (a multiple of nkv)
  int32_t num_kv_heads = 0;                // nkv
  int32_t head_dim = 0;                    // hd: 16, 32, 64, 128 or 256
  int32_t block_size = 0;                  // tokens per KV block
  int32_t kv_block_stride = 0;             // cache rows between consecutive blocks; 0: block_size (packed)
  int32_t max_blocks_per_seq = 0;
  int32_t num_splits = 1;                  // context splits per (sequence, KV head); see decode_attention_splits
  int32_t num_sms = 0;                     // SMs of the device (picks the one-wave variant); 0: assume 132
  float scale = 1.f;                       // softmax scale (1/sqrt(hd) usually)
  bool cluster_merge = false;              // sm_90+: merge splits inside a cluster (num_splits <= 8, no workspace)
  // RoPE inside the kernel (see above) when qkv is set; q is then ignored.
  const __nv_bfloat16* qkv = nullptr;      // [S, (nq + 2 nkv) * hd]: q heads, then k heads, then v heads
  const int32_t* positions = nullptr;      // [S]: the new token's position (its K/V row in the context)
  const int32_t* slot_mapping = nullptr;   // [S]: its cache slot; outside [0, num_slots) writes nothing
  const float* inv_freq = nullptr;         // [hd / 2]
  const void* q_norm = nullptr;            // [hd] or null; bf16, or f32 when norm_f32
  const void* k_norm = nullptr;            // [hd] or null
  bool norm_f32 = false;
  // > 0: the single-pass kernel (decode_attention_one.cu: no splits, no merge between blocks; RoPE
  // inside too), with this many query heads per block (1, 2 or 4); the host sets it for batches of
  // few sequences while max_blocks_per_seq * block_size <= decode_attention_single_pass_max_keys.
  int32_t single_pass_heads = 0;
  int64_t num_slots = 0;                   // num_blocks * block_size
  float eps = 1e-6f;                       // q/k norm epsilon
};

// The head sizes both attention kernels dispatch (this file's and prefill_attention.cuh's): what
// CudaBackend::check_head_dim accepts.
constexpr bool attention_serves_head_dim(int32_t head_dim) {
  return head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
}

// Splits that give the GPU enough blocks for S sequences. Depends only on the
// batch shape (never on context lengths), so a captured graph stays valid as
// contexts grow: each block derives its share of the context on the device.
// With cluster_merge: at most 8, and few enough that the grid fits in one wave.
int32_t decode_attention_splits(int32_t num_seqs, int32_t num_q_heads, int32_t num_kv_heads, int32_t num_sms,
                                bool cluster_merge);
// Blocks of the launch with cluster_merge (sequences x head groups x its splits).
int64_t decode_attention_cluster_blocks(int32_t num_seqs, int32_t num_q_heads, int32_t num_kv_heads, int32_t num_sms);
// Workspace that num_splits > 1 needs: partial_out then partial_ml floats in
// one buffer, and the arrival counters in another (zeroed once: every launch
// leaves them zero).
struct DecodeWorkspace {
  size_t partial_out_floats = 0, partial_ml_floats = 0, arrivals = 0;
  size_t partial_bytes() const { return (partial_out_floats + partial_ml_floats) * 4; }
  size_t arrival_bytes() const { return arrivals * 4; }
};
DecodeWorkspace decode_attention_workspace(int32_t num_seqs, int32_t num_q_heads, int32_t num_kv_heads,
                                           int32_t head_dim, int32_t num_splits);

Status launch_decode_attention(const DecodeAttentionArgs& a, cudaStream_t stream);

// The single-pass kernel (DecodeAttentionArgs::single_pass_heads; decode_attention_one.cu): the
// longest context it is used for at head_dim (two chunks of loads; 0: head_dim not served), whether
// it serves a launch, and its launch (launch_decode_attention calls it when single_pass_heads > 0).
int32_t decode_attention_single_pass_max_keys(int32_t head_dim);
// The query heads per block for a batch: the fewest of 1, 2 and 4 that divide the group and keep the
// grid (S * nq / heads blocks) within one block per SM, else the most that divide it (measured at
// Llama-3.2-1B: B = 4 with 1 head 0.857 ms/step, with 4 0.871; B = 16 with 1 1.051, with 4 0.996).
int32_t decode_attention_single_pass_heads(int32_t num_seqs, int32_t num_q_heads, int32_t num_kv_heads,
                                           int32_t num_sms);
bool decode_attention_single_pass_applies(const DecodeAttentionArgs& a);
Status launch_decode_attention_single_pass(const DecodeAttentionArgs& a, cudaStream_t stream);

}  // namespace photon::cuda
