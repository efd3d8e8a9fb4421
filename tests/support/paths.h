#pragma once
// Where tests find their data and the built executable.

#include <string>

namespace gen3d::test {

std::string source_dir();                       // repository root
std::string data_dir();                         // <root>/tests/data
std::string gen3d_executable();                 // <build>/gen3d
std::string temp_dir(const std::string& name);  // fresh, empty directory under the build tree

// A file's bytes ("" when it cannot be read).
std::string read_bytes(const std::string& path);

// Value of an environment variable, or `fallback` when unset/empty.
std::string env_or(const char* name, const std::string& fallback);

}  // namespace gen3d::test
