#include "support/paths.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace gen3d::test {

std::string source_dir() {
  return GEN3D_SOURCE_DIR;
}
std::string data_dir() {
  return std::string(GEN3D_SOURCE_DIR) + "/tests/data";
}
std::string gen3d_executable() {
  return std::string(GEN3D_BINARY_DIR) + "/gen3d";
}

std::string temp_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(GEN3D_BINARY_DIR) / "test-tmp" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

}  // namespace gen3d::test
