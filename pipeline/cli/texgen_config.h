#pragma once
// `gen3d texture`: the shipped texgen config (assets/pipelines/texgen.json, compiled in), adapted
// to the command line's inputs.

#include "pipeline/cli/commands.h"
#include "pipeline/config.h"

namespace gen3d::cli {

// The default texgen pipeline as shipped.
const char* default_texgen_json();

// The texgen config for these options: the image branch when images are given, multiview from
// files (--views), a reference image (--image) or a textured source mesh (--source-mesh).
// Throws ConfigError when the options do not make a job (no source of view images, bad view name).
pipeline::PipelineConfig build_texgen_config(const TextureOptions& options);

}  // namespace gen3d::cli
