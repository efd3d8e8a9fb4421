#include "mesh/precheck.h"

#include <cctype>

#include <charconv>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>

#include "mesh/error.h"

namespace gen3d::mesh::detail {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw MeshError("cannot load mesh '" + path + "': " + what);
}

std::vector<std::string_view> split_ws(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

bool parse_count(std::string_view s, uint64_t& out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// Iterates lines (without the '\n') starting at `pos`.
bool next_line(const std::string& bytes, size_t& pos, std::string_view& line) {
  if (pos >= bytes.size()) return false;
  size_t end = bytes.find('\n', pos);
  if (end == std::string::npos) end = bytes.size();
  line = std::string_view(bytes).substr(pos, end - pos);
  pos = end + 1;
  return true;
}

// The face lines of an OFF file as assimp 5.2 reads them. Its data starts at the token after the
// edge count (possibly on the counts line itself); lines end at any run of '\r' and '\n'; nv
// lines of vertices come first, then face lines until nf faces are read. A face line whose count
// is 0 or above 9 is skipped but taken off the face count without counting as read, so assimp
// can end up announcing more faces than it filled (or wrap the count below zero) and crash on
// them: that is refused, as are face indices past the vertices and faces of fewer than 3.
void check_off_faces(const std::string& path, const std::string& bytes, uint64_t nv, uint64_t nf) {
  const size_t n = bytes.size();
  size_t p = 0;
  const auto line_end = [&](size_t i) { return bytes[i] == '\n' || bytes[i] == '\r'; };
  const auto next_token = [&] {
    while (p < n && (bytes[p] == ' ' || bytes[p] == '\t' || line_end(p))) ++p;
    while (p < n && bytes[p] == '#') {
      while (p < n && bytes[p] != '\n') ++p;
      while (p < n && (bytes[p] == ' ' || bytes[p] == '\t' || line_end(p))) ++p;
    }
  };
  const auto skip_digits = [&] {
    while (p < n && std::isdigit(static_cast<unsigned char>(bytes[p]))) ++p;
  };
  next_token();
  if (bytes.compare(p, 2, "ST") == 0) p += 2;
  for (char flag : {'C', 'N', '4'})
    if (p < n && bytes[p] == flag) ++p;
  const bool has_dimension = p < n && bytes[p] == 'n';
  if (has_dimension) ++p;
  if (bytes.compare(p, 3, "OFF") == 0) p += 3;
  next_token();
  if (has_dimension) {
    skip_digits();
    next_token();
  }
  for (int count = 0; count < 3; ++count) {  // vertices, faces, edges
    next_token();
    skip_digits();
  }
  next_token();
  uint64_t line_no = 0, read = 0, skipped = 0;
  while (p < n && read < nf) {
    const size_t begin = p;
    while (p < n && !line_end(p)) ++p;
    const std::string_view line = std::string_view(bytes).substr(begin, p - begin);
    while (p < n && line_end(p)) ++p;
    if (line.size() >= 4096)
      fail(path, "OFF data line " + std::to_string(line_no + 1) +
                     " is longer than the 4095 characters assimp's reader takes");
    if (line_no++ < nv) continue;
    const auto items = split_ws(line);
    size_t digits = 0;
    while (!items.empty() && digits < items[0].size() &&
           std::isdigit(static_cast<unsigned char>(items[0][digits])))
      ++digits;
    uint64_t k = 0, index = 0;
    if (digits == 0 || !parse_count(items[0].substr(0, digits), k) || k == 0 || k > 9) {
      ++skipped;
      continue;
    }
    const std::string face = "OFF face " + std::to_string(read + 1);
    if (k < 3 || items.size() < k + 1) fail(path, face + " is not \"k i1 .. ik\" with k >= 3");
    for (uint64_t j = 1; j <= k; ++j)
      if (!parse_count(items[j], index) || index >= nv)
        fail(path, face + " indexes a vertex past " + std::to_string(nv));
    ++read;
  }
  if (skipped > 0 && static_cast<long double>(nf) - static_cast<long double>(skipped) !=
                         static_cast<long double>(read))
    fail(path, "OFF has " + std::to_string(skipped) +
                   " face lines with 0 or more than 9 indices among its " + std::to_string(nf) +
                   " faces: assimp's reader skips them but then loses count of its faces");
}

// OFF: "OFF" [newline] "nv nf ne", then nv vertex lines and nf face lines. assimp reserves and
// loops on the header counts, so absurd counts hang or exhaust memory. assimp reads the keyword as
// [ST][C][N][4][n]OFF and the counts right after it, even glued to it ("OFF4 2 0"); with n the
// first number is the vertex dimension; a file may also start with the counts, without a keyword.
void check_off(const std::string& path, const std::string& bytes) {
  size_t pos = 0;
  std::string_view line;
  std::vector<std::string_view> tokens;
  while (next_line(bytes, pos, line)) {  // collect header tokens, skipping comments
    if (const size_t hash = line.find('#'); hash != std::string_view::npos)
      line = line.substr(0, hash);
    for (auto t : split_ws(line)) tokens.push_back(t);
    if (tokens.size() >= 4) break;
  }
  if (tokens.empty()) fail(path, "not an OFF file (missing OFF header)");
  const std::string_view head = tokens[0];
  size_t at = head.starts_with("ST") ? 2 : 0;
  for (char flag : {'C', 'N', '4'})
    if (at < head.size() && head[at] == flag) ++at;
  const bool has_dimension = at < head.size() && head[at] == 'n';
  if (has_dimension) ++at;
  std::vector<std::string_view> counts;  // [dimension,] vertices, faces
  size_t header_tokens = 1;
  if (head.substr(at, 3) == "OFF") {
    if (head.size() > at + 3) counts.push_back(head.substr(at + 3));
  } else if (std::isdigit(static_cast<unsigned char>(head[0]))) {
    counts.push_back(head);
  } else {
    fail(path, "not an OFF file (missing OFF header)");
  }
  const size_t wanted = has_dimension ? 3 : 2;
  for (size_t t = 1; t < tokens.size() && counts.size() < wanted; ++t, ++header_tokens)
    counts.push_back(tokens[t]);
  uint64_t nv = 0, nf = 0;
  const size_t c0 = has_dimension ? 1 : 0;
  if (counts.size() < wanted || !parse_count(counts[c0], nv) || !parse_count(counts[c0 + 1], nf)) {
    fail(path, "bad OFF header: expected vertex and face counts");
  }
  // Values may share lines, so count numbers: 3 per vertex (1 when the file gives a dimension), at
  // least 4 per face (count + 3). Everything after the counts is data (an edge count included,
  // which only makes this bound more lenient).
  uint64_t numbers = tokens.size() - header_tokens;
  while (next_line(bytes, pos, line)) {
    numbers += split_ws(line.substr(0, line.find('#'))).size();
  }
  const long double per_vertex = has_dimension ? 1 : 3;
  if (static_cast<long double>(nv) * per_vertex + static_cast<long double>(nf) * 4 >
      static_cast<long double>(numbers)) {
    fail(path, "OFF header announces " + std::to_string(nv) + " vertices and " +
                   std::to_string(nf) + " faces but the file holds only " +
                   std::to_string(numbers) + " numbers");
  }
  // assimp's OFF reader crashes on binary junk and on faces that index past the vertices (found
  // by fuzzing), so the text is checked line by line: ASCII only, and every face line is
  // "k i1 .. ik" with k >= 3 and indices below nv.
  for (unsigned char c : bytes)
    if (c >= 0x80 || (c < 0x20 && c != '\n' && c != '\r' && c != '\t'))
      fail(path, "OFF file holds non-text bytes");
  check_off_faces(path, bytes, nv, nf);
}

// PLY: the header must end with end_header, use known types, and the announced elements must fit
// in the file. assimp 5.2 crashes on truncated headers.
void check_ply(const std::string& path, const std::string& bytes) {
  static const std::map<std::string_view, int> kSize = {
      {"char", 1},  {"uchar", 1},   {"int8", 1},   {"uint8", 1},  {"short", 2}, {"ushort", 2},
      {"int16", 2}, {"uint16", 2},  {"int", 4},    {"uint", 4},   {"int32", 4}, {"uint32", 4},
      {"float", 4}, {"float32", 4}, {"double", 8}, {"float64", 8}};
  if (bytes.rfind("ply", 0) != 0) fail(path, "not a PLY file (missing 'ply' magic)");
  struct Element {
    uint64_t count = 0;
    uint64_t min_bytes = 0;   // binary bytes per row at least
    uint64_t min_tokens = 0;  // ascii tokens per row at least
  };
  std::vector<Element> elements;
  std::set<std::string_view> element_names;
  std::string format;
  size_t pos = 0;
  std::string_view line;
  next_line(bytes, pos, line);  // "ply"
  int line_no = 1;
  bool ended = false;
  // The header is read line by line up to the line that starts with end_header (a substring search
  // would stop at "end_header" inside a comment).
  while (!ended && pos < (1u << 20) && next_line(bytes, pos, line)) {
    ++line_no;
    const auto t = split_ws(line);
    if (t.empty() || t[0] == "comment" || t[0] == "obj_info") continue;
    const std::string where = "PLY header line " + std::to_string(line_no);
    if (t[0].substr(0, 10) == "end_header") {
      // assimp's reader hangs or reads past its buffer when end_header runs into other bytes
      // (found by fuzzing): only whitespace, NUL or form feed may follow it.
      const std::string_view rest = t[0].substr(10);
      if (!rest.empty() && rest[0] != '\0' && rest[0] != '\f')
        fail(path, where + ": end_header is followed by unexpected bytes");
      ended = true;
    } else if (t[0] == "format") {
      if (t.size() < 2) fail(path, where + ": incomplete format line");
      format = std::string(t[1]);
      if (format != "ascii" && format != "binary_little_endian" && format != "binary_big_endian") {
        fail(path, where + ": unknown format '" + format + "'");
      }
    } else if (t[0] == "element") {
      uint64_t n = 0;
      if (t.size() < 3 || !parse_count(t[2], n)) fail(path, where + ": bad element line");
      // assimp 5.2 sizes its arrays by the first element of a name and fills them from every one
      // of that name: a second "element vertex" overflows the heap (JVN#42386607).
      if (!element_names.insert(t[1]).second)
        fail(path, where + ": element '" + std::string(t[1]) + "' is declared twice");
      elements.push_back({n, 0, 0});
    } else if (t[0] == "property") {
      if (elements.empty()) fail(path, where + ": property before any element");
      if (t.size() >= 2 && t[1] == "list") {
        if (t.size() < 5 || !kSize.count(t[2]) || !kSize.count(t[3])) {
          fail(path, where + ": bad list property");
        }
        elements.back().min_bytes += kSize.at(t[2]);
        elements.back().min_tokens += 1;
      } else {
        if (t.size() < 3 || !kSize.count(t[1])) fail(path, where + ": bad property line");
        elements.back().min_bytes += kSize.at(t[1]);
        elements.back().min_tokens += 1;
      }
    } else {
      // assimp skips header lines it does not know (Blender 2.4x writes "Created by ..."):
      // they describe no data, so they cannot make the reader run past the file.
      spdlog::debug("{}: {}: ignored header line '{}'", path, where, std::string(line));
    }
  }
  if (!ended) fail(path, "PLY header has no end_header");
  if (format.empty()) fail(path, "PLY header has no format line");
  const size_t data = std::min(pos, bytes.size());
  const uint64_t available = bytes.size() - data;
  long double need = 0;  // long double: counts near 2^64 must not wrap
  for (const auto& e : elements) {
    need += (long double)e.count * (format == "ascii" ? e.min_tokens * 2 : e.min_bytes);
  }
  // ASCII rows need at least one character and one separator per token.
  if (need > (long double)available + 1) {
    fail(path, "PLY header announces more data than the file holds (" + std::to_string(available) +
                   " bytes after the header)");
  }
}

// OBJ: a face line needs at least three vertex references. assimp silently drops shorter ones,
// which hides damaged files.
void check_obj(const std::string& path, const std::string& bytes) {
  // assimp 5.2 reads OBJ as 8-bit text: a UTF-16 file would come back empty, misleadingly.
  const auto starts = [&](unsigned char a, unsigned char b) {
    return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == a &&
           static_cast<unsigned char>(bytes[1]) == b;
  };
  if (starts(0xFE, 0xFF) || starts(0xFF, 0xFE))
    fail(path, "the OBJ file is UTF-16 text, which the OBJ reader cannot read: save it as UTF-8");
  size_t pos = 0;
  std::string_view line;
  uint64_t line_no = 0;
  while (next_line(bytes, pos, line)) {
    ++line_no;
    if (line.empty() || line[0] != 'f') continue;
    if (line.size() > 1 && line[1] != ' ' && line[1] != '\t' && line[1] != '\r') continue;
    const auto t = split_ws(line);
    if (t.size() < 4) {
      fail(path, "OBJ line " + std::to_string(line_no) + ": face with fewer than 3 vertices");
    }
  }
}

}  // namespace

void precheck_mesh_file(const std::string& path, const std::string& ext, const std::string& bytes) {
  if (ext == ".off") check_off(path, bytes);
  if (ext == ".ply") check_ply(path, bytes);
  if (ext == ".obj") check_obj(path, bytes);
}

}  // namespace gen3d::mesh::detail
