#pragma once
// The value types that travel between stages, and the names contracts and messages show for them.

#include <string>
#include <vector>

#include "image/image.h"
#include "mesh/mesh.h"
#include "mesh/normalize.h"
#include "pipeline/stage.h"
#include "render/back_project.h"
#include "render/camera.h"
#include "render/merge.h"
#include "render/texture_inpaint.h"

namespace gen3d::stages {

// One image per view, in view order; an empty Image means "nothing for this view".
using ImageList = std::vector<image::Image>;
// One back-projection per view, in view order (empty texture: the view had no image).
using BakeList = std::vector<render::BackProjection>;
// Text for people that a command prints as it is (a comparison table, a summary).
struct TextReport {
  std::string text;
};
// How well a reference image was registered onto the views it was placed on: the lowest
// silhouette IoU of its fits (0 when no silhouette fit was made).
struct ReferenceFit {
  double iou = 0;
};

}  // namespace gen3d::stages

GEN3D_PORT_TYPE(gen3d::mesh::Mesh, "Mesh");
GEN3D_PORT_TYPE(gen3d::image::Image, "Image");
GEN3D_PORT_TYPE(gen3d::mesh::NormalizeTransform, "Transform");
GEN3D_PORT_TYPE(gen3d::render::ViewSet, "ViewSet");
GEN3D_PORT_TYPE(gen3d::stages::ImageList, "ImageList");
GEN3D_PORT_TYPE(gen3d::stages::BakeList, "BakeList");
GEN3D_PORT_TYPE(gen3d::render::MergeResult, "MergedTexture");
GEN3D_PORT_TYPE(gen3d::render::InpaintReport, "InpaintReport");
GEN3D_PORT_TYPE(gen3d::render::SurfaceFillResult, "SurfaceFill");
GEN3D_PORT_TYPE(gen3d::stages::TextReport, "TextReport");
GEN3D_PORT_TYPE(gen3d::stages::ReferenceFit, "ReferenceFit");

#include "models/core/tensor.h"
GEN3D_PORT_TYPE(gen3d::models::Tensor, "Tensor");

#include "models/shape/volume_decoder.h"
GEN3D_PORT_TYPE(gen3d::models::VolumeGrid, "VolumeGrid");
