// Shape-VAE stages: `vae_decode` (latents -> decoded latents), `volume_decode` (decoded latents ->
// logit grid, dense / hierarchical / FlashVDM) and `extract_surface` (grid -> mesh by marching
// cubes, with the official apps' optional post-processing). specs/volume-decoding.md.

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>

#include "mesh/cleanup.h"
#include "mesh/error.h"
#include "mesh/marching_cubes.h"
#include "mesh/simplify.h"
#include "models/core/error.h"
#include "models/core/precision.h"
#include "models/shape/checkpoints.h"
#include "models/shape/shape_vae.h"
#include "models/shape/volume_decoder.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {

void register_shape_vae_stages(pipeline::Registry& registry);

namespace {

using models::Tensor;
using pipeline::ParamMap;
using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

// Model params shared by the two VAE stages.
StageContract& vae_params(StageContract& c) {
  c.model_class()
      .reads_files("model", true)
      .reads_files("config")
      .required<std::string>(
          "model",
          "VAE weights: a .safetensors file or an official model folder "
          "(model.safetensors or model.fp16.safetensors + config.json); combined pipeline "
          "checkpoints use their vae.* tensors")
      .param<std::string>("config", "",
                          "config.yaml or JSON config (default: config.json, else config.yaml, "
                          "next to the weights)")
      .choice("precision", "auto", {"auto", "fp32", "bf16", "int8"},
              "network precision: bf16 (bf16 weights and GEMM / convolution operands, float32 "
              "accumulation, norms and state) or fp32; int8: bf16 with the attention projections "
              "and MLPs in int8 (per-channel weight and per-token activation scales); auto: bf16 "
              "where the CPU has AVX512-BF16 or AMX")
      .keys_by("precision", resolved_precision)
      .param<std::string>("config_section", "",
                          "section of the config with the VAE params (default: \"vae\" when the "
                          "file has one, else the whole file)");
  add_device_param(c);
  return c;
}

// The ShapeVAE of this node's params (loaded once per process, shared by vae_decode and
// volume_decode nodes and batch jobs).
std::shared_ptr<const models::ShapeVAE> load_vae(StageContext& ctx) {
  models::CheckpointSource src =
      models::resolve_checkpoint(ctx.param<std::string>("model"), ctx.param<std::string>("config"));
  src.section = ctx.param<std::string>("config_section");
  src.storage = models::storage_for(models::parse_precision(ctx.param<std::string>("precision")));
  src.device = node_device(ctx);
  auto span = ctx.span("load model");
  return models::shared_shape_vae(src);
}

class VaeDecode final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    StageContract c("vae_decode",
                    "ShapeVAE transformer: latents x (1/scale_factor) -> post_kl -> self-attention "
                    "blocks -> decoded latents.");
    c.input<Tensor>("latents", "sampler latents [B, N, embed_dim]")
        .output<Tensor>("decoded", "decoded latents [B, N, width]");
    return vae_params(c);
  }
  void check(const pipeline::ParamMap& params, std::vector<std::string>& problems) const override {
    check_device(params, problems);
  }
  void run(StageContext& ctx) const override {
    const auto vae = load_vae(ctx);
    const auto latents = ctx.in<Tensor>("latents");
    const DeviceTrace device_trace(ctx, vae->device());  // the GPU's work, in a trace
    auto span = ctx.span("decode");
    auto out = std::make_shared<Tensor>(vae->decode(*latents));
    spdlog::info("{}: decoded latents {}", ctx.node_id(), out->shape().str());
    ctx.out("decoded", std::move(out));
  }
};

class VolumeDecode final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    StageContract c("volume_decode",
                    "Query the geometry decoder on the (R+1)^3 grid: dense, hierarchical "
                    "(coarse-to-fine band) or FlashVDM (band + adaptive key selection).");
    c.input<Tensor>("decoded", "decoded latents [B, N, width]")
        .output<models::VolumeGrid>("grid", "logit grid of one batch item (NaN: not queried)")
        .choice("method", "dense", {"dense", "hierarchical", "flashvdm"}, "volume decoder")
        .param<int>("resolution", 384, Range{1, 4096}, "octree_resolution R (cells per axis)")
        .param<int>("min_resolution", 63, Range{1, 4096}, "coarsest level (hierarchical/flashvdm)")
        .param<double>("bounds", 1.01, Range{1e-6, 1e6}, "box [-bounds, bounds]^3")
        .param<int>("num_chunks", 8000, Range{1, 1 << 30},
                    "points per decoder call (memory knob; at least 65536 on a GPU)")
        .param<int>("mini_grid_num", 4, Range{1, 64}, "FlashVDM level-0 blocks per axis")
        .param<double>("band_abs_logit", 0.95, Range{0, 1e6}, "refinement band |logit - level|")
        .param<double>("level", 0.0, Range{-1e6, 1e6}, "iso level the band is built around")
        .param<int>("top_k", -1, Range{-1, 1 << 20}, "FlashVDM keys per head (-1: spec rule)")
        .param<int>("item", 0, Range{0, 1 << 20}, "batch item to decode");
    return vae_params(c);
  }
  void check(const pipeline::ParamMap& params, std::vector<std::string>& problems) const override {
    check_device(params, problems);
  }
  void run(StageContext& ctx) const override {
    const auto vae = load_vae(ctx);
    const auto decoded = ctx.in<Tensor>("decoded");
    models::VolumeDecodeOptions o;
    o.method = models::parse_volume_method(ctx.param<std::string>("method"));
    o.resolution = ctx.param<int>("resolution");
    o.min_resolution = ctx.param<int>("min_resolution");
    const double b = ctx.param<double>("bounds");
    o.bbox_min = {-b, -b, -b};
    o.bbox_max = {b, b, b};
    o.num_chunks = ctx.param<int64_t>("num_chunks");
    // A device field runs whole blocks of 16 Ki points: fewer, larger calls keep it busy.
    if (vae->device() != models::Device::kCpu)
      o.num_chunks = std::max<std::int64_t>(o.num_chunks, std::int64_t{1} << 16);
    o.mini_grid_num = ctx.param<int>("mini_grid_num");
    o.band_abs_logit = ctx.param<float>("band_abs_logit");
    o.level = ctx.param<float>("level");
    o.top_k = ctx.param<int64_t>("top_k");
    const DeviceTrace device_trace(ctx, vae->device());  // the GPU's work, in a trace
    const auto field = vae->geometry_field(*decoded, ctx.param<int64_t>("item"));
    models::VolumeDecodeStats st;
    auto grid = std::make_shared<models::VolumeGrid>();
    {
      auto span =
          ctx.span(fmt::format("{} R={}", models::volume_method_name(o.method), o.resolution));
      *grid = models::decode_volume(*field, o, &st);
    }
    ctx.count("volume_decode.points_queried", static_cast<double>(st.points_queried));
    const double dense = static_cast<double>(grid->n()) * grid->n() * grid->n();
    ctx.gauge("volume_decode.query_fraction", static_cast<double>(st.points_queried) / dense);
    spdlog::info("{}: {} levels {}, {} points queried ({:.1f} % of {}^3){}", ctx.node_id(),
                 models::volume_method_name(o.method), fmt::join(st.levels, "/"), st.points_queried,
                 100.0 * static_cast<double>(st.points_queried) / dense, grid->n(),
                 st.empty_band ? ", empty band: no surface" : "");
    ctx.out("grid", std::move(grid));
  }
};

class ExtractSurface final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("extract_surface",
                         "Marching cubes at the iso level (cubes with unqueried corners skipped), "
                         "then the official apps' optional clean-up: floaters, degenerate faces, "
                         "face reduction.")
        .input<models::VolumeGrid>("grid")
        .output<mesh::Mesh>("mesh")
        .param<double>("level", 0.0, Range{-1e6, 1e6}, "iso level (mc_level)")
        .choice("vertex_mapping", "reference_grid",
                {"reference_grid", "exact", "reference_request"},
                "index -> world: u/(r+1) (reference), u/r (exact), u/(R_req+1)")
        .param<int>("requested_resolution", 0, Range{0, 4096}, "R_req for reference_request")
        .param<double>("floater_ratio", 0.0, Range{0.0, 1.0},
                       "remove components below this fraction of all faces (official apps: 0.005 "
                       "of the largest component; 0: off)")
        .param<bool>("remove_degenerate", false, "drop faces with repeated indices or zero area")
        .param<int>("max_faces", 0, Range{0, 1 << 30},
                    "quadric face reduction target (official apps: 40000; 0: off)")
        .param<bool>("allow_empty", false, "an empty mesh instead of an error when no surface");
  }
  void run(StageContext& ctx) const override {
    const auto grid = ctx.in<models::VolumeGrid>("grid");
    mesh::MarchingCubesOptions o;
    o.level = ctx.param<float>("level");
    const auto map = ctx.param<std::string>("vertex_mapping");
    o.mapping = map == "exact"               ? mesh::VertexMapping::kExact
                : map == "reference_request" ? mesh::VertexMapping::kReferenceRequest
                                             : mesh::VertexMapping::kReferenceGrid;
    o.requested_resolution = ctx.param<int>("requested_resolution");
    for (int a = 0; a < 3; ++a) {
      o.bbox_min[static_cast<std::size_t>(a)] =
          static_cast<float>(grid->bbox_min[static_cast<std::size_t>(a)]);
      o.bbox_max[static_cast<std::size_t>(a)] =
          static_cast<float>(grid->bbox_max[static_cast<std::size_t>(a)]);
    }
    mesh::MarchingCubesReport rep;
    auto m = std::make_shared<mesh::Mesh>();
    {
      auto span = ctx.span("marching cubes");
      *m = mesh::marching_cubes({grid->values.data(), grid->n(), grid->n(), grid->n()}, o, &rep);
    }
    ctx.count("extract_surface.skipped_cubes", static_cast<double>(rep.skipped_cubes));
    if (rep.no_surface) {
      if (!ctx.param<bool>("allow_empty"))
        throw mesh::MeshError(ctx.node_id() + ": no surface at level " + std::to_string(o.level) +
                              " (the grid has no sign change there)");
      ctx.out("mesh", std::move(m));
      return;
    }
    const double floater = ctx.param<double>("floater_ratio");
    if (floater > 0.0 || ctx.param<bool>("remove_degenerate")) {
      auto span = ctx.span("clean-up");
      mesh::CleanupOptions c;
      c.remove_degenerate = ctx.param<bool>("remove_degenerate");
      c.remove_duplicates = false;
      c.min_component_faces = floater;
      mesh::CleanupReport cr;
      *m = mesh::cleanup(*m, c, &cr);
      ctx.count("extract_surface.floater_faces", static_cast<double>(cr.component_faces));
      ctx.count("extract_surface.degenerate_faces", static_cast<double>(cr.degenerate_faces));
    }
    const auto max_faces = static_cast<std::size_t>(ctx.param<int64_t>("max_faces"));
    if (max_faces > 0 && m->faces.size() > max_faces) {
      auto span = ctx.span("face reduction");
      mesh::SimplifyOptions s;
      s.target_faces = max_faces;
      s.lock_border = true;
      *m = mesh::simplify(*m, s);
    }
    spdlog::info("{}: {} vertices, {} faces", ctx.node_id(), m->vertex_count(), m->face_count());
    ctx.out("mesh", std::move(m));
  }
};

}  // namespace

void register_shape_vae_stages(pipeline::Registry& registry) {
  registry.add<VaeDecode>();
  registry.add<VolumeDecode>();
  registry.add<ExtractSurface>();
}

}  // namespace gen3d::stages
