#pragma once
// Multi-head softmax attention o = softmax(q k^T * scale) v over strided head views, so packed qkv
// Linear outputs are read in place (DiT (3, heads, D) columns, VAE (heads, 3, D) columns).
// ref:: scores one query at a time against all keys (double accumulation). The fast path is
// blocked over keys with an online softmax (never materializes Lq x Lk), uses BLAS (float32) or
// oneDNN (bf16) for the block products, and is TBB-parallel over batch x heads x query blocks.

#include <cstdint>

namespace gen3d::models::kernels {

// Element (b, t, h, d) is at data[b * batch_stride + t * token_stride + h * head_stride + d]
// (the head dim is contiguous).
struct HeadsView {
  const float* data = nullptr;
  std::int64_t batch_stride = 0;
  std::int64_t token_stride = 0;
  std::int64_t head_stride = 0;
};
struct HeadsOut {
  float* data = nullptr;
  std::int64_t batch_stride = 0;
  std::int64_t token_stride = 0;
  std::int64_t head_stride = 0;
};

struct AttentionShape {
  std::int64_t batch = 1;
  std::int64_t heads = 1;
  std::int64_t q_len = 0;
  std::int64_t kv_len = 0;
  std::int64_t head_dim = 0;
  float scale = 0.0f;  // 0 means 1 / sqrt(head_dim)
  // The two block products take bf16 operands (q, k, v and the softmax weights rounded), with
  // float32 accumulation; the online softmax stays float32. Networks set it when their projection
  // layers run in bf16.
  bool bf16 = false;
};

void attention(const HeadsOut& out, const HeadsView& q, const HeadsView& k, const HeadsView& v,
               const AttentionShape& s);

// The bf16 path (s.bf16 is implied) with keys and values rounded to bf16 beforehand, contiguous
// per head: element (b, h, t, d) of k and v at [((b * heads + h) * kv_len + t) * head_dim + d].
// The same results as attention() with s.bf16 on the float32 values they were rounded from; a
// caller that attends to the same keys many times rounds them once.
void attention_bf16_kv(const HeadsOut& out, const HeadsView& q, const std::uint16_t* k,
                       const std::uint16_t* v, const AttentionShape& s);

namespace ref {
void attention(const HeadsOut& out, const HeadsView& q, const HeadsView& k, const HeadsView& v,
               const AttentionShape& s);

// The bf16 path (s.bf16 is implied) with keys and values rounded to bf16 beforehand, contiguous
// per head: element (b, h, t, d) of k and v at [((b * heads + h) * kv_len + t) * head_dim + d].
// The same results as attention() with s.bf16 on the float32 values they were rounded from; a
// caller that attends to the same keys many times rounds them once.
void attention_bf16_kv(const HeadsOut& out, const HeadsView& q, const std::uint16_t* k,
                       const std::uint16_t* v, const AttentionShape& s);
}  // namespace ref

}  // namespace gen3d::models::kernels
