#pragma once
// DiTPass: one DiT forward call evaluated stage by stage, so step caches (step_cache.h) can stop
// after the first block, reuse a residual, or replace block branches by predictions.
//
// Names follow ../shared/specs/dit-cache.md §2.3: h0 = image stream entering the blocks, m0 = block
// 0's modulated image input, hL = image stream after every block, V = final_layer(hL, vec).
// Hunyuan3DDiT (2.0) indexes its blocks jointly: double blocks 0..n_db-1, then single blocks
// n_db..n_db+n_sb-1. HunYuanDiTPlain (2.1) has one kind of block, 0..depth-1.

#include <cstdint>

#include "models/core/tensor.h"

namespace gen3d::models {

// Branch outputs of the blocks, before the gate multiply and the residual add (spec §2.3).
enum class Branch {
  kImgAttn,  // double block: image rows of the joint attention after img_attn.proj
  kImgMlp,   // double block: image MLP output
  kTxtAttn,  // double block: condition rows of the joint attention after txt_attn.proj
  kTxtMlp,   // double block: condition MLP output
  kTotal,    // single block: linear2(concat(attn, gelu(mlp))), all Lc + L rows (context first)
  // HunYuanDiTPlain blocks, over all L + 1 rows (the time token first):
  kSelfAttn,   // attn1(norm1(x)) after out_proj
  kCrossAttn,  // attn2(norm2(x), context) after out_proj
  kFfn,        // mlp(norm3(x)) or moe(norm3(x)) (routed experts plus the shared expert)
};
constexpr int kNumBranches = 8;

struct BranchKey {
  int block = 0;  // joint block index
  Branch branch = Branch::kTotal;
};

// Read-only rows of a branch output: element (b, r, c) at data[b * batch_stride + r * dim + c].
struct RowsView {
  const float* data = nullptr;
  std::int64_t batch = 0, rows = 0, dim = 0, batch_stride = 0;
};

// Consulted by DiTPass::run_blocks for every branch (TaylorSeer).
class BranchHook {
 public:
  virtual ~BranchHook() = default;
  // false: compute branches and report them to computed(); true: ask predict() instead and run
  // only the modulation linears and the gated residual adds.
  virtual bool predicting() const = 0;
  // true: the condition stream is neither reported nor predicted (kTxt* skipped, kTotal limited
  // to the L image rows). Exact for the image rows on predict steps (spec §6.2 shortcut).
  // HunYuanDiTPlain has no condition stream (one time-token row): its branches are all rows.
  virtual bool image_rows_only() const { return false; }
  // Compute mode: the fresh branch output (a temporary: copy what you keep).
  virtual void computed(const BranchKey& key, const RowsView& y) = 0;
  // Predict mode: fill `out`, already shaped [B, rows, H] (rows as computed() would report).
  virtual void predict(const BranchKey& key, Tensor& out) = 0;
};

class DiTPass {
 public:
  virtual ~DiTPass() = default;
  virtual int num_blocks() const = 0;
  // Copy of the image-stream rows at this point: h0 before any block, h1 after block 0, ...
  // [B, L, H]
  virtual Tensor image_rows() const = 0;
  // Replaces the image-stream rows (e.g. hL := h0 + R on a skipped step). [B, L, H]
  virtual void set_image_rows(const Tensor& h) = 0;
  // m0 = (1 + scale1) * LN(h0) + shift1 of block 0's image modulation (2.0); norm1(h0) of block 0,
  // which has no modulation (2.1). [B, L, H]
  virtual Tensor block0_modulated_input() = 0;
  // Runs joint blocks [begin, end) in order on the current streams.
  virtual void run_blocks(int begin, int end, BranchHook* hook = nullptr) = 0;
  // V = final_layer(image rows, vec). [B, L, in_channels]
  virtual Tensor output() = 0;
};

}  // namespace gen3d::models
