#pragma once
// The strict reader of network configs (diffusers JSON, the official YAML): reads keys by type,
// collects every problem (wrong type, unsupported value, unknown key) and reports them in one
// ModelError naming the config, so a user fixes a file in one go. A null value counts as absent
// (the network's default), as diffusers writes it.

#include <initializer_list>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace gen3d::models::nn {

class ConfigReader {
 public:
  // `obj` must be a JSON object; `label` heads the error ("vae/config.json: AutoencoderKL").
  ConfigReader(const nlohmann::json& obj, std::string label);

  // Read `key` into `dst` when it is present; a wrong type is recorded as a problem.
  void read(std::string_view key, int& dst);
  void read(std::string_view key, double& dst);
  void read(std::string_view key, bool& dst);
  void read(std::string_view key, std::string& dst);
  void read(std::string_view key, std::vector<int>& dst);
  void read(std::string_view key, std::vector<std::string>& dst);
  // A string that must be one of `allowed`.
  void read_choice(std::string_view key, std::string& dst,
                   std::initializer_list<std::string_view> allowed);
  // A list of integers, or one integer meaning the same for every level (returns true then;
  // `dst` holds that one value).
  bool read_per_level(std::string_view key, std::vector<int>& dst);

  // Options this implementation lacks are accepted only at their no-op value (or null).
  void require(std::string_view key, const nlohmann::json& allowed, std::string_view what);
  // The same where null means something else than the default (e.g. "no mid block").
  void require_exactly(std::string_view key, const nlohmann::json& allowed, std::string_view what);
  // Valid keys with no effect here.
  void ignore(std::initializer_list<std::string_view> keys);

  // Present and not null. Marks the key as known.
  bool has(std::string_view key);
  // Present, null or not (where null means something other than the default).
  bool contains(std::string_view key);
  // The raw value of a present key (for checks the typed reads don't cover).
  const nlohmann::json& at(std::string_view key);
  void problem(std::string message);

  // What to do with keys never read, required or ignored: problems, warnings, or nothing (for
  // files that carry many training-only keys, such as Hugging Face model configs).
  enum class Unknown { kError, kWarn, kAccept };
  // Throws ModelError listing every problem.
  void finish(Unknown unknown = Unknown::kError);

 private:
  const nlohmann::json* present(std::string_view key);
  void wrong_type(std::string_view key, std::string_view expected);

  const nlohmann::json& obj_;
  std::string label_;
  std::set<std::string, std::less<>> known_;
  std::vector<std::string> problems_;
};

// The JSON object of a config file, or of its `section` ("a/b" descends; "" is the whole file).
// A `.yaml` / `.yml` file is read as YAML (parse_yaml_config), any other as JSON. Throws
// ModelError naming the file for a missing file, invalid JSON or YAML (with its line) or a missing
// section.
nlohmann::json read_config_file(const std::string& path, std::string_view section = {});
// JSON text parsed as an object; throws ModelError "<label>: ..." otherwise.
nlohmann::json parse_config(std::string_view text, const std::string& label);

// The params of an official config section `{"target": ..., "params": {...}}` (any other key
// beside those two is an error naming `what`), or `section` itself when it has no "params".
const nlohmann::json& section_params(const nlohmann::json& section, std::string_view what);

// Throws ModelError(message) (keeps models/core/error.h out of this header).
[[noreturn]] void throw_config_error(const std::string& message);
// Throws ModelError "<heading>" followed by one indented line per problem (no-op when empty).
void throw_problems(const std::string& heading, const std::vector<std::string>& problems);

// `section` of a config file parsed by `parse(json_text)`; an error it throws is prefixed with
// "<path> [<section>]: ".
template <class Parse>
auto parse_config_section(const std::string& path, std::string_view section, Parse&& parse) {
  const nlohmann::json j = read_config_file(path, section);
  try {
    return parse(j.dump());
  } catch (const std::exception& e) {
    throw_config_error(path + " [" + std::string(section) + "]: " + e.what());
  }
}

// YAML text (one document, a mapping) as the JSON object a JSON twin of the file gives: mappings,
// sequences, and plain scalars typed by the YAML 1.2 core schema (null, true/false, integers incl.
// 0o/0x, floats incl. `1e-6` and `1.e-6`; anything else a string; quoted text always a string).
// Throws ModelError "<label>: line L, column C: ..." for malformed YAML, duplicate keys, merge
// keys, non-core tags, non-finite or out-of-range numbers. (PyYAML, which the reference uses,
// follows YAML 1.1: there `1e-6` is a string and `yes`/`no` are booleans; official configs
// write neither.)
nlohmann::json parse_yaml_config(std::string_view text, const std::string& label);

}  // namespace gen3d::models::nn
