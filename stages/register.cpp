#include "stages/register.h"

namespace gen3d::stages {

void register_all_stages(pipeline::Registry& registry) {
  register_mesh_stages(registry);
  register_render_stages(registry);
  register_image_stages(registry);
  register_texture_stages(registry);
  register_shape_stages(registry);
  register_shape_vae_stages(registry);
  register_conditioner_stages(registry);
}

}  // namespace gen3d::stages
