#pragma once
// `gen3d shape`: condition tokens (--cond, assets/pipelines/shapegen.json), a reference image
// (--image, assets/pipelines/image_to_shape.json) or named views for a multiview model (--image
// front=A.png --image left=B.png ..., assets/pipelines/multiview_to_shape.json) -> mesh, the
// shipped pipeline's variables set from the command line.

#include <map>
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "pipeline/config.h"

namespace gen3d::app::cli {

inline constexpr const char* kShapeCondConfig = "assets/pipelines/shapegen.json";
inline constexpr const char* kShapeImageConfig = "assets/pipelines/image_to_shape.json";
inline constexpr const char* kShapeMultiviewConfig = "assets/pipelines/multiview_to_shape.json";
// Default steps of a model sampled with the consistency scheduler (the turbo models).
inline constexpr int kTurboSteps = 5;

struct ShapeOptions {
  RunOptions run;         // --set, trace, metrics, threads
  std::string config;     // --config: the pipeline to adapt ("": by mode, see above)
  std::string cond;       // --cond FILE.safetensors
  std::string cond_name;  // --cond-name TENSOR
  std::string image;      // --image FILE (exclusive with --cond)
  // --image VIEW=FILE items: a multiview model's views by name (front, left, back, right; any
  // subset). Exclusive with `image` and --cond.
  std::map<std::string, std::string> views;
  std::string conditioner;          // --conditioner: DINOv2 / combined checkpoint or folder
  std::string conditioner_config;   // --conditioner-config JSON
  std::string conditioner_section;  // --conditioner-section ('/'-separated path in that JSON)
  std::string models;               // --models: a folder of published model folders
  std::string model;                // --model DiT weights / folder, or with --models a short
                                    // name ("turbo", "fast", "2.0", ...) or a published folder name
  std::string vae;                  // --vae VAE weights / folder
  std::string output;               // -o, --output mesh file
  std::string method;               // --method dense|hierarchical|flashvdm
  std::string cache;                // --cache none|fbcache|teacache|taylorseer
  std::string precision;            // --precision auto|fp32|bf16|int8 (every network)
  std::string device;               // --device cpu|cuda (every network)
  int steps = -1;                   // -1: the config's default
  double guidance = -1e9;           // < -1e8: the config's default
  int seed = -1;
  int resolution = -1;
  int min_resolution = -1;
  int num_chunks = -1;
  int max_faces = -1;
  int latent_tokens = -1;
  bool dump = false;  // print the config it would run, and stop
};

// The pipeline `options` adapt: --config, else the --cond, --image or named-views default
// (shipped, compiled into the executable: see shipped_configs.h).
std::string shape_config(const ShapeOptions& options);

// Sorts the --image items into `options`: a bare path is the single image, VIEW=PATH (front,
// left, back, right) a multiview model's view. Returns a usage problem (an unknown or repeated
// view, a bare path beside named views, two bare paths), or "" when fine.
std::string set_shape_images(const std::vector<std::string>& items, ShapeOptions& options);

// Fills in what --model / --conditioner imply: with --models, --model names a published folder
// there (models/shape/shape_models.h); with a combined checkpoint (or its folder) that also holds
// `vae.*` / `conditioner.*` weights, --vae and (with --image) the conditioner default to it, and
// the latent count to its VAE's. Named views need a multiview conditioner (Hunyuan3D-2mv) and a
// single image a single-image one, when the conditioner's config says which. A model whose config
// names the consistency scheduler (the turbo models) defaults to 5 steps, and to its turbo VAE with
// FlashVDM decoding when that folder is beside it, as the official examples run them. Returns a
// usage problem, or "" when fine.
std::string resolve_shape_defaults(ShapeOptions& options);

// The --set list that adapts that pipeline to `options` as given (options' own --set last, so
// they win). Call resolve_shape_defaults first for the defaults a model folder implies.
std::vector<std::string> shape_sets(const ShapeOptions& options);

// The config `gen3d shape` runs for (resolved) options: the pipeline above with shape_sets
// applied (and, with named views, the load_image nodes of the views not given removed); and that
// config as a validated graph (the command line and the server run the same
// one). Throw ConfigError.
pipeline::PipelineConfig shape_pipeline_config(const ShapeOptions& options);
pipeline::Graph shape_graph(const ShapeOptions& options);

// Runs (or with dump, prints) the adapted pipeline; returns the process exit code. When --model
// names a combined checkpoint (or its folder) that also holds `vae.*` / `conditioner.*` weights,
// --vae and (with --image) the conditioner default to it. Usage errors give exit code 2.
int cmd_shape(const ShapeOptions& options);

}  // namespace gen3d::app::cli
