// Real-world robustness sweep: `gen3d texture` on files made by other tools (assimp's test models,
// tests/data/mesh/meshes-assimp) and on generated awkward meshes. Every file must give either a
// GLB that the Khronos glTF validator accepts and that the reference image reached, or exit code 1
// with exactly one error line; never a crash, a hang or exit 0 without a valid file. The expected
// outcome of each file is in tests/data/mesh/sweep.json; one test per file.

#include <sys/wait.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/run_command.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string table_path() {
  return env_or("GEN3D_SWEEP_TABLE", data_dir() + "/mesh/sweep.json");
}

json load_table() {
  std::ifstream in(table_path());
  if (!in) return json::object();
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

struct Entry {
  std::string name;  // the test's name: the file's path with every other character as '_'
  json spec;
};

// Test names carry the file; print that instead of the bytes of Entry.
void PrintTo(const Entry& e, std::ostream* os) {
  *os << e.name;
}

std::vector<Entry> entries() {
  std::vector<Entry> out;
  const json table = load_table();
  if (!table.is_object() || !table.contains("files")) return out;
  for (const json& f : table["files"]) {
    std::string name = f.value("mesh", f.value("generate", std::string("unnamed")));
    for (char& c : name)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    out.push_back({name, f});
  }
  return out;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// A lat-long unit sphere, (rows + 1) x (cols + 1) vertices with the seam column and the pole rows
// duplicated, so each pole row gives `cols` zero-area triangles; 2 * rows * cols faces in all.
// `inside_out` winds every face clockwise seen from outside.
void write_sphere(const std::string& path, int rows, int cols, bool inside_out) {
  std::ofstream out(path);
  for (int i = 0; i <= rows; ++i) {
    const double theta = M_PI * i / rows;
    for (int j = 0; j <= cols; ++j) {
      const double phi = 2.0 * M_PI * j / cols;
      out << "v " << std::sin(theta) * std::cos(phi) << ' ' << std::cos(theta) << ' '
          << std::sin(theta) * std::sin(phi) << '\n';
    }
  }
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      const int a = i * (cols + 1) + j + 1, b = a + 1, c = a + cols + 1, d = c + 1;
      if (inside_out)
        out << "f " << a << ' ' << c << ' ' << b << "\nf " << b << ' ' << c << ' ' << d << '\n';
      else
        out << "f " << a << ' ' << b << ' ' << c << "\nf " << b << ' ' << d << ' ' << c << '\n';
    }
}

std::string generate_mesh(const std::string& kind, const std::string& dir) {
  const std::string path = dir + "/" + kind + ".obj";
  if (kind == "degenerate_sphere")
    write_sphere(path, 100, 100, false);
  else if (kind == "inside_out_sphere")
    write_sphere(path, 100, 100, true);
  else
    return "";
  return path;
}

std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos) out.push_back(line);
  return out;
}

// Khronos validator through node, or an empty string when it is not installed.
std::string validator_command() {
  const std::string node_dir = env_or("GEN3D_NODE_DIR", GEN3D_NODE_DIR);
  if (std::system("node --version > /dev/null 2>&1") != 0) return "";
  if (!fs::exists(node_dir + "/node_modules/gltf-validator")) return "";
  return "node " + quote(source_dir() + "/tests/mesh/validate_gltf.js") + " " + quote(node_dir);
}

// Without the validator: at least a GLB 2.0 header whose length is the file's.
bool plausible_glb(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint32_t header[3] = {};
  if (!in.read(reinterpret_cast<char*>(header), sizeof header)) return false;
  return header[0] == 0x46546C67u && header[1] == 2 && header[2] == fs::file_size(path);
}

class Sweep : public ::testing::TestWithParam<Entry> {};

TEST_P(Sweep, TextureGivesValidGlbOrOneClearError) {
  const json table = load_table();
  const json& spec = GetParam().spec;
  const std::string expect = spec.value("expect", "");
  ASSERT_TRUE(expect == "textured" || expect == "error" || expect == "known_bug")
      << "bad 'expect' in " << table_path() << ": " << spec.dump();

  const std::string tmp = temp_dir("sweep/" + GetParam().name);
  std::string mesh;
  if (spec.contains("mesh")) {
    mesh = data_dir() + "/mesh/meshes-assimp/" + spec["mesh"].get<std::string>();
    ASSERT_TRUE(fs::exists(mesh)) << mesh;
  } else {
    mesh = generate_mesh(spec.value("generate", ""), tmp);
    ASSERT_FALSE(mesh.empty()) << "unknown 'generate' in " << spec.dump();
  }
  const std::string out = tmp + "/out.glb", metrics = tmp + "/metrics.json";
  const int timeout_s = table.value("timeout_s", 60);
  const std::string args =
      "-q texture --mesh " + quote(mesh) + " --image " + quote(table.value("image", "")) + " -o " +
      quote(out) + " --metrics " + quote(metrics) + " --texture-size " +
      std::to_string(spec.value("texture_size", table.value("texture_size", 128))) +
      " --render-size " +
      std::to_string(spec.value("render_size", table.value("render_size", 128))) + " </dev/null";
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r = run_gen3d(args, timeout_s);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string what = "gen3d " + args + "\n" + r.output;

  // The contract every file keeps, known bugs included.
  ASSERT_TRUE(r.exit_code != 124 && seconds < timeout_s)
      << "no result within " << timeout_s << " s: " << what;
  ASSERT_LT(r.exit_code, 128) << "killed by signal " << r.exit_code - 128 << ": " << what;
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << what;
  const std::vector<std::string> errors = lines_with(r.output, "[error]");
  if (r.exit_code == 0) {
    ASSERT_TRUE(fs::exists(out)) << "exit 0 without an output file: " << what;
    EXPECT_TRUE(errors.empty()) << what;
    if (const std::string validate = validator_command(); !validate.empty()) {
      const CommandResult v = run_command(validate + " " + quote(out));
      ASSERT_EQ(v.exit_code, 0) << "the glTF validator refuses the output:\n"
                                << v.output << "\n"
                                << what;
    } else {
      ASSERT_TRUE(plausible_glb(out)) << "not a GLB 2.0 file: " << what;
    }
  } else {
    EXPECT_FALSE(fs::exists(out)) << "a failed run left its output behind: " << what;
    ASSERT_EQ(errors.size(), 1u) << "want exactly one error line: " << what;
  }

  if (expect == "known_bug") {
    GTEST_SKIP() << "known bug: " << spec.value("bug", std::string("(undescribed)"));
  } else if (expect == "error") {
    EXPECT_FALSE(spec.value("reason", "").empty()) << "an error entry needs a 'reason'";
    ASSERT_EQ(r.exit_code, 1) << "expected a refusal: " << what;
    const std::string fragment = spec.value("message", "");
    ASSERT_FALSE(fragment.empty()) << "an error entry needs a 'message'";
    EXPECT_NE(errors[0].find(fragment), std::string::npos)
        << "the error lacks \"" << fragment << "\": " << errors[0];
  } else {
    ASSERT_EQ(r.exit_code, 0) << what;
    // A valid file is not enough: the reference image must have reached the texture.
    std::ifstream in(metrics);
    ASSERT_TRUE(in) << "no metrics file " << metrics;
    const json m = json::parse(in, nullptr, /*allow_exceptions=*/false);
    const double share = m.is_object() && m.contains("counters")
                             ? m["counters"].value("bake.share_views", 0.0)
                             : 0.0;
    EXPECT_GT(share, 0.0) << "no texel painted from the reference image (bake.share_views): "
                          << what;
  }
}

std::string entry_name(const ::testing::TestParamInfo<Entry>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Files, Sweep, ::testing::ValuesIn(entries()), entry_name);

// The table itself: present, parsed, broad, with unique names.
TEST(SweepTable, CoversTheFormats) {
  const std::vector<Entry> all = entries();
  ASSERT_GE(all.size(), 50u) << "missing or unreadable " << table_path();
  std::set<std::string> names;
  for (const Entry& e : all) EXPECT_TRUE(names.insert(e.name).second) << "twice: " << e.name;
  for (const char* ext : {".obj", ".ply", ".stl", ".off", ".fbx", ".gltf", ".glb"}) {
    bool found = false;
    for (const Entry& e : all) {
      std::string mesh = e.spec.value("mesh", "");
      for (char& c : mesh) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      found |= mesh.size() > std::string(ext).size() &&
               mesh.compare(mesh.size() - std::string(ext).size(), std::string::npos, ext) == 0;
    }
    EXPECT_TRUE(found) << "no " << ext << " file in the sweep";
  }
}

}  // namespace
}  // namespace gen3d::test
