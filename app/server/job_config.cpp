#include "app/server/job_config.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <variant>

#include <fmt/format.h>

#include "app/cli/registry.h"
#include "app/cli/shipped_configs.h"
#include "pipeline/config.h"

namespace gen3d::app::server {

namespace fs = std::filesystem;
using nlohmann::json;
using pipeline::ConfigError;
using pipeline::Problem;

namespace {

// The shipped configs `gen3d texture` chooses from (app/cli/texgen_config.h): the stages a job's
// config may use are theirs.
constexpr const char* kTextureConfigs[] = {"texgen",          "texgen_views",  "texgen_views_pbr",
                                           "texgen_transfer", "texgen_models", "texgen_models21"};

// How messages name the config: the request's field.
constexpr const char* kSource = "\"config\"";

// The stage that writes a job's result, and its parameter naming the file.
constexpr const char* kResultStage = "save_mesh";
constexpr const char* kResultParam = "path";

std::string list(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

std::string param_path(const pipeline::GraphNode& node, const std::string& param) {
  return fmt::format("/nodes/{}/params/{}", node.config_index, pipeline::pointer_token(param));
}

// Whether `path` lies inside `root`.
bool under(const fs::path& path, const std::string& root) {
  if (root.empty()) return false;
  const auto rel =
      path.lexically_normal().lexically_relative(fs::absolute(root).lexically_normal());
  return !rel.empty() && *rel.begin() != ".." && *rel.begin() != ".";
}

constexpr const char* kViewsFolder = "views";

// Makes every string in `v` (recursively) that names one of the job's files a path in `dir`.
void place_files(json& v, const JobFolder& folder, const std::string& dir) {
  if (v.is_array() || v.is_object()) {
    for (json& item : v) place_files(item, folder, dir);
    return;
  }
  if (!v.is_string()) return;
  const std::string& s = v.get_ref<const std::string&>();
  if (s.empty() || s[0] == '$') return;
  const fs::path rel = fs::path(s).lexically_normal();
  if (rel.is_absolute() || rel.empty()) return;
  const std::string first = rel.begin()->string();
  if (folder.names.contains(first) || (folder.views > 0 && first == kViewsFolder))
    v = (fs::path(dir) / rel).string();
}

// A stand-in for a job's folder, for checking a config before the job has one: an empty file
// per upload and per view image (the contracts' checks look for them). Removed when done.
class StandIn {
 public:
  explicit StandIn(const JobFolder& folder) {
    static std::atomic<uint64_t> counter{0};
    dir_ = fs::temp_directory_path() / fmt::format("gen3d-check-{}-{}", ::getpid(), counter++);
    fs::create_directories(dir_);
    for (const std::string& n : folder.names) std::ofstream(dir_ / n).put('\0');
    if (folder.views > 0) {
      fs::create_directories(dir_ / kViewsFolder);
      for (size_t i = 0; i < folder.views; ++i)
        std::ofstream(dir_ / kViewsFolder / fmt::format("{:03}.png", i)).put('\0');
    }
  }
  ~StandIn() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  StandIn(const StandIn&) = delete;
  StandIn& operator=(const StandIn&) = delete;
  std::string dir() const { return dir_.string(); }

 private:
  fs::path dir_;
};

// Problems with the stand-in's paths said as the client named the files.
std::vector<Problem> unplaced(std::vector<Problem> problems, const std::string& dir) {
  const std::string prefix = dir + "/";
  for (Problem& p : problems)
    for (size_t at; (at = p.message.find(prefix)) != std::string::npos;)
      p.message.erase(at, prefix.size());
  return problems;
}

// Why a job may not read `v` (a path as the run sees it), or "".
std::string read_problem(const std::string& v, const JobFolder& folder, const std::string& dir) {
  if (v.empty() || under(v, dir) ||
      std::any_of(folder.roots.begin(), folder.roots.end(),
                  [&](const std::string& r) { return under(v, r); }))
    return "";
  return fmt::format("\"{}\" is not one of the job's files ({}){}", v, list(folder.names),
                     fs::path(v).is_absolute()
                         ? ": a job reads its own files, by name, and the server's models"
                         : "");
}

// Why a job may not write its result to `name`, or "".
std::string result_problem(const std::string& name, const JobFolder& folder) {
  if (name.empty() || name.find_first_of("/\\") != std::string::npos || name[0] == '.')
    return fmt::format(
        "\"{}\": the result is written in the job's folder: give a plain file name such as "
        "output.glb",
        name);
  if (folder.names.contains(name) || name == kViewsFolder)
    return fmt::format("\"{}\" is one of the job's files: name the result otherwise", name);
  return "";
}

// A node parameter's value as the run will see it where that is plain: a literal, or one "$var"
// (null otherwise; the built graph is checked again).
json plain_value(const pipeline::PipelineConfig& cfg, const pipeline::NodeConfig& n,
                 const std::string& name) {
  if (!n.params.is_object() || !n.params.contains(name)) return nullptr;
  const json& v = n.params[name];
  if (!v.is_string()) return v;
  const std::string& s = v.get_ref<const std::string&>();
  if (s.empty() || s[0] != '$') return v;
  if (s.find('{') != std::string::npos || s.find('/') != std::string::npos) return nullptr;
  const auto it = cfg.vars.find(s.substr(1));
  return it == cfg.vars.end() ? json(nullptr) : *it;
}

// Problems, each once (the config and the built graph are both checked).
class Problems {
 public:
  void add(Problem p) {
    if (seen_.insert(p.path + "\n" + p.message).second) list_.push_back(std::move(p));
  }
  void add_all(const std::vector<Problem>& ps) {
    for (const Problem& p : ps) add(p);
  }
  bool empty() const { return list_.empty(); }
  std::vector<Problem> take() { return std::move(list_); }

 private:
  std::set<std::string> seen_;
  std::vector<Problem> list_;
};

pipeline::Graph build_in(const json& config, const JobFolder& folder, const std::string& dir,
                         std::string* output);

}  // namespace

const std::set<std::string>& job_config_stages() {
  static const std::set<std::string> stages = [] {
    std::set<std::string> s;
    for (const char* name : kTextureConfigs) {
      const json doc = json::parse(cli::shipped_config_text(name));
      for (const json& node : doc.at("nodes")) s.insert(node.at("stage").get<std::string>());
    }
    return s;
  }();
  return stages;
}

json problems_json(const ConfigError& error) {
  json out = json::array();
  for (const Problem& p : error.problems())
    out.push_back({{"path", p.path}, {"node", p.node}, {"message", p.message}});
  return out;
}

pipeline::Graph job_config_graph(const json& config, const JobFolder& folder, std::string* output) {
  if (!folder.dir.empty()) return build_in(config, folder, folder.dir, output);
  const StandIn stand_in(folder);
  try {
    return build_in(config, folder, stand_in.dir(), output);
  } catch (const ConfigError& e) {
    throw ConfigError(kSource, unplaced(e.problems(), stand_in.dir()));
  }
}

namespace {

pipeline::Graph build_in(const json& config, const JobFolder& folder, const std::string& dir,
                         std::string* output) {
  if (!config.is_object())
    throw ConfigError(kSource, {Problem{"", "", "a pipeline config is a JSON object"}});
  json doc = config;
  if (doc.contains("vars")) place_files(doc["vars"], folder, dir);
  if (doc.contains("nodes") && doc["nodes"].is_array())
    for (json& node : doc["nodes"])
      if (node.is_object() && node.contains("params")) place_files(node["params"], folder, dir);
  const pipeline::PipelineConfig cfg = pipeline::parse_config(doc, kSource, dir);
  // What a job may not do, found before the contracts are checked so that both kinds of problem
  // come back at once: stages the server's jobs do not run, files that are not the job's, a
  // result outside its folder. Unknown stages and parameters are the contracts' to report.
  Problems problems;
  const pipeline::Registry& registry = cli::cli_registry();
  for (const pipeline::NodeConfig& n : cfg.nodes) {
    const pipeline::StageContract* c = registry.contract(n.stage);
    if (!c) continue;
    if (!job_config_stages().contains(n.stage))
      problems.add({fmt::format("/nodes/{}/stage", n.index), n.id,
                    fmt::format("stage \"{}\" is not run by this server's jobs (they run the "
                                "stages of the texture pipelines)",
                                n.stage)});
    const auto param = [&](const std::string& name) {
      return fmt::format("/nodes/{}/params/{}", n.index, pipeline::pointer_token(name));
    };
    for (const pipeline::FileParam& fp : c->file_params) {
      const json v = plain_value(cfg, n, fp.name);
      for (const json& item : v.is_array() ? v : json::array({v}))
        if (item.is_string())
          if (std::string why = read_problem(item.get<std::string>(), folder, dir); !why.empty())
            problems.add({param(fp.name), n.id, why});
    }
    if (n.stage == kResultStage)
      if (const json v = plain_value(cfg, n, kResultParam); v.is_string())
        if (std::string why = result_problem(v.get<std::string>(), folder); !why.empty())
          problems.add({param(kResultParam), n.id, why});
  }
  pipeline::Graph graph;
  try {
    graph = pipeline::build_graph(cfg, registry);
  } catch (const ConfigError& e) {
    problems.add_all(e.problems());
    throw ConfigError(kSource, problems.take());
  }
  // The built graph, where every value is resolved.
  const pipeline::GraphNode* result = nullptr;
  for (pipeline::GraphNode& node : graph.nodes) {
    for (const pipeline::FileParam& fp : node.contract->file_params) {
      const auto it = node.params.find(fp.name);
      if (it == node.params.end()) continue;
      std::vector<std::string> values;
      if (const auto* v = std::get_if<std::string>(&it->second)) values.push_back(*v);
      if (const auto* l = std::get_if<std::vector<std::string>>(&it->second)) values = *l;
      for (const std::string& v : values)
        if (std::string why = read_problem(v, folder, dir); !why.empty())
          problems.add({param_path(node, fp.name), node.id, why});
    }
    // What they write: one mesh, the result, in the job's folder.
    if (node.contract->name != kResultStage) continue;
    if (result) {
      problems.add(
          {fmt::format("/nodes/{}", node.config_index), node.id,
           fmt::format("a job writes one mesh: node \"{}\" already saves it", result->id)});
      continue;
    }
    result = &node;
    auto& path = std::get<std::string>(node.params.at(kResultParam));
    if (std::string why = result_problem(path, folder); !why.empty()) {
      problems.add({param_path(node, kResultParam), node.id, why});
    } else {
      path = (fs::path(dir) / path).string();
      if (output) *output = path;
    }
  }
  if (!result)
    problems.add({"/nodes", "",
                  fmt::format("the config saves no mesh: a job needs one \"{}\" node, "
                              "whose file is its result",
                              kResultStage)});
  if (!problems.empty()) throw ConfigError(kSource, problems.take());
  return graph;
}

}  // namespace

}  // namespace gen3d::app::server
