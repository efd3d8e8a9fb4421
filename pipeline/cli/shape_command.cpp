#include "pipeline/cli/shape_command.h"

#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace gen3d::cli {

std::vector<std::string> shape_sets(const ShapeOptions& o) {
  std::vector<std::string> s;
  auto str = [&](const char* var, const std::string& v) {
    if (!v.empty()) s.push_back(fmt::format("{}={}", var, v));
  };
  auto num = [&](const char* var, auto v, auto unset) {
    if (v != unset) s.push_back(fmt::format("{}={}", var, v));
  };
  str("cond", o.cond);
  str("cond_name", o.cond_name);
  str("model", o.model);
  str("vae", o.vae);
  str("out", o.output);
  str("method", o.method);
  str("cache", o.cache);
  num("steps", o.steps, -1);
  if (o.guidance > -1e8) s.push_back(fmt::format("guidance={}", o.guidance));
  num("seed", o.seed, -1);
  num("resolution", o.resolution, -1);
  num("min_resolution", o.min_resolution, -1);
  num("num_chunks", o.num_chunks, -1);
  num("max_faces", o.max_faces, -1);
  num("latent_tokens", o.latent_tokens, -1);
  s.insert(s.end(), o.run.sets.begin(), o.run.sets.end());
  return s;
}

int cmd_shape(const ShapeOptions& o) {
  if (!std::filesystem::is_regular_file(o.config)) {
    spdlog::error(
        "shape: pipeline config not found: {} (run from the repository root or pass "
        "--config)",
        o.config);
    return 2;
  }
  const std::vector<std::string> sets = shape_sets(o);
  if (o.dump) return cmd_validate(o.config, sets, true);
  RunOptions run = o.run;
  run.config = o.config;
  run.sets = sets;
  return cmd_run(run);
}

}  // namespace gen3d::cli
