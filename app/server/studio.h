#pragma once
// The web studio of `gen3d serve`: a page at `/` that uploads a mesh and images, runs a job
// through the job API, draws its graph live from the job's events and shows the result in a 3D
// viewer. Its files (serve/web/, and three.js from Debian's libjs-three when the build found it)
// are compiled into the binary, so the page works offline and from anywhere.

#include <cstddef>
#include <span>
#include <string>

#include <httplib.h>

namespace gen3d::app::server {

// One embedded file, answered at `url` (`/`, or under `/studio/`).
struct StudioAsset {
  const char* url;
  const char* content_type;
  const unsigned char* data;
  size_t size;
};

// Every embedded file (generated at build time by embed_files.cmake).
std::span<const StudioAsset> studio_assets();

// Whether `path` is one of the studio's files: these are answered without a token (they hold no
// data; the page asks for the token and sends it with its API calls).
bool is_studio_path(const std::string& path);

// GET for each embedded file.
void add_studio_routes(httplib::Server& http);

}  // namespace gen3d::app::server
