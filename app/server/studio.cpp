#include "app/server/studio.h"

namespace gen3d::app::server {

namespace {

// cpp-httplib takes a route as a regular expression: the URL's dots match themselves only.
std::string exact_route(const std::string& url) {
  std::string pattern;
  for (const char c : url) {
    if (c == '.' || c == '+' || c == '(' || c == ')' || c == '[' || c == ']') pattern += '\\';
    pattern += c;
  }
  return pattern;
}

}  // namespace

bool is_studio_path(const std::string& path) {
  for (const StudioAsset& a : studio_assets())
    if (path == a.url) return true;
  return false;
}

void add_studio_routes(httplib::Server& http) {
  for (const StudioAsset& a : studio_assets()) {
    http.Get(exact_route(a.url), [&a](const httplib::Request&, httplib::Response& res) {
      // The page's code changes with the binary: a browser asks again rather than keep an old one.
      res.set_header("Cache-Control", "no-cache");
      res.set_content(reinterpret_cast<const char*>(a.data), a.size, a.content_type);
    });
  }
}

}  // namespace gen3d::app::server
