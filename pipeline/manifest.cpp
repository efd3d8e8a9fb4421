#include "pipeline/manifest.h"

#include <fstream>
#include <map>

#include <fmt/format.h>

#include "pipeline/error.h"

namespace gen3d::pipeline {

using nlohmann::json;

std::vector<BatchJob> read_manifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(fmt::format("cannot open manifest {}", path));
  return parse_manifest(in, path);
}

std::vector<BatchJob> parse_manifest(std::istream& in, const std::string& path) {
  std::vector<BatchJob> jobs;
  std::vector<Problem> problems;
  std::map<std::string, size_t> seen;
  std::string text;
  for (size_t line = 1; std::getline(in, text); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("line {}", line);
    json spec = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (spec.is_discarded() || !spec.is_object()) {
      problems.push_back({where, "", "not a JSON object"});
      continue;
    }
    if (!spec.contains("id") || !spec["id"].is_string() || spec["id"].get<std::string>().empty()) {
      problems.push_back({where, "", "every job needs a non-empty string \"id\""});
      continue;
    }
    const std::string id = spec["id"];
    if (id.find_first_of("/\\") != std::string::npos || id == "." || id == "..") {
      problems.push_back({where, id, "a job id names its output files: no '/' or '\\'"});
      continue;
    }
    if (const auto [it, fresh] = seen.emplace(id, line); !fresh) {
      problems.push_back({where, id, fmt::format("duplicate id (first on line {})", it->second)});
      continue;
    }
    if (spec.contains("set") && !spec["set"].is_object())
      problems.push_back({where, id, "\"set\" must be an object of overrides"});
    jobs.push_back({id, std::move(spec), line});
  }
  if (!problems.empty()) throw ConfigError(path, std::move(problems));
  if (jobs.empty()) throw ConfigError(fmt::format("manifest {} has no jobs", path));
  return jobs;
}

bool in_shard(const std::string& id, int index, int count) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : id) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return static_cast<int>(h % static_cast<uint64_t>(count)) == index;
}

}  // namespace gen3d::pipeline
