#include "pipeline/log.h"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "progress/progress.h"

namespace gen3d::pipeline {

namespace {

progress::Level to_progress_level(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
      return progress::Level::kTrace;
    case spdlog::level::debug:
      return progress::Level::kDebug;
    case spdlog::level::info:
      return progress::Level::kInfo;
    case spdlog::level::warn:
      return progress::Level::kWarning;
    default:
      return progress::Level::kError;
  }
}

// Log messages as progress events: the message text alone (no time stamp or level prefix), with
// the run and node of the thread that logged it. The hub orders and serializes delivery, so the
// sink needs no lock of its own.
class EventSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    progress::Hub& hub = progress::hub();
    if (!hub.active()) return;
    progress::Event e;
    e.kind = progress::EventKind::kLog;
    e.level = to_progress_level(msg.level);
    e.message.assign(msg.payload.data(), msg.payload.size());
    e.run = progress::current_run();
    e.node = progress::current_node();
    hub.emit(std::move(e));
  }
  void flush_() override {}
};

}  // namespace

spdlog::sink_ptr stderr_log_sink() {
  return std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
}

void init_logging(int verbosity, spdlog::sink_ptr console) {
  std::vector<spdlog::sink_ptr> sinks;
  if (console) sinks.push_back(std::move(console));
  sinks.push_back(std::make_shared<EventSink>());
  auto logger = std::make_shared<spdlog::logger>("gen3d", sinks.begin(), sinks.end());
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
