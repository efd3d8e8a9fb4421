#include "models/nn/config_reader.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <spdlog/spdlog.h>

#include "models/core/error.h"

namespace gen3d::models::nn {

using nlohmann::json;

namespace {

// An integer that an `int` holds (a larger one is a wrong value, not a silently wrapped one).
bool in_int_range(const json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>() <= std::numeric_limits<int>::max();
  const std::int64_t x = v.get<std::int64_t>();
  return x >= std::numeric_limits<int>::min() && x <= std::numeric_limits<int>::max();
}

}  // namespace

ConfigReader::ConfigReader(const json& obj, std::string label)
    : obj_(obj), label_(std::move(label)) {
  if (!obj_.is_object()) throw ModelError(label_ + ": not a JSON object");
}

const json* ConfigReader::present(std::string_view key) {
  known_.emplace(key);
  const auto it = obj_.find(key);
  return it == obj_.end() || it->is_null() ? nullptr : &*it;
}

void ConfigReader::wrong_type(std::string_view key, std::string_view expected) {
  problems_.push_back(std::string(key) + ": expected " + std::string(expected) + ", got " +
                      obj_.at(std::string(key)).dump());
}

void ConfigReader::read(std::string_view key, int& dst) {
  if (const json* v = present(key)) {
    if (v->is_number_integer() && in_int_range(*v))
      dst = v->get<int>();
    else
      wrong_type(key, "an integer");
  }
}

void ConfigReader::read(std::string_view key, double& dst) {
  if (const json* v = present(key)) {
    if (v->is_number())
      dst = v->get<double>();
    else
      wrong_type(key, "a number");
  }
}

void ConfigReader::read(std::string_view key, bool& dst) {
  if (const json* v = present(key)) {
    if (v->is_boolean())
      dst = v->get<bool>();
    else
      wrong_type(key, "true/false");
  }
}

void ConfigReader::read(std::string_view key, std::string& dst) {
  if (const json* v = present(key)) {
    if (v->is_string())
      dst = v->get<std::string>();
    else
      wrong_type(key, "a string");
  }
}

void ConfigReader::read(std::string_view key, std::vector<int>& dst) {
  const json* v = present(key);
  if (!v) return;
  std::vector<int> out;
  for (const json& e : v->is_array() ? *v : json::array({nullptr})) {
    if (!e.is_number_integer() || !in_int_range(e)) return wrong_type(key, "a list of integers");
    out.push_back(e.get<int>());
  }
  dst = std::move(out);
}

void ConfigReader::read(std::string_view key, std::vector<std::string>& dst) {
  const json* v = present(key);
  if (!v) return;
  std::vector<std::string> out;
  for (const json& e : v->is_array() ? *v : json::array({nullptr})) {
    if (!e.is_string()) return wrong_type(key, "a list of strings");
    out.push_back(e.get<std::string>());
  }
  dst = std::move(out);
}

void ConfigReader::read_choice(std::string_view key, std::string& dst,
                               std::initializer_list<std::string_view> allowed) {
  std::string value;
  const std::size_t before = problems_.size();
  read(key, value);
  if (value.empty() || problems_.size() != before) return;
  std::string list;
  for (std::string_view a : allowed) {
    if (value == a) {
      dst = value;
      return;
    }
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  problems_.push_back(std::string(key) + ": \"" + value +
                      "\" is not supported (supported: " + list + ")");
}

bool ConfigReader::read_per_level(std::string_view key, std::vector<int>& dst) {
  const json* v = present(key);
  if (v && v->is_number_integer() && in_int_range(*v)) {
    dst = {v->get<int>()};
    return true;
  }
  if (v && !v->is_array()) {
    wrong_type(key, "an integer or a list of integers");
    return false;
  }
  read(key, dst);
  return false;
}

void ConfigReader::require(std::string_view key, const json& allowed, std::string_view what) {
  const json* v = present(key);
  if (v && *v != allowed)
    problems_.push_back(std::string(key) + ": " + v->dump() + " is not supported (" +
                        std::string(what) + ")");
}

void ConfigReader::require_exactly(std::string_view key, const json& allowed,
                                   std::string_view what) {
  known_.emplace(key);
  const auto it = obj_.find(key);
  if (it != obj_.end() && *it != allowed)
    problems_.push_back(std::string(key) + ": " + it->dump() + " is not supported (" +
                        std::string(what) + ")");
}

void ConfigReader::ignore(std::initializer_list<std::string_view> keys) {
  for (std::string_view k : keys) known_.emplace(k);
}

bool ConfigReader::has(std::string_view key) {
  return present(key) != nullptr;
}

bool ConfigReader::contains(std::string_view key) {
  known_.emplace(key);
  return obj_.find(key) != obj_.end();
}

const json& ConfigReader::at(std::string_view key) {
  known_.emplace(key);
  return obj_.at(std::string(key));
}

void ConfigReader::problem(std::string message) {
  problems_.push_back(std::move(message));
}

void ConfigReader::finish(Unknown unknown) {
  for (auto it = obj_.begin(); it != obj_.end(); ++it) {
    if (unknown == Unknown::kAccept || known_.count(it.key())) continue;
    if (unknown == Unknown::kError)
      problems_.push_back("unknown key '" + it.key() + "'");
    else
      spdlog::warn("{}: config key '{}' is not used", label_, it.key());
  }
  if (problems_.empty()) return;
  std::string msg = label_ + ":";
  for (const std::string& p : problems_) msg += "\n  " + p;
  throw ModelError(msg);
}

json parse_config(std::string_view text, const std::string& label) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) throw ModelError(label + ": not a JSON object");
  return j;
}

json read_config_file(const std::string& path, std::string_view section) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelError(path + ": cannot open config");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  json j = ext == ".yaml" || ext == ".yml" ? parse_yaml_config(ss.str(), path)
                                           : parse_config(ss.str(), path);
  std::string_view rest = section;
  while (!rest.empty()) {
    const auto slash = rest.find('/');
    const std::string key(rest.substr(0, slash));
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (key.empty()) continue;
    if (!j.is_object() || !j.contains(key))
      throw ModelError(path + ": no section '" + std::string(section) + "' (missing '" + key +
                       "')");
    json next = j[key];
    j = std::move(next);
  }
  return j;
}

const json& section_params(const json& section, std::string_view what) {
  if (!section.is_object() || !section.contains("params")) return section;
  for (auto it = section.begin(); it != section.end(); ++it)
    if (it.key() != "params" && it.key() != "target")
      throw ModelError(std::string(what) + " section: unknown key '" + it.key() + "'");
  return section["params"];
}

void throw_config_error(const std::string& message) {
  throw ModelError(message);
}

void throw_problems(const std::string& heading, const std::vector<std::string>& problems) {
  if (problems.empty()) return;
  std::string msg = heading;
  for (const auto& p : problems) msg += "\n  " + p;
  throw ModelError(msg);
}

}  // namespace gen3d::models::nn
