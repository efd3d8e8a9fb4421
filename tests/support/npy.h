#pragma once
// Minimal reader for NumPy .npy files (version 1.x/2.x, little-endian, C order,
// <f4/<i4/<f8/<i8/|u1), used by the golden tests. Values are widened to double so callers can pick
// their type.

#include <cstdint>
#include <string>
#include <vector>

namespace gen3d::test {

struct NpyArray {
  std::vector<int64_t> shape;
  std::string dtype;  // "<f4", "<i4", ...
  std::vector<double> values;

  int64_t size() const;
  std::vector<float> as_float() const;
  std::vector<int32_t> as_int() const;
};

// Throws std::runtime_error naming the file on any malformed header or short read.
NpyArray read_npy(const std::string& path);

}  // namespace gen3d::test
