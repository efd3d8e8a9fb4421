#include "pipeline/progress_json.h"

#include <cmath>
#include <string>

namespace gen3d::pipeline {

namespace {

// Times to the microsecond: enough for any display, and short lines.
double rounded(double seconds) {
  return std::round(seconds * 1e6) / 1e6;
}

}  // namespace

nlohmann::ordered_json progress_event_json(const progress::Event& e) {
  using progress::EventKind;
  nlohmann::ordered_json j;
  if (e.kind == EventKind::kLog) {
    j["event"] = e.level == progress::Level::kWarning ? "warning"
                 : e.level == progress::Level::kError ? "error"
                                                      : "log";
  } else {
    j["event"] = std::string(progress::kind_name(e.kind));
  }
  j["t"] = rounded(e.t);
  if (!e.run.empty()) j["run"] = e.run;
  if (!e.node.empty()) j["node"] = e.node;
  switch (e.kind) {
    case EventKind::kRunStarted:
      j["pipeline"] = e.stage;
      j["nodes"] = e.n;
      break;
    case EventKind::kRunFinished:
      j["pipeline"] = e.stage;
      j["status"] = e.status;
      j["seconds"] = rounded(e.seconds);
      break;
    case EventKind::kNodeStarted:
      j["stage"] = e.stage;
      break;
    case EventKind::kNodeFinished:
      j["stage"] = e.stage;
      j["status"] = e.status;
      j["seconds"] = rounded(e.seconds);
      j["finished"] = e.i;
      j["total"] = e.n;
      if (!e.message.empty()) j["message"] = e.message;
      break;
    case EventKind::kStep:
      j["label"] = e.label;
      j["i"] = e.i;
      j["n"] = e.n;
      if (e.eta_s >= 0) j["eta_s"] = rounded(e.eta_s);
      break;
    case EventKind::kLog:
      if (e.level != progress::Level::kWarning && e.level != progress::Level::kError)
        j["level"] = std::string(progress::level_name(e.level));
      j["message"] = e.message;
      break;
  }
  return j;
}

}  // namespace gen3d::pipeline
