#pragma once
// Explicit stage registration (static self-registration would be dropped from static libraries).

#include "pipeline/stage.h"

namespace gen3d::stages {

void register_mesh_stages(pipeline::Registry& registry);
void register_render_stages(pipeline::Registry& registry);
// select_views: Hunyuan3D-2.1's per-mesh choice of bake views.
void register_select_views(pipeline::Registry& registry);
void register_image_stages(pipeline::Registry& registry);
// The texture stages: the view images by source, their super-resolution, then filling and
// checking the texture (the nine below, one stage per file).
void register_texture_stages(pipeline::Registry& registry);
void register_views_from_files(pipeline::Registry& registry);
void register_views_from_reference(pipeline::Registry& registry);
void register_views_from_mesh(pipeline::Registry& registry);
void register_views_from_model(pipeline::Registry& registry);
void register_views_from_pbr_model(pipeline::Registry& registry);
void register_super_resolve(pipeline::Registry& registry);
void register_fill_surface(pipeline::Registry& registry);
void register_inpaint_texture(pipeline::Registry& registry);
void register_bake_report(pipeline::Registry& registry);
void register_texture_psnr(pipeline::Registry& registry);
void register_pbr_stages(pipeline::Registry& registry);
void register_shape_stages(pipeline::Registry& registry);
void register_cache_study(pipeline::Registry& registry);
void register_check_models(pipeline::Registry& registry);
void register_shape_vae_stages(pipeline::Registry& registry);
void register_conditioner_stages(pipeline::Registry& registry);

// The stage cache's serialization of every port type (port_codecs.cpp).
void register_port_codecs(pipeline::Registry& registry);

// Everything the gen3d executable offers.
void register_all_stages(pipeline::Registry& registry);

}  // namespace gen3d::stages
