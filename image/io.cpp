#include "image/io.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "image/codec.h"
#include "image/error.h"
#include "io/atomic_file.h"
#include "io/error.h"

namespace gen3d::image {

Image load_image(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ImageError("cannot open image '" + path + "': no such file or not readable");
  const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                        std::istreambuf_iterator<char>());
  return decode_image(bytes.data(), bytes.size(), path);
}

void save_image(const Image& image, const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (ext != ".png" && ext != ".jpg" && ext != ".jpeg") {
    throw ImageError("cannot write image '" + path + "': unsupported extension (use .png or .jpg)");
  }
  const std::string bytes = encode_image(image, ext, path);
  try {
    io::write_file_atomically(path, bytes);
  } catch (const io::IoError& e) {
    throw ImageError(e.what());
  }
}

}  // namespace gen3d::image
