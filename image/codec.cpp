// PNG through libpng (reading) and zlib (writing), JPEG through TurboJPEG, WebP through libwebp.
// OpenCV's imgcodecs would do
// the same, but it pulls GDAL and about 120 other shared libraries into every process: 75 ms of
// start-up for each gen3d command, more than many re-runs spend computing.
#include "image/codec.h"

#include <png.h>
#include <tbb/parallel_for.h>
#include <turbojpeg.h>
#include <webp/decode.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>
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

// The largest image decoded: 16384 x 16384 pixels, the largest texture and render size a
// pipeline takes (4 GiB as float RGBA; OpenCV allowed four times that).
constexpr size_t kMaxPixels = size_t{1} << 28;

void check_pixels(const char* format, int width, int height, const std::string& what) {
  const std::string size = std::to_string(width) + " x " + std::to_string(height);
  if (width <= 0 || height <= 0) fail_decode(what, std::string(format) + ": bad size " + size);
  if (static_cast<size_t>(width) * static_cast<size_t>(height) > kMaxPixels)
    fail_decode(what, std::string(format) + ": " + size +
                          " pixels is more than gen3d decodes (16384 x 16384)");
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
    png_error(png, "more pixels than gen3d decodes (16384 x 16384)");
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

// PNG is written here around zlib rather than through libpng, because libpng deflates on one
// thread and a 2048 texture's deflate (~120 ms) is a third of a re-run that only changed the
// inpainting. Horizontal strips are filtered and deflated side by side, each a raw deflate stream
// ended by a sync flush (the last one finished), put together behind one zlib header with the
// combined Adler-32, as pigz does. The settings are OpenCV's defaults: the Sub filter, zlib level
// 1, run-length strategy. The container is four chunk types with their CRC-32s.

void put_u32be(std::string& out, uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 8), static_cast<char>(v)};
  out.append(b, 4);
}

void put_chunk(std::string& out, const char* type, std::string_view data) {
  put_u32be(out, static_cast<uint32_t>(data.size()));
  const size_t start = out.size();
  out.append(type, 4);
  out.append(data);
  put_u32be(out, static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(out.data() + start),
                                             static_cast<uInt>(out.size() - start))));
}

struct Strip {
  std::string deflated;
  uLong adler = 1;
  size_t filtered_bytes = 0;
  bool ok = true;
};

// Rows [y0, y1) as Sub-filtered scanlines, converted from float on the way, deflated.
void deflate_strip(const Image& image, int y0, int y1, bool last, Strip& out) {
  const size_t row = static_cast<size_t>(image.width) * image.channels;
  const size_t ch = static_cast<size_t>(image.channels);
  std::vector<Bytef> filtered((row + 1) * static_cast<size_t>(y1 - y0));
  std::vector<std::uint8_t> line(row);
  for (int y = y0; y < y1; ++y) {
    const float* src = image.row(y);
    for (size_t i = 0; i < row; ++i) {
      const float v = src[i];
      line[i] = unit_to_u8(std::isfinite(v) ? std::clamp(v, 0.0f, 1.0f) : 0.0f);
    }
    Bytef* dst = filtered.data() + (row + 1) * static_cast<size_t>(y - y0);
    dst[0] = 1;  // Sub: each sample minus the one a pixel to its left
    for (size_t i = 0; i < row; ++i)
      dst[1 + i] = static_cast<Bytef>(line[i] - (i >= ch ? line[i - ch] : 0));
  }
  out.filtered_bytes = filtered.size();
  out.adler = adler32(1, filtered.data(), static_cast<uInt>(filtered.size()));
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, -15, 8, Z_RLE) != Z_OK) {
    out.ok = false;
    return;
  }
  out.deflated.resize(deflateBound(&z, static_cast<uLong>(filtered.size())) + 16);
  z.next_in = filtered.data();
  z.avail_in = static_cast<uInt>(filtered.size());
  z.next_out = reinterpret_cast<Bytef*>(out.deflated.data());
  z.avail_out = static_cast<uInt>(out.deflated.size());
  const int status = deflate(&z, last ? Z_FINISH : Z_SYNC_FLUSH);
  // All input taken and all output out (room left in the buffer: nothing pending).
  out.ok = (last ? status == Z_STREAM_END : status == Z_OK) && z.avail_in == 0 && z.avail_out > 0;
  out.deflated.resize(z.total_out);
  deflateEnd(&z);
}

std::string encode_png(const Image& image, const std::string& what) {
  // Strips of at least 32 rows, a few per core, each under 1 GiB of filtered bytes.
  const size_t row = static_cast<size_t>(image.width) * image.channels + 1;
  const size_t max_rows = std::max<size_t>(1, (size_t{1} << 30) / row);
  const int rows_per_strip =
      static_cast<int>(std::min<size_t>(max_rows, std::max(32, (image.height + 15) / 16)));
  const int strips = (image.height + rows_per_strip - 1) / rows_per_strip;
  std::vector<Strip> parts(static_cast<size_t>(strips));
  tbb::parallel_for(0, strips, [&](int k) {
    const int y0 = k * rows_per_strip, y1 = std::min(image.height, y0 + rows_per_strip);
    deflate_strip(image, y0, y1, k + 1 == strips, parts[static_cast<size_t>(k)]);
  });
  std::string zdata("\x78\x01", 2);  // deflate, 32K window, fastest level
  uLong adler = 1;
  for (const Strip& s : parts) {
    if (!s.ok) fail_encode(what, "PNG: zlib could not compress the image");
    zdata += s.deflated;
    adler = adler32_combine(adler, s.adler, static_cast<z_off_t>(s.filtered_bytes));
  }
  put_u32be(zdata, static_cast<uint32_t>(adler));

  std::string out("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  put_u32be(ihdr, static_cast<uint32_t>(image.width));
  put_u32be(ihdr, static_cast<uint32_t>(image.height));
  const char color = image.channels == 1 ? 0 : image.channels == 3 ? 2 : 6;
  ihdr +=
      std::string{8, color, 0, 0, 0};  // 8 bits, colour type, deflate, filter set 0, no interlace
  put_chunk(out, "IHDR", ihdr);
  constexpr size_t kIdat = size_t{1} << 24;  // chunks of 16 MiB
  for (size_t at = 0; at < zdata.size(); at += kIdat)
    put_chunk(out, "IDAT", std::string_view(zdata).substr(at, kIdat));
  put_chunk(out, "IEND", {});
  return out;
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
  if (ext == ".png") return encode_png(image, what);
  if (ext != ".jpg" && ext != ".jpeg")
    fail_encode(what, "no encoder for '" + ext + "' (use .png or .jpg)");
  std::vector<std::uint8_t> px(image.pixels.size());
  for (size_t i = 0; i < px.size(); ++i) {
    const float v = image.pixels[i];
    px[i] = unit_to_u8(std::isfinite(v) ? std::clamp(v, 0.0f, 1.0f) : 0.0f);
  }
  return encode_jpeg(px.data(), image.width, image.height, image.channels, what);
}

}  // namespace gen3d::image
