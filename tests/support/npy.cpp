#include "support/npy.h"

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace gen3d::test {
namespace {

std::runtime_error npy_error(const std::string& path, const std::string& what) {
  return std::runtime_error(path + ": not a readable .npy file (" + what + ")");
}

// Returns the text of a quoted value for `key` in the header dict, e.g. 'descr': '<f4'.
std::string dict_value(const std::string& header, const std::string& key) {
  const auto k = header.find("'" + key + "'");
  if (k == std::string::npos) return {};
  auto colon = header.find(':', k);
  if (colon == std::string::npos) return {};
  auto start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos) return {};
  if (header[start] == '\'') {
    const auto end = header.find('\'', start + 1);
    return header.substr(start + 1, end - start - 1);
  }
  if (header[start] == '(') {
    const auto end = header.find(')', start);
    return header.substr(start + 1, end - start - 1);
  }
  const auto end = header.find_first_of(",}", start);
  return header.substr(start, end - start);
}

}  // namespace

int64_t NpyArray::size() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<float> NpyArray::as_float() const {
  return {values.begin(), values.end()};
}

std::vector<int32_t> NpyArray::as_int() const {
  std::vector<int32_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<int32_t>(values[i]);
  return out;
}

NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw npy_error(path, "magic");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    header_len = b[0] | (b[1] << 8);
  } else {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (uint32_t(b[3]) << 24);
  }
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) throw npy_error(path, "short header");
  if (dict_value(header, "fortran_order") == "True") throw npy_error(path, "Fortran order");

  NpyArray a;
  a.dtype = dict_value(header, "descr");
  const std::string shape = dict_value(header, "shape");
  size_t pos = 0;
  while (pos < shape.size()) {
    const auto comma = shape.find(',', pos);
    const std::string item =
        shape.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.find_first_not_of(' ') != std::string::npos) a.shape.push_back(std::stoll(item));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  const int64_t n = a.size();
  a.values.resize(static_cast<size_t>(n));
  auto read_all = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> raw(static_cast<size_t>(n));
    if (!in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(n * sizeof(T))))
      throw npy_error(path, "short data");
    for (int64_t i = 0; i < n; ++i) a.values[i] = static_cast<double>(raw[i]);
  };
  if (a.dtype == "<f4")
    read_all(float{});
  else if (a.dtype == "<f8")
    read_all(double{});
  else if (a.dtype == "<i4")
    read_all(int32_t{});
  else if (a.dtype == "<i8")
    read_all(int64_t{});
  else if (a.dtype == "|u1")
    read_all(uint8_t{});
  else
    throw npy_error(path, "unsupported dtype " + a.dtype);
  return a;
}

}  // namespace gen3d::test
