// Pipeline configs from arbitrary bytes: parse, validate against every real stage contract.
#include <cstddef>
#include <cstdint>

#include "pipeline/config.h"
#include "pipeline/error.h"
#include "pipeline/graph.h"
#include "stages/register.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const gen3d::pipeline::Registry registry = [] {
    gen3d::pipeline::Registry r;
    gen3d::stages::register_all_stages(r);
    return r;
  }();
  const auto doc = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;
  try {
    auto cfg = gen3d::pipeline::parse_config(doc, "fuzz");
    gen3d::pipeline::apply_overrides(cfg, {"texture_size=64", "uv.gutter=2"});
    gen3d::pipeline::build_graph(cfg, registry);
  } catch (const gen3d::pipeline::ConfigError&) {
  }
  return 0;
}
