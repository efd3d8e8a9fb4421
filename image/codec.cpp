// PNG through libpng, JPEG through TurboJPEG, WebP through libwebp. OpenCV's imgcodecs would do
// the same, but it pulls GDAL and about 120 other shared libraries into every process: 75 ms of
// start-up for each gen3d command, more than many re-runs spend computing.
#include "image/codec.h"

#include <png.h>
#include <turbojpeg.h>
#include <webp/decode.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "image/convert.h"
#include "image/error.h"

namespace gen3d::image {
namespace {

[[noreturn]] void fail_decode(const std::string& what, const std::string& why) {
  throw ImageError("cannot decode image '" + what + "': " + why);
}

[[noreturn]] void fail_encode(const std::string& what, const std::string& why) {
  throw ImageError("cannot encode image '" + what + "': " + why);
}

bool starts_with(const std::uint8_t* data, size_t size, const char* magic, size_t offset = 0) {
  const size_t n = std::strlen(magic);
  return size >= offset + n && std::memcmp(data + offset, magic, n) == 0;
}

// Names a format gen3d does not read, so the error says what the file is.
std::string unsupported_format(const std::uint8_t* data, size_t size) {
  if (starts_with(data, size, "BM")) return "a BMP image";
  if (starts_with(data, size, "II*") || starts_with(data, size, "MM")) return "a TIFF image";
  if (starts_with(data, size, "GIF8")) return "a GIF image";
  if (starts_with(data, size, "DDS ")) return "a DDS texture";
  if (starts_with(data, size, "\xABKTX")) return "a KTX texture";
  if (starts_with(data, size, "\x76\x2f\x31\x01")) return "an OpenEXR image";
  return "an unknown or corrupt format";
}

// ---- PNG -------------------------------------------------------------------------------------

// Samples scale to [0, 1] by multiplying with the float nearest 1/255 (1/65535), as OpenCV's
// convertTo does, so decoded values stay what they were when gen3d decoded through OpenCV.
constexpr float kUnit8 = static_cast<float>(1.0 / 255.0);
constexpr float kUnit16 = static_cast<float>(1.0 / 65535.0);

// The largest image decoded, in pixels (OpenCV's default limit): 4 GiB as float RGBA.
constexpr size_t kMaxPixels = size_t{1} << 30;

void check_pixels(const char* format, int width, int height, const std::string& what) {
  const std::string size = std::to_string(width) + " x " + std::to_string(height);
  if (width <= 0 || height <= 0) fail_decode(what, std::string(format) + ": bad size " + size);
  if (static_cast<size_t>(width) * static_cast<size_t>(height) > kMaxPixels)
    fail_decode(what,
                std::string(format) + ": " + size + " pixels is more than gen3d decodes (2^30)");
}

// libpng reports errors through this buffer (its error pointer), then longjmps.
struct PngError {
  char text[200] = "";
};

struct PngSource {
  const std::uint8_t* data;
  size_t size;
  size_t offset;
  PngError error;
};

void png_on_error(png_structp png, png_const_charp message) {
  auto* error = static_cast<PngError*>(png_get_error_ptr(png));
  std::snprintf(error->text, sizeof(error->text), "%s", message);
  png_longjmp(png, 1);
}

void png_on_warning(png_structp, png_const_charp) {}  // ancillary-chunk complaints: not fatal

void png_read_bytes(png_structp png, png_bytep out, png_size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->size - src->offset) png_error(png, "truncated data");
  std::memcpy(out, src->data + src->offset, n);
  src->offset += n;
}

struct PngPixels {
  int width = 0, height = 0, channels = 0, bits = 0;
  std::vector<std::uint8_t> bytes;  // rows of width * channels samples, 16-bit ones native-endian
  std::vector<std::uint8_t*> rows;  // into bytes, for libpng
};

// Decodes with libpng's transforms chosen as OpenCV chooses them for IMREAD_UNCHANGED: palettes
// and low bit depths widen to 8 bits, transparency chunks become alpha, 16 bits stay 16 bits, no
// gamma conversion. Only trivially destructible objects live between setjmp and a longjmp; the
// output buffer belongs to the caller. Returns false with src.error set on failure.
bool png_decode(PngSource& src, PngPixels& out) {
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &src.error, png_on_error, png_on_warning);
  if (!png) return false;
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
    return false;
  }
  png_set_read_fn(png, &src, png_read_bytes);
  png_read_info(png, info);
  if (static_cast<size_t>(png_get_image_width(png, info)) * png_get_image_height(png, info) >
      kMaxPixels)
    png_error(png, "more pixels than gen3d decodes (2^30)");
  const int color = png_get_color_type(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8)
    png_set_expand_gray_1_2_4_to_8(png);
  if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
  if (png_get_bit_depth(png, info) == 16) png_set_swap(png);  // native little-endian samples
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  out.width = static_cast<int>(png_get_image_width(png, info));
  out.height = static_cast<int>(png_get_image_height(png, info));
  out.channels = png_get_channels(png, info);
  out.bits = png_get_bit_depth(png, info);
  const size_t row = png_get_rowbytes(png, info);
  out.bytes.resize(row * static_cast<size_t>(out.height));
  out.rows.resize(static_cast<size_t>(out.height));
  for (int y = 0; y < out.height; ++y) out.rows[y] = out.bytes.data() + row * y;
  png_read_image(png, out.rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

Image decode_png(const std::uint8_t* data, size_t size, const std::string& what) {
  PngSource src{data, size, 0, {}};
  PngPixels px;
  if (!png_decode(src, px)) fail_decode(what, std::string("PNG: ") + src.error.text);
  if (px.bits != 8 && px.bits != 16) fail_decode(what, "PNG: unsupported bit depth");
  // Grey + alpha widens to RGBA, the closest layout Image supports.
  const int channels = px.channels == 2 ? 4 : px.channels;
  Image img(px.width, px.height, channels);
  const size_t n = static_cast<size_t>(px.width) * px.height;
  const auto sample = [&](size_t i) -> float {
    if (px.bits == 8) return px.bytes[i] * kUnit8;
    std::uint16_t v;
    std::memcpy(&v, px.bytes.data() + 2 * i, 2);
    return v * kUnit16;
  };
  for (size_t p = 0; p < n; ++p) {
    float* q = img.pixels.data() + p * channels;
    if (px.channels == 2) {
      q[0] = q[1] = q[2] = sample(2 * p);
      q[3] = sample(2 * p + 1);
    } else {
      for (int c = 0; c < channels; ++c) q[c] = sample(p * channels + c);
    }
  }
  return img;
}

struct PngSink {
  std::string* bytes;
  PngError error;
};

void png_write_bytes(png_structp png, png_bytep in, png_size_t n) {
  static_cast<PngSink*>(png_get_io_ptr(png))->bytes->append(reinterpret_cast<const char*>(in), n);
}

void png_flush(png_structp) {}

// Fast settings (zlib level 1, run-length strategy, the Sub filter), as OpenCV writes by default:
// textures are large and written on every run. Returns false with sink.error set on failure.
bool png_encode(const std::uint8_t* pixels, int width, int height, int channels, PngSink& sink) {
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, &sink.error, png_on_error, png_on_warning);
  if (!png) return false;
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, info ? &info : nullptr);
    return false;
  }
  png_set_write_fn(png, &sink, png_write_bytes, png_flush);
  const int color = channels == 1   ? PNG_COLOR_TYPE_GRAY
                    : channels == 3 ? PNG_COLOR_TYPE_RGB
                                    : PNG_COLOR_TYPE_RGB_ALPHA;
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8,
               color, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_SUB);
  png_set_compression_level(png, 1);
  png_set_compression_strategy(png, 3 /* Z_RLE */);
  png_write_info(png, info);
  const size_t row = static_cast<size_t>(width) * channels;
  for (int y = 0; y < height; ++y)
    png_write_row(png, const_cast<png_bytep>(pixels + row * static_cast<size_t>(y)));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

// ---- JPEG ------------------------------------------------------------------------------------

struct TjHandle {
  tjhandle h;
  explicit TjHandle(tjhandle handle) : h(handle) {}
  ~TjHandle() {
    if (h) tjDestroy(h);
  }
  TjHandle(const TjHandle&) = delete;
  TjHandle& operator=(const TjHandle&) = delete;
};

Image decode_jpeg(const std::uint8_t* data, size_t size, const std::string& what) {
  TjHandle tj(tjInitDecompress());
  if (!tj.h) fail_decode(what, "JPEG: cannot start the decoder");
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(tj.h, data, static_cast<unsigned long>(size), &width, &height,
                          &subsampling, &colorspace) != 0)
    fail_decode(what, std::string("JPEG: ") + tjGetErrorStr2(tj.h));
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK)
    fail_decode(what, "JPEG: CMYK images are not supported (save it as RGB)");
  check_pixels("JPEG", width, height, what);
  const bool grey = colorspace == TJCS_GRAY;
  const int channels = grey ? 1 : 3;
  std::vector<std::uint8_t> px(static_cast<size_t>(width) * height * channels);
  // Accurate DCT and smooth chroma upsampling, libjpeg's defaults (and OpenCV's).
  if (tjDecompress2(tj.h, data, static_cast<unsigned long>(size), px.data(), width, 0, height,
                    grey ? TJPF_GRAY : TJPF_RGB, TJFLAG_ACCURATEDCT) != 0 &&
      tjGetErrorCode(tj.h) == TJERR_FATAL)
    fail_decode(what, std::string("JPEG: ") + tjGetErrorStr2(tj.h));
  Image img(width, height, channels);
  for (size_t i = 0; i < px.size(); ++i) img.pixels[i] = px[i] * kUnit8;
  return img;
}

// JPEG has no alpha: RGBA is written as its RGB, as OpenCV did.
std::string encode_jpeg(const std::uint8_t* pixels, int width, int height, int channels,
                        const std::string& what) {
  TjHandle tj(tjInitCompress());
  if (!tj.h) fail_encode(what, "JPEG: cannot start the encoder");
  unsigned char* out = nullptr;
  unsigned long n = 0;
  // Quality 95 with 4:2:0 chroma, as OpenCV writes by default.
  const int format = channels == 1 ? TJPF_GRAY : channels == 3 ? TJPF_RGB : TJPF_RGBX;
  if (tjCompress2(tj.h, pixels, width, 0, height, format, &out, &n,
                  channels == 1 ? TJSAMP_GRAY : TJSAMP_420, 95, TJFLAG_ACCURATEDCT) != 0) {
    const std::string why = tjGetErrorStr2(tj.h);
    tjFree(out);
    fail_encode(what, "JPEG: " + why);
  }
  std::string bytes(reinterpret_cast<const char*>(out), n);
  tjFree(out);
  return bytes;
}

// ---- WebP ------------------------------------------------------------------------------------

Image decode_webp(const std::uint8_t* data, size_t size, const std::string& what) {
  WebPBitstreamFeatures features;
  if (WebPGetFeatures(data, size, &features) != VP8_STATUS_OK)
    fail_decode(what, "WebP: corrupt header");
  const int channels = features.has_alpha ? 4 : 3;
  const int width = features.width, height = features.height;
  check_pixels("WebP", width, height, what);
  std::vector<std::uint8_t> px(static_cast<size_t>(width) * height * channels);
  const int stride = width * channels;
  const std::uint8_t* ok = features.has_alpha
                               ? WebPDecodeRGBAInto(data, size, px.data(), px.size(), stride)
                               : WebPDecodeRGBInto(data, size, px.data(), px.size(), stride);
  if (!ok) fail_decode(what, "WebP: corrupt data");
  Image img(width, height, channels);
  for (size_t i = 0; i < px.size(); ++i) img.pixels[i] = px[i] * kUnit8;
  return img;
}

}  // namespace

Image decode_image(const std::uint8_t* data, size_t size, const std::string& what) {
  if (size == 0 || data == nullptr) fail_decode(what, "no data");
  if (starts_with(data, size, "\x89PNG\r\n\x1a\n")) return decode_png(data, size, what);
  if (starts_with(data, size, "\xFF\xD8\xFF")) return decode_jpeg(data, size, what);
  if (starts_with(data, size, "RIFF") && starts_with(data, size, "WEBP", 8))
    return decode_webp(data, size, what);
  fail_decode(what, unsupported_format(data, size) + " (gen3d reads PNG, JPEG and WebP)");
}

std::string encode_image(const Image& image, const std::string& ext, const std::string& what) {
  if (image.empty() || image.width <= 0 || image.height <= 0 ||
      image.pixels.size() != size_t(image.width) * image.height * image.channels) {
    fail_encode(what, "empty or inconsistent image");
  }
  if (image.channels != 1 && image.channels != 3 && image.channels != 4)
    fail_encode(what, "unsupported channel count");
  std::vector<std::uint8_t> px(image.pixels.size());
  for (size_t i = 0; i < px.size(); ++i) {
    const float v = image.pixels[i];
    px[i] = unit_to_u8(std::isfinite(v) ? std::clamp(v, 0.0f, 1.0f) : 0.0f);
  }
  if (ext == ".png") {
    std::string bytes;
    PngSink sink{&bytes, {}};
    if (!png_encode(px.data(), image.width, image.height, image.channels, sink))
      fail_encode(what, std::string("PNG: ") + sink.error.text);
    return bytes;
  }
  if (ext == ".jpg" || ext == ".jpeg")
    return encode_jpeg(px.data(), image.width, image.height, image.channels, what);
  fail_encode(what, "no encoder for '" + ext + "' (use .png or .jpg)");
}

}  // namespace gen3d::image
