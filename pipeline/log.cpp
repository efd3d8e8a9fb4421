#include "pipeline/log.h"

#include <cstdlib>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace gen3d::pipeline {

void init_logging(int verbosity) {
  auto logger = spdlog::stderr_color_mt("gen3d");
  logger->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  spdlog::set_default_logger(logger);
  spdlog::level::level_enum level = spdlog::level::info;
  if (verbosity < 0)
    level = spdlog::level::warn;
  else if (verbosity == 1)
    level = spdlog::level::debug;
  else if (verbosity >= 2)
    level = spdlog::level::trace;
  if (const char* env = std::getenv("GEN3D_LOG_LEVEL"); env && *env) {
    const auto parsed = spdlog::level::from_str(env);
    // from_str maps unknown words to "off"; only accept it when asked for literally.
    if (parsed != spdlog::level::off || std::string(env) == "off") level = parsed;
  }
  spdlog::set_level(level);
}

}  // namespace gen3d::pipeline
