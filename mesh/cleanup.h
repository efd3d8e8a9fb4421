#pragma once
// Mesh repair: degenerate/duplicate faces, unused vertices, coincident vertices, small floating
// components.

#include <cstddef>

#include "mesh/mesh.h"

namespace gen3d::mesh {

struct CleanupOptions {
  // Merge vertices closer than this distance before anything else; < 0 disables merging, 0 merges
  // only exactly equal positions. The first vertex (in index order) of a cluster is kept.
  float merge_distance = -1.0f;
  // Remove faces that use a vertex twice or whose area is <= degenerate_area.
  bool remove_degenerate = true;
  // Area at or below which a face counts as degenerate (absolute units; 0 = only zero area).
  float degenerate_area = 0.0f;
  // Remove faces that use the same three vertices as an earlier face, in any order (this also
  // removes the back side of a doubled, oppositely wound face).
  bool remove_duplicates = true;
  // Remove connected components (vertex-connected) with fewer faces than this fraction of all
  // faces; 0 disables. The largest component is always kept.
  double min_component_faces = 0.0;
  // Remove connected components with less than this fraction of the total surface area; 0
  // disables. The largest component (by area when this is set, else by faces) is always kept.
  double min_component_area = 0.0;
  // Drop positions (and their normals/colours) and UVs no face uses.
  bool remove_unreferenced = true;
  // Turn inside-out parts the right way round (rewound faces, negated normals): closed parts
  // whose enclosed volume is negative, and open parts whose faces clearly point at their centre.
  bool orient_outward = true;
};

// What cleanup() removed.
struct CleanupReport {
  size_t merged_vertices = 0;        // vertices folded into an earlier one by merge_distance
  size_t degenerate_faces = 0;       // faces removed as degenerate
  size_t duplicate_faces = 0;        // faces removed as duplicates
  size_t removed_components = 0;     // small components removed
  size_t component_faces = 0;        // faces inside those components
  size_t unreferenced_vertices = 0;  // positions dropped as unused
  size_t unreferenced_uvs = 0;       // UVs dropped as unused
  size_t flipped_faces = 0;          // faces of inside-out closed parts rewound
};

// Returns the cleaned mesh; face order is kept among surviving faces. Texture is shared.
Mesh cleanup(const Mesh& mesh, const CleanupOptions& options = {}, CleanupReport* report = nullptr);

// Number of vertex-connected components of the faces (cheap diagnostic).
size_t count_components(const Mesh& mesh);

}  // namespace gen3d::mesh
