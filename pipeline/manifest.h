#pragma once
// Job manifests for batch runs: JSON lines, one job object per line, each with a unique "id".

#include <istream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gen3d::pipeline {

struct BatchJob {
  std::string id;
  nlohmann::json spec;  // the manifest line
  size_t line = 0;      // 1-based line number in the manifest
};

// Parses a manifest; every malformed line, missing, unsafe or duplicate id and malformed "set" is
// reported at once in one ConfigError naming `path` and the line. Blank lines are skipped.
std::vector<BatchJob> parse_manifest(std::istream& in, const std::string& path);
std::vector<BatchJob> read_manifest(const std::string& path);  // a missing file is a ConfigError

// Whether job `id` belongs to shard `index` of `count` (stable FNV-1a hash of the id), so array
// jobs on many machines split a manifest without talking to each other.
bool in_shard(const std::string& id, int index, int count);

}  // namespace gen3d::pipeline
