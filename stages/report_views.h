#pragma once
// Pictures for the run report that no stage output holds.

#include <cstdint>
#include <vector>

#include "mesh/mesh.h"
#include "render/camera.h"
#include "stages/types.h"

namespace gen3d::stages {

// Where each view's surface came from: `textured` (a texture_inpaint result: one texture, or one
// per material) rendered from `views` at size x size with its texture replaced by the per-texel
// source map (render::source_colors: green seen, blue mirrored, orange surface fill, red image
// inpainting). Empty when `sources` does not match the texture.
ImageList render_texel_sources(const mesh::Mesh& textured, const std::vector<uint8_t>& sources,
                               const render::ViewSet& views, int size);

}  // namespace gen3d::stages
