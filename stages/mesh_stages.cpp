// Mesh stages: load, describe and save meshes.

#include <cmath>
#include <filesystem>
#include <limits>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "mesh/cleanup.h"
#include "mesh/error.h"
#include "mesh/io.h"
#include "mesh/normalize.h"
#include "mesh/seams.h"
#include "mesh/simplify.h"
#include "mesh/uv_unwrap.h"
#include "render/texture_tiles.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

class LoadMesh final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("load_mesh",
                         "Read a mesh file: glTF/GLB with tinygltf (Draco with libdraco), OBJ/MTL, "
                         "PLY, STL, FBX and OFF with assimp after a pre-check.")
        .output<mesh::Mesh>("mesh", "all meshes of the file merged, node transforms applied")
        .required<std::string>("path", "mesh file to read")
        .cache_policy(pipeline::CachePolicy::Never)
        .reads_files("path", true);
  }
  void check(const pipeline::ParamMap& params, std::vector<std::string>& problems) const override {
    const auto& path = std::get<std::string>(params.at("path"));
    if (!std::filesystem::is_regular_file(path)) problems.push_back("mesh file not found: " + path);
  }
  void run(StageContext& ctx) const override {
    auto m = std::make_shared<mesh::Mesh>(mesh::load_mesh(ctx.param<std::string>("path")));
    ctx.count("mesh.loaded_faces", static_cast<double>(m->face_count()));
    ctx.out("mesh", std::move(m));
  }
};

// Logs counts and bounds and records them as counters: a cheap look at what flows through.
class MeshInfo final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("mesh_info", "Report vertex/face counts, UV/texture presence and bounds.")
        .cache_policy(pipeline::CachePolicy::Never)
        .input<mesh::Mesh>("mesh")
        .output<mesh::Mesh>("mesh", "the input, unchanged");
  }
  void run(StageContext& ctx) const override {
    auto m = ctx.in<mesh::Mesh>("mesh");
    mesh::Vec3 lo{std::numeric_limits<float>::max(), std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::max()};
    mesh::Vec3 hi{-lo[0], -lo[1], -lo[2]};
    for (const mesh::Vec3& p : m->positions) {
      for (int k = 0; k < 3; ++k) {
        lo[k] = std::min(lo[k], p[k]);
        hi[k] = std::max(hi[k], p[k]);
      }
    }
    spdlog::info(
        "{}: {} vertices, {} faces, uvs: {}, texture: {}, bounds [{:.4g} {:.4g} {:.4g}] .. "
        "[{:.4g} {:.4g} {:.4g}]",
        ctx.node_id(), m->vertex_count(), m->face_count(), m->has_uvs() ? "yes" : "no",
        m->has_materials() ? std::to_string(m->materials.size()) + " materials"
        : m->texture ? std::to_string(m->texture->width) + "x" + std::to_string(m->texture->height)
                     : "none",
        lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]);
    ctx.gauge("mesh.vertices", static_cast<double>(m->vertex_count()));
    ctx.gauge("mesh.faces", static_cast<double>(m->face_count()));
    ctx.gauge("mesh.materials", static_cast<double>(std::max<size_t>(m->materials.size(), 1)));
    ctx.gauge("mesh.extent", std::max({hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]}));
    ctx.out("mesh", m);
  }
};

class SaveMesh final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("save_mesh",
                         "Write a mesh atomically; the format follows the extension (.glb, .obj, "
                         ".ply).")
        .input<mesh::Mesh>("mesh")
        .optional_input<mesh::NormalizeTransform>(
            "transform", "undone before writing, so the file is in the input's frame")
        .required<std::string>("path", "output file; missing directories are created");
  }
  void check(const pipeline::ParamMap& params, std::vector<std::string>& problems) const override {
    const std::filesystem::path path(std::get<std::string>(params.at("path")));
    const std::string ext = path.extension().string();
    if (ext != ".glb" && ext != ".obj" && ext != ".ply")
      problems.push_back("output format \"" + ext + "\" is not supported (use .glb, .obj or .ply)");
    check_output_path(path.string(), problems);
  }
  void run(StageContext& ctx) const override {
    auto m = ctx.in<mesh::Mesh>("mesh");
    const auto path = ctx.param<std::string>("path");
    make_output_dir(path);
    if (ctx.has_input("transform")) {
      mesh::Mesh restored = *m;
      mesh::invert_normalization(restored, *ctx.in<mesh::NormalizeTransform>("transform"));
      mesh::save_mesh(restored, path);
    } else {
      mesh::save_mesh(*m, path);
    }
    spdlog::info("{}: wrote {}", ctx.node_id(), path);
  }
};

// The reference texgen normalization: axis change, centring, scale to the 1.15 bounding sphere,
// v flip. The transform travels on so save_mesh can restore the user's frame.
class NormalizeMesh final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("normalize_mesh",
                         "Move the mesh into the renderer's frame (the reference's normalization).")
        .input<mesh::Mesh>("mesh")
        .output<mesh::Mesh>("mesh", "normalized: internal axes, centred, scaled, v flipped")
        .output<mesh::NormalizeTransform>("transform", "what was applied, for save_mesh to undo")
        .param<double>("scale_factor", 1.15, Range{0.01, 100.0},
                       "diameter of the bounding sphere after scaling")
        .param<bool>("auto_center", true, "centre the bounding box on the origin")
        .param<bool>("split_seams", true,
                     "one UV per vertex, as the reference's unwrapped meshes: normals then do not "
                     "smooth across UV charts (hard edges stay hard in maps and bakes)");
  }
  void run(StageContext& ctx) const override {
    auto in = ctx.in<mesh::Mesh>("mesh");
    auto m = std::make_shared<mesh::Mesh>(ctx.param<bool>("split_seams") ? mesh::split_uv_seams(*in)
                                                                         : *in);
    mesh::NormalizeOptions options;
    options.scale_factor = ctx.param<double>("scale_factor");
    options.auto_center = ctx.param<bool>("auto_center");
    auto t = std::make_shared<mesh::NormalizeTransform>(mesh::normalize_mesh(*m, options));
    ctx.out("mesh", std::move(m));
    ctx.out("transform", std::move(t));
  }
};

class CleanMesh final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("clean_mesh",
                         "Remove degenerate/duplicate faces, unused vertices and small floaters; "
                         "turn inside-out closed parts outward.")
        .input<mesh::Mesh>("mesh")
        .output<mesh::Mesh>("mesh")
        .param<double>("merge_distance", -1.0, Range{-1.0, 1e6},
                       "merge vertices closer than this (< 0: off, 0: exact duplicates)")
        .param<double>("min_component_faces", 0.0, Range{0.0, 1.0},
                       "drop components with fewer faces than this fraction (0: off)")
        .param<double>("min_component_area", 0.0, Range{0.0, 1.0},
                       "drop components with less area than this fraction (0: off)");
  }
  void run(StageContext& ctx) const override {
    mesh::CleanupOptions options;
    options.merge_distance = ctx.param<float>("merge_distance");
    options.min_component_faces = ctx.param<double>("min_component_faces");
    options.min_component_area = ctx.param<double>("min_component_area");
    mesh::CleanupReport report;
    auto m =
        std::make_shared<mesh::Mesh>(mesh::cleanup(*ctx.in<mesh::Mesh>("mesh"), options, &report));
    ctx.count("clean.degenerate_faces", static_cast<double>(report.degenerate_faces));
    ctx.count("clean.duplicate_faces", static_cast<double>(report.duplicate_faces));
    ctx.count("clean.flipped_faces", static_cast<double>(report.flipped_faces));
    if (report.flipped_faces > 0)
      spdlog::info("{}: {} faces of inside-out parts turned outward", ctx.node_id(),
                   report.flipped_faces);
    ctx.count("clean.removed_components", static_cast<double>(report.removed_components));
    ctx.count("clean.merged_vertices", static_cast<double>(report.merged_vertices));
    if (m->faces.empty())
      throw mesh::MeshError(fmt::format(
          "every face is degenerate (zero surface area), duplicated or in a removed component "
          "({} degenerate, {} duplicate, {} in small components)",
          report.degenerate_faces, report.duplicate_faces, report.component_faces));
    ctx.out("mesh", std::move(m));
  }
};

class SimplifyMesh final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("simplify_mesh",
                         "Decimate to a face target with meshoptimizer, keeping UV seams.")
        .input<mesh::Mesh>("mesh")
        .output<mesh::Mesh>("mesh")
        .param<int>("faces", 0, Range{0, 1e9}, "target face count (0: keep the mesh as it is)")
        .param<double>("ratio", 1.0, Range{0.0, 1.0},
                       "target as a fraction of the input, used when faces is 0 (1: keep)");
  }
  void run(StageContext& ctx) const override {
    auto in = ctx.in<mesh::Mesh>("mesh");
    const auto faces = ctx.param<int64_t>("faces");
    const double ratio = ctx.param<double>("ratio");
    const bool keep = faces == 0 ? ratio >= 1.0 : static_cast<size_t>(faces) >= in->face_count();
    if (keep) {
      ctx.out("mesh", in);
      return;
    }
    mesh::SimplifyOptions options;
    options.target_faces = static_cast<size_t>(faces);
    options.target_ratio = static_cast<float>(ratio);
    mesh::SimplifyReport report;
    auto m = std::make_shared<mesh::Mesh>(mesh::simplify(*in, options, &report));
    ctx.gauge("simplify.input_faces", static_cast<double>(report.input_faces));
    ctx.gauge("simplify.output_faces", static_cast<double>(report.output_faces));
    spdlog::info("{}: {} -> {} faces", ctx.node_id(), report.input_faces, report.output_faces);
    ctx.out("mesh", std::move(m));
  }
};

// Why the mesh's own UVs cannot hold a new texture, or empty when they can: every material's
// faces lie apart from each other in its texture (modulo 1: UVs repeat) and cover texels.
std::string uv_refusal(const mesh::Mesh& m, const mesh::UvCheckResult& check, double max_overlap) {
  const auto material = [&](size_t k) {
    const std::string name = k < m.materials.size() ? m.materials[k].name : std::string();
    return name.empty() ? fmt::format("material {}", k) : fmt::format("material '{}'", name);
  };
  const bool several = m.has_materials() && check.materials.size() > 1;
  if (check.non_finite > 0)
    return fmt::format("{} UV coordinates are not finite", check.non_finite);
  if (check.wide_faces > 0)
    return fmt::format("{} faces span more than one repeat of their texture", check.wide_faces);
  if (check.worst_material >= 0) {
    const mesh::UvMaterialCheck& c = check.materials[static_cast<size_t>(check.worst_material)];
    if (c.overlap_fraction > max_overlap)
      return fmt::format("faces {}share texels: {:.2f}% of {} covered texels overlap{}",
                         several ? "of " + material(static_cast<size_t>(check.worst_material)) + " "
                                 : std::string(),
                         100.0 * c.overlap_fraction, several ? "its" : "the",
                         check.out_of_range > 0 ? " (UVs taken modulo 1)" : "");
  }
  for (size_t k = 0; k < check.materials.size(); ++k) {
    const mesh::UvMaterialCheck& c = check.materials[k];
    if (c.faces > 0 && c.covered_texels == 0)
      return several ? fmt::format("the faces of {} cover no texel", material(k))
                     : std::string("they cover no texel");
  }
  return {};
}

class UvUnwrap final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract(
               "uv_unwrap",
               "Give the mesh a UV atlas: charts, parameterization, packing with a gutter.")
        .semantics_version(2)  // 2: kept UVs repeat and have a texture per material
        .input<mesh::Mesh>("mesh")
        .output<mesh::Mesh>("mesh", "the mesh with uvs/uv_faces")
        .param<int>("texture_size", 2048, Range{64, 16384},
                    "atlas resolution in texels; with kept UVs, that of each material's texture")
        .param<int>("gutter", 4, Range{0, 64}, "empty texels between charts")
        .param<double>("max_seconds", 10.0, Range{0.01, 3600.0},
                       "time budget; past it a faster strategy finishes the job")
        .param<bool>("keep_existing", true,
                     "keep the mesh's own UVs when they can hold a new texture (each material "
                     "gets one; UVs repeat past [0, 1]; a material's faces cover texels and "
                     "overlap at most max_overlap, modulo 1); else unwrap anew")
        .param<double>("max_overlap", 0.05, Range{0.0, 1.0},
                       "kept UVs: the largest share of a material's covered texels that two of "
                       "its faces may share");
  }
  void check(const pipeline::ParamMap& params, std::vector<std::string>& problems) const override {
    const auto size = std::get<int64_t>(params.at("texture_size"));
    if ((size & (size - 1)) != 0)
      problems.push_back("texture_size " + std::to_string(size) + " is not a power of two");
  }
  void run(StageContext& ctx) const override {
    auto in = ctx.in<mesh::Mesh>("mesh");
    const int size = ctx.param<int>("texture_size");
    if (in->has_uvs() && ctx.param<bool>("keep_existing")) {
      const double max_overlap = ctx.param<double>("max_overlap");
      const mesh::UvCheckResult check = mesh::check_uvs(*in, size, max_overlap);
      // A texture baked into UVs where two faces of one material share texels (mirrored halves,
      // a texture tiled over a face) or that cover nothing would come out wrong or blank: those
      // are replaced. UVs past [0, 1] repeat, as viewers read them, and each material has a
      // texture of its own: neither is a reason.
      if (check.worst_material >= 0)
        ctx.gauge("uv.overlap_fraction",
                  check.materials[static_cast<size_t>(check.worst_material)].overlap_fraction);
      const std::string refusal = uv_refusal(*in, check, max_overlap);
      if (refusal.empty()) {
        const int tiles = render::texture_tiles(*in);
        const int tile = render::tile_size(size, tiles);
        ctx.gauge("uv.kept", 1);
        ctx.gauge("uv.textures", tiles);
        const std::string repeat =
            check.out_of_range > 0
                ? fmt::format("; {} UV coordinates outside [0, 1] repeat", check.out_of_range)
                : std::string();
        if (tiles > 1)
          spdlog::info("{}: keeping the mesh's own UVs: {} materials, a {} x {} texture each{}{}",
                       ctx.node_id(), tiles, tile, tile,
                       tile < size
                           ? fmt::format(" (more than {} materials share the texels of {} {} x {} "
                                         "textures)",
                                         render::kFullSizeTiles, render::kFullSizeTiles, size, size)
                           : std::string(),
                       repeat);
        else
          spdlog::info("{}: keeping the mesh's own UVs{}", ctx.node_id(), repeat);
        ctx.out("mesh", in);
        return;
      }
      spdlog::warn("{}: the mesh's own UVs cannot hold a new texture ({}); unwrapping anew",
                   ctx.node_id(), refusal);
    }
    ctx.gauge("uv.kept", 0);
    mesh::UnwrapOptions options;
    options.texture_size = size;
    options.gutter = ctx.param<int>("gutter");
    options.max_seconds = ctx.param<double>("max_seconds");
    mesh::UnwrapResult result = mesh::uv_unwrap(*in, options);
    const mesh::UnwrapMetrics& m = result.metrics;
    ctx.gauge("uv.charts", static_cast<double>(m.charts));
    ctx.gauge("uv.utilization", m.utilization);
    ctx.gauge("uv.angle_distortion", m.angle_distortion);
    ctx.gauge("uv.area_distortion", m.area_distortion);
    ctx.gauge("uv.seam_length", m.seam_length);
    spdlog::info("{}: {} charts, {:.1f}% of the atlas used, {:.0f} ms", ctx.node_id(), m.charts,
                 100.0 * m.utilization, 1000.0 * m.seconds);
    ctx.out("mesh", std::make_shared<mesh::Mesh>(std::move(result.mesh)));
  }
};

}  // namespace

void register_mesh_stages(pipeline::Registry& registry) {
  registry.add<LoadMesh>();
  registry.add<MeshInfo>();
  registry.add<SaveMesh>();
  registry.add<NormalizeMesh>();
  registry.add<CleanMesh>();
  registry.add<SimplifyMesh>();
  registry.add<UvUnwrap>();
}

}  // namespace gen3d::stages
