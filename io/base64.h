#pragma once
// Base64 (RFC 4648, the standard alphabet with '=' padding): files inlined in HTML reports and
// carried in JSON request and response bodies.

#include <string>
#include <string_view>

namespace gen3d::io {

std::string base64_encode(std::string_view bytes);

// Decodes `text`; whitespace is skipped and the padding may be left out. Anything else outside
// the alphabet, or a length no encoder makes, throws std::invalid_argument.
std::string base64_decode(std::string_view text);

}  // namespace gen3d::io
