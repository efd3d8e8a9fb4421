#include "stages/register.h"

namespace gen3d::stages {

void register_texture_stages(pipeline::Registry& registry) {
  register_views_from_files(registry);
  register_views_from_reference(registry);
  register_views_from_mesh(registry);
  register_views_from_model(registry);
  register_views_from_pbr_model(registry);
  register_super_resolve(registry);
  register_fill_surface(registry);
  register_inpaint_texture(registry);
  register_bake_report(registry);
  register_texture_psnr(registry);
  register_pbr_stages(registry);
  registry.retire("multiview",
                  "it became one stage per source of view images: views_from_reference "
                  "(source=reference), views_from_files (files), views_from_mesh (render) and "
                  "views_from_model (model)");
}

void register_all_stages(pipeline::Registry& registry) {
  register_mesh_stages(registry);
  register_render_stages(registry);
  register_select_views(registry);
  register_image_stages(registry);
  register_texture_stages(registry);
  register_shape_stages(registry);
  register_cache_study(registry);
  register_check_models(registry);
  register_shape_vae_stages(registry);
  register_conditioner_stages(registry);
  register_port_codecs(registry);
}

}  // namespace gen3d::stages
