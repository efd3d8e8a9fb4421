#include "stages/register.h"

namespace gen3d::stages {

void register_all_stages(pipeline::Registry& registry) {
  register_mesh_stages(registry);
}

}  // namespace gen3d::stages
