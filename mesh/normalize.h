#pragma once
// The texgen reference's mesh normalisation (golden README §1) and its inverse, so results can be
// saved back in the user's frame.

#include "mesh/mesh.h"

namespace gen3d::mesh {

struct NormalizeOptions {
  // Diameter of the bounding sphere around the box centre after normalisation (reference: 1.15).
  // A double, like the Python constant the reference divides.
  double scale_factor = 1.15;
  // Move the bounding-box centre to the origin (reference: auto_center = true).
  bool auto_center = true;
  // Map input (x, y, z) to the reference's internal frame (-x, z, -y). This is a reflection
  // (determinant -1): faces keep their winding, so geometric normals flip (README Q8).
  bool texgen_axes = true;
  // Replace v by 1 - v, as the reference renderer holds UVs.
  bool flip_v = true;
};

// A fitted normalisation. Every field is what the reference computes, in float32.
struct NormalizeTransform {
  bool texgen_axes = true;      // axis change applied
  bool flip_v = true;           // v -> 1 - v applied
  Vec3 center = {0, 0, 0};      // box centre in the internal frame (zero without auto_center)
  float scale = 1.0f;           // 2 x the largest vertex distance from `center`
  float multiplier = 1.0f;      // float(scale_factor / scale), the factor applied
  double multiplier_f64 = 1.0;  // the same in float64, as the reference prints it

  Vec3 apply(const Vec3& p) const;   // input frame -> normalised
  Vec3 invert(const Vec3& q) const;  // normalised -> input frame (rounded once from float64)
  Vec3 apply_direction(const Vec3& n) const;  // axis change only (normals)
  Vec3 invert_direction(const Vec3& n) const;
};

// Fits the normalisation to the positions used by the mesh's faces (all positions when there are
// no faces). Throws MeshError on an empty mesh or one whose vertices all coincide.
NormalizeTransform fit_normalization(const Mesh& mesh, const NormalizeOptions& options = {});

// Applies `t` in place: positions, normals (directions) and UVs (v flip); faces are not changed.
void apply_normalization(Mesh& mesh, const NormalizeTransform& t);
// Undoes `t` in place, restoring the input frame and UV convention.
void invert_normalization(Mesh& mesh, const NormalizeTransform& t);

// fit + apply in one call: the texgen loading step.
NormalizeTransform normalize_mesh(Mesh& mesh, const NormalizeOptions& options = {});

}  // namespace gen3d::mesh
