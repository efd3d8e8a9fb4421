#pragma once
// `gen3d texture` (and the default `gen3d batch` job): the command line picks one of the shipped
// texgen configs by its source of view images and sets that config's variables; it never edits
// the graph.
//
//   --image I [--image VIEW=I ...]   assets/pipelines/texgen.json           (reference image)
//   --views DIR                      assets/pipelines/texgen_views.json     (one image per view)
//   --views DIR --mr-views DIR2      assets/pipelines/texgen_views_pbr.json (+ metallic-roughness)
//   --source-mesh S                  assets/pipelines/texgen_transfer.json  (texture transfer)
//   --image I --models DIR [--turbo] assets/pipelines/texgen_models.json    (learned networks)

#include <string>

#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "pipeline/config.h"

namespace gen3d::app::cli {

struct TexgenSelection {
  std::string config;                              // shipped config name ("texgen_views")
  nlohmann::json vars = nlohmann::json::object();  // the variables the options set
};

// The config and variables for these options. Throws ConfigError for options that do not make a
// job (no source of view images, two sources, a bad view name, a missing model folder).
TexgenSelection select_texgen_config(const TextureOptions& options);

// The selected shipped config with its variables set (`--set` overrides are applied after).
pipeline::PipelineConfig build_texgen_config(const TextureOptions& options);

}  // namespace gen3d::app::cli
