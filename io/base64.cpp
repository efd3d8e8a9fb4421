#include "io/base64.h"

#include <array>
#include <cstdint>
#include <stdexcept>

namespace gen3d::io {

namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// 0..63 for a letter of the alphabet, -1 otherwise.
constexpr std::array<int8_t, 256> decode_table() {
  std::array<int8_t, 256> t{};
  for (int8_t& v : t) v = -1;
  for (size_t i = 0; i < kAlphabet.size(); ++i)
    t[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
  return t;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  const auto at = [&](size_t i) -> uint32_t {
    return i < bytes.size() ? static_cast<unsigned char>(bytes[i]) : 0u;
  };
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t b = (at(i) << 16) | (at(i + 1) << 8) | at(i + 2);
    out += kAlphabet[(b >> 18) & 63];
    out += kAlphabet[(b >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(b >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[b & 63] : '=';
  }
  return out;
}

std::string base64_decode(std::string_view text) {
  static constexpr std::array<int8_t, 256> kTable = decode_table();
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t letters = 0, padding = 0;
  for (size_t k = 0; k < text.size(); ++k) {
    const char c = text[k];
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    const int v = kTable[static_cast<unsigned char>(c)];
    if (v < 0 || padding > 0)
      throw std::invalid_argument("base64: unexpected character at offset " + std::to_string(k));
    ++letters;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  if (letters % 4 == 1 || padding > 2 || (padding > 0 && (letters + padding) % 4 != 0))
    throw std::invalid_argument("base64: truncated input");
  return out;
}

}  // namespace gen3d::io
