#include "mesh/simplify.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <meshoptimizer.h>

#include "mesh/cleanup.h"
#include "mesh/error.h"
#include "mesh/seams.h"

namespace gen3d::mesh {

Mesh simplify(const Mesh& mesh, const SimplifyOptions& options, SimplifyReport* report) {
  if (mesh.faces.empty()) throw MeshError("simplify: the mesh has no faces");
  for (const Tri& f : mesh.faces)
    for (uint32_t v : f)
      if (v >= mesh.positions.size()) throw MeshError("simplify: a face index is out of range");
  if (options.target_faces == 0 && !(options.target_ratio > 0.0f && options.target_ratio <= 1.0f)) {
    throw MeshError("simplify: target_ratio must be in (0, 1], got " +
                    std::to_string(options.target_ratio));
  }
  const size_t target =
      options.target_faces > 0
          ? options.target_faces
          : size_t(std::llround(double(options.target_ratio) * double(mesh.faces.size())));

  // meshopt detects seams from vertices that share a position but not their other attributes, so
  // the seam-split copy keeps every UV island's boundary and every material's border.
  const bool materials = mesh.has_materials();
  const bool seams = (options.preserve_uv_seams && mesh.has_uvs()) || materials;
  std::vector<uint32_t> source;  // split vertex -> position index
  const Mesh work = seams ? split_uv_seams(mesh, &source) : mesh;

  std::vector<uint32_t> indices(work.faces.size() * 3);
  for (size_t f = 0; f < work.faces.size(); ++f)
    for (int k = 0; k < 3; ++k) indices[3 * f + k] = work.faces[f][k];
  std::vector<uint32_t> out_idx(indices.size());
  float error = 0.0f;
  const unsigned flags = options.lock_border ? unsigned(meshopt_SimplifyLockBorder) : 0u;
  const size_t n =
      meshopt_simplify(out_idx.data(), indices.data(), indices.size(), work.positions[0].data(),
                       work.positions.size(), sizeof(Vec3), std::min(target, mesh.faces.size()) * 3,
                       options.max_error, flags, &error);
  out_idx.resize(n);

  Mesh out;
  out.texture = mesh.texture;
  out.pbr = mesh.pbr;
  out.materials = mesh.materials;
  out.shared_atlas = mesh.shared_atlas;
  out.positions = mesh.positions;
  out.colors = mesh.colors;
  out.faces.resize(n / 3);
  if (seams && mesh.has_uvs()) {
    out.uvs = work.uvs;  // one per split vertex
    out.uv_faces.resize(n / 3);
  } else if (mesh.has_uvs()) {
    // Without seam preservation each face keeps the UV corners of its surviving vertices: take
    // any corner's UV that used that vertex in the input.
    std::vector<uint32_t> uv_of(mesh.positions.size(), 0);
    for (size_t f = 0; f < mesh.faces.size(); ++f)
      for (int k = 0; k < 3; ++k) uv_of[mesh.faces[f][k]] = mesh.uv_faces[f][k];
    out.uvs = mesh.uvs;
    out.uv_faces.resize(n / 3);
    for (size_t f = 0; f < n / 3; ++f)
      for (int k = 0; k < 3; ++k) out.uv_faces[f][k] = uv_of[out_idx[3 * f + k]];
  }
  for (size_t f = 0; f < n / 3; ++f) {
    for (int k = 0; k < 3; ++k) {
      const uint32_t v = out_idx[3 * f + k];
      out.faces[f][k] = seams ? source[v] : v;
      if (seams && mesh.has_uvs()) out.uv_faces[f][k] = v;
    }
  }
  if (materials) {  // every split vertex belongs to one material: read it off any face using it
    std::vector<uint32_t> material_of(work.positions.size(), 0);
    for (size_t f = 0; f < work.faces.size(); ++f)
      for (uint32_t v : work.faces[f]) material_of[v] = work.face_materials[f];
    out.face_materials.resize(n / 3);
    for (size_t f = 0; f < n / 3; ++f) out.face_materials[f] = material_of[out_idx[3 * f]];
  }
  CleanupOptions tidy;  // only drop what no face uses; geometry decisions were meshopt's
  tidy.remove_degenerate = false;
  tidy.remove_duplicates = false;
  out = cleanup(out, tidy);
  if (report) *report = {mesh.faces.size(), out.faces.size(), error};
  return out;
}

}  // namespace gen3d::mesh
