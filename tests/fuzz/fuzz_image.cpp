// Image files from arbitrary bytes, decoded as the project decodes every user image and every
// texture embedded in a mesh (image/codec: OpenCV's decoders, then the RGB(A) layouts Image has).
#include <cstddef>
#include <cstdint>

#include "image/codec.h"
#include "image/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const gen3d::image::Image img = gen3d::image::decode_image(data, size, "fuzz");
    (void)img;
  } catch (const gen3d::image::ImageError&) {
  }
  return 0;
}
