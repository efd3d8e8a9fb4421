#pragma once
// The names of the value types that travel between stages, as shown in contracts and messages.

#include "mesh/image.h"
#include "mesh/mesh.h"
#include "pipeline/stage.h"

GEN3D_PORT_TYPE(gen3d::mesh::Mesh, "Mesh");
GEN3D_PORT_TYPE(gen3d::mesh::Image, "Image");
