// YAML config files (the official `config.yaml` of the shape model folders) as the JSON objects
// every network config reader takes. yaml-cpp parses; plain scalars are typed here by the YAML 1.2
// core schema, since yaml-cpp leaves every scalar a string.

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "models/core/error.h"
#include "models/nn/config_reader.h"

namespace gen3d::models::nn {

namespace {

using nlohmann::json;

// Bounds for untrusted files: nesting (yaml-cpp's own parser stops at 2000) and the number of
// values after aliases are expanded (a few aliases can otherwise name 2^k copies).
constexpr int kMaxDepth = 64;
constexpr std::size_t kMaxValues = std::size_t{1} << 20;

constexpr std::string_view kCoreTag = "tag:yaml.org,2002:";

bool all_of(std::string_view s, bool (*pred)(char)) {
  if (s.empty()) return false;
  for (char c : s)
    if (!pred(c)) return false;
  return true;
}
bool is_dec(char c) {
  return c >= '0' && c <= '9';
}
bool is_oct(char c) {
  return c >= '0' && c <= '7';
}
bool is_hex(char c) {
  return is_dec(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?  (core schema float; an
// integer matches too)
bool is_core_float(std::string_view s) {
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  std::size_t digits = 0;
  while (i < s.size() && is_dec(s[i])) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    std::size_t frac = 0;
    while (i < s.size() && is_dec(s[i])) ++i, ++frac;
    if (digits == 0 && frac == 0) return false;
  } else if (digits == 0) {
    return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    return all_of(s.substr(i), is_dec);
  }
  return i == s.size();
}

// Well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF): a JSON value
// must be, or writing it out fails far from the file.
bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + static_cast<std::size_t>(extra) >= s.size()) return false;  // cut short
    for (int k = 1; k <= extra; ++k) {
      const auto d = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((extra == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
      return false;
    i += static_cast<std::size_t>(extra) + 1;
  }
  return true;
}

class Converter {
 public:
  explicit Converter(std::string label) : label_(std::move(label)) {}

  json convert(const YAML::Node& node, int depth) {
    if (depth > kMaxDepth)
      fail(node, "nested deeper than " + std::to_string(kMaxDepth) + " levels");
    if (++values_ > kMaxValues) fail(node, "more than a million values (aliases expanded)");
    const std::string& tag = node.Tag();
    switch (node.Type()) {
      case YAML::NodeType::Null:
        check_tag(node, tag, {"null"});
        return nullptr;
      case YAML::NodeType::Scalar:
        return scalar(node, tag);
      case YAML::NodeType::Sequence: {
        check_tag(node, tag, {"seq"});
        json out = json::array();
        for (const YAML::Node& item : node) out.push_back(convert(item, depth + 1));
        return out;
      }
      case YAML::NodeType::Map: {
        check_tag(node, tag, {"map"});
        json out = json::object();
        for (const auto& kv : node) {
          const std::string key = key_of(kv.first);
          if (key == "<<") fail(kv.first, "merge keys (<<) are not supported");
          if (out.contains(key)) fail(kv.first, "duplicate key '" + key + "'");
          out[key] = convert(kv.second, depth + 1);
        }
        return out;
      }
      case YAML::NodeType::Undefined:
        break;
    }
    fail(node, "undefined value");
  }

 private:
  [[noreturn]] void fail(const YAML::Node& node, const std::string& msg) const {
    const YAML::Mark m = node.Mark();
    if (m.is_null()) throw ModelError(label_ + ": " + msg);
    throw ModelError(label_ + ": line " + std::to_string(m.line + 1) + ", column " +
                     std::to_string(m.column + 1) + ": " + msg);
  }

  // "?" = plain (untagged), "!" = quoted or block text; a core-schema tag must fit the node.
  void check_tag(const YAML::Node& node, const std::string& tag,
                 std::initializer_list<std::string_view> allowed) const {
    if (tag.empty() || tag == "?" || tag == "!") return;
    if (tag.compare(0, kCoreTag.size(), kCoreTag) == 0) {
      const std::string_view name = std::string_view(tag).substr(kCoreTag.size());
      for (std::string_view a : allowed)
        if (name == a) return;
    }
    fail(node, "the tag " + tag + " is not supported here (plain YAML values only)");
  }

  std::string key_of(const YAML::Node& key) const {
    if (!key.IsScalar()) fail(key, "a key must be a plain string or number");
    if (!valid_utf8(key.Scalar())) fail(key, "a key is not valid UTF-8");
    return key.Scalar();
  }

  json scalar(const YAML::Node& node, const std::string& tag) const {
    const std::string& s = node.Scalar();
    if (!valid_utf8(s)) fail(node, "a value is not valid UTF-8");
    if (tag == "!") return s;  // quoted: always a string
    if (tag.empty() || tag == "?") return plain(node, s);
    check_tag(node, tag, {"str", "int", "float", "bool", "null"});
    const std::string_view type = std::string_view(tag).substr(kCoreTag.size());
    if (type == "str") return s;
    json v = plain(node, s);
    const bool fits = (type == "int" && v.is_number_integer()) ||
                      (type == "float" && v.is_number()) || (type == "bool" && v.is_boolean()) ||
                      (type == "null" && v.is_null());
    if (!fits) fail(node, "'" + s + "' is not a valid !!" + std::string(type));
    if (type == "float") return v.get<double>();
    return v;
  }

  // The YAML 1.2 core schema: null, booleans, integers (decimal, 0o, 0x), floats; else a string.
  json plain(const YAML::Node& node, const std::string& s) const {
    if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    const std::string_view sv(s);
    if (sv.size() > 2 && sv[0] == '0' && (sv[1] == 'o' || sv[1] == 'x')) {
      const bool hex = sv[1] == 'x';
      if (all_of(sv.substr(2), hex ? is_hex : is_oct))
        return integer(node, sv.substr(2), hex ? 16 : 8);
      return s;
    }
    const std::string_view body = sv[0] == '-' || sv[0] == '+' ? sv.substr(1) : sv;
    if (all_of(body, is_dec)) return integer(node, sv, 10);
    if (is_core_float(sv)) {
      const std::string_view text = sv[0] == '+' ? sv.substr(1) : sv;  // from_chars takes no '+'
      double v = 0;
      const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
      if (r.ec != std::errc() || r.ptr != text.data() + text.size() || !std::isfinite(v))
        fail(node, "'" + s + "' is out of the range of a double");
      return v;
    }
    for (std::string_view special : {".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN"})
      if (body == special && (special[1] == 'i' || special[1] == 'I' || body == sv))
        fail(node, "'" + s + "' is not a finite number (a config value must be)");
    return s;
  }

  // As nlohmann's JSON parser stores them: unsigned when not negative, else signed.
  json integer(const YAML::Node& node, std::string_view text, int base) const {
    const bool negative = !text.empty() && text[0] == '-';
    if (!text.empty() && (text[0] == '-' || text[0] == '+')) text.remove_prefix(1);
    std::uint64_t magnitude = 0;
    const auto r = std::from_chars(text.data(), text.data() + text.size(), magnitude, base);
    constexpr std::uint64_t kMinMagnitude =
        static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) + 1;
    if (r.ec != std::errc() || r.ptr != text.data() + text.size() ||
        (negative && magnitude > kMinMagnitude))
      fail(node, "integer '" + node.Scalar() + "' is out of the 64-bit range");
    if (!negative) return magnitude;
    if (magnitude == kMinMagnitude) return std::numeric_limits<std::int64_t>::min();
    return -static_cast<std::int64_t>(magnitude);
  }

  std::string label_;
  std::size_t values_ = 0;
};

// Counts documents and builds nothing. yaml-cpp 0.7 (Debian 12) never stops on a stray ',' at
// the top level: it yields empty documents without end (YAML::LoadAll then fills the memory), so
// at most two are asked for.
class DocumentCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

json parse_yaml_config(std::string_view text, const std::string& label) {
  const std::string input(text);
  YAML::Node doc;
  int documents = 0;
  try {
    doc = YAML::Load(input);
    if (doc.IsMap()) {
      std::istringstream in(input);
      YAML::Parser parser(in);
      DocumentCounter counter;
      while (documents < 2 && parser.HandleNextDocument(counter)) ++documents;
    }
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) throw ModelError(label + ": invalid YAML: " + e.msg);
    throw ModelError(label + ": line " + std::to_string(e.mark.line + 1) + ", column " +
                     std::to_string(e.mark.column + 1) + ": invalid YAML: " + e.msg);
  }
  if (!doc.IsMap()) throw ModelError(label + ": not a YAML mapping");
  if (documents > 1)
    throw ModelError(label + ": holds more than one YAML document; a config is one mapping");
  try {
    return Converter(label).convert(doc, 0);
  } catch (const YAML::Exception& e) {
    throw ModelError(label + ": invalid YAML: " + e.msg);
  }
}

}  // namespace gen3d::models::nn
