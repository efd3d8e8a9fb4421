// Base64 round trips, the RFC 4648 test vectors and malformed input.

#include "io/base64.h"

#include <stdexcept>

#include <gtest/gtest.h>

namespace gen3d::io {
namespace {

TEST(Base64, Rfc4648Vectors) {
  const std::pair<const char*, const char*> cases[] = {{"", ""},
                                                       {"f", "Zg=="},
                                                       {"fo", "Zm8="},
                                                       {"foo", "Zm9v"},
                                                       {"foob", "Zm9vYg=="},
                                                       {"fooba", "Zm9vYmE="},
                                                       {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : cases) {
    EXPECT_EQ(base64_encode(plain), encoded);
    EXPECT_EQ(base64_decode(encoded), plain);
  }
}

TEST(Base64, RoundTripsEveryByte) {
  std::string bytes;
  for (int i = 0; i < 256 * 3 + 1; ++i) bytes += static_cast<char>(i * 37);
  EXPECT_EQ(base64_decode(base64_encode(bytes)), bytes);
}

TEST(Base64, SkipsWhitespaceAndMissingPadding) {
  EXPECT_EQ(base64_decode("Zm9v\nYmE"), "fooba");
  EXPECT_EQ(base64_decode(" Zg "), "f");
}

TEST(Base64, RejectsMalformedInput) {
  EXPECT_THROW(base64_decode("Zm9v!"), std::invalid_argument);
  EXPECT_THROW(base64_decode("Z"), std::invalid_argument);
  EXPECT_THROW(base64_decode("Zg=v"), std::invalid_argument);
  EXPECT_THROW(base64_decode("Zg==="), std::invalid_argument);
}

}  // namespace
}  // namespace gen3d::io
