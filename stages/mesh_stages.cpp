// Mesh stages: load, describe and save meshes.

#include <cmath>
#include <filesystem>
#include <limits>

#include <spdlog/spdlog.h>

#include "mesh/io.h"
#include "stages/register.h"
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
                         "Read a mesh file (OBJ, GLB/glTF, PLY, STL, FBX, OFF) with assimp.")
        .output<mesh::Mesh>("mesh", "all meshes of the file merged, node transforms applied")
        .required<std::string>("path", "mesh file to read");
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
        m->texture ? std::to_string(m->texture->width) + "x" + std::to_string(m->texture->height)
                   : "none",
        lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]);
    ctx.gauge("mesh.vertices", static_cast<double>(m->vertex_count()));
    ctx.gauge("mesh.faces", static_cast<double>(m->face_count()));
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
        .required<std::string>("path", "output file; its directory must exist");
  }
  void check(const pipeline::ParamMap& params, std::vector<std::string>& problems) const override {
    const std::filesystem::path path(std::get<std::string>(params.at("path")));
    const std::string ext = path.extension().string();
    if (ext != ".glb" && ext != ".obj" && ext != ".ply")
      problems.push_back("output format \"" + ext + "\" is not supported (use .glb, .obj or .ply)");
    const auto dir = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
    if (!std::filesystem::is_directory(dir))
      problems.push_back("output directory does not exist: " + dir.string());
  }
  void run(StageContext& ctx) const override {
    auto m = ctx.in<mesh::Mesh>("mesh");
    const auto path = ctx.param<std::string>("path");
    mesh::save_mesh(*m, path);
    spdlog::info("{}: wrote {}", ctx.node_id(), path);
  }
};

}  // namespace

void register_mesh_stages(pipeline::Registry& registry) {
  registry.add<LoadMesh>();
  registry.add<MeshInfo>();
  registry.add<SaveMesh>();
}

}  // namespace gen3d::stages
