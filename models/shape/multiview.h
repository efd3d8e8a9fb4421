#pragma once
// Hunyuan3D-2mv's multiview condition: the views by name, their fixed sinusoidal view embedding,
// and how per-view DINOv2 tokens become one condition sequence. Reference:
// hy3dgen/shapegen/preprocessors.py (MVImageProcessorV2: view2idx, sorting by index) and
// hy3dgen/shapegen/models/conditioner.py (DinoImageEncoderMV: view_embed, forward).

#include <array>
#include <optional>
#include <span>
#include <string_view>

#include "models/core/tensor.h"

namespace gen3d::models {

// MVImageProcessorV2.view2idx: front 0, left 1 (front turned 90 degrees clockwise), back 2,
// right 3 (turned 270 degrees).
inline constexpr std::array<std::string_view, 4> kMultiviewNames = {"front", "left", "back",
                                                                    "right"};
// The index of a view name, or nullopt for another name.
std::optional<int> multiview_index(std::string_view name);

// get_1d_sincos_pos_embed_from_grid(hidden, arange(view_num)), computed in double and rounded to
// float as the reference does: row v = [sin(v w_0) .. sin(v w_{C/2-1}), cos(v w_0) ..], with
// w_i = 10000^(-i / (C/2)). [view_num, C]; C must be even.
Tensor multiview_embedding(int hidden, int view_num);

// DinoImageEncoderMV.forward after the encoder: hidden [V, T, C] (last_hidden_state of the views,
// in increasing view index) plus the embedding row of each view's index (view_idxs: V distinct
// indices in [0, view_embed rows), increasing, as the processor sorts them), then the views
// concatenated: [1, V T, C]. view_embed is multiview_embedding(C, view_num).
Tensor add_multiview_embedding(const Tensor& hidden, std::span<const int> view_idxs,
                               const Tensor& view_embed);

}  // namespace gen3d::models
