#include "pipeline/progress_status.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace gen3d::pipeline {

std::string format_seconds(double s) {
  if (s < 59.95) return fmt::format("{:.1f} s", s);
  const auto whole = static_cast<long long>(std::lround(s));
  if (whole < 3600) return fmt::format("{}m{:02}s", whole / 60, whole % 60);
  return fmt::format("{}h{:02}m", whole / 3600, whole / 60 % 60);
}

bool ProgressStatus::add(const progress::Event& e) {
  using progress::EventKind;
  if (start_ < 0) start_ = e.t;
  switch (e.kind) {
    case EventKind::kRunStarted:
      start_ = e.t;
      ended_ = false;
      finished_ = 0;
      total_ = e.n;
      running_.clear();
      last_finished_.clear();
      return true;
    case EventKind::kRunFinished:
      ended_ = true;
      return false;
    case EventKind::kNodeStarted:
      running_.push_back(Running{e.node, {}});
      total_ = std::max(total_, e.n);
      return true;
    case EventKind::kNodeFinished:
      std::erase_if(running_, [&](const Running& r) { return r.node == e.node; });
      finished_ = std::max(finished_, e.i);
      total_ = std::max(total_, e.n);
      last_finished_ = e.node + " " + e.status;
      return true;
    case EventKind::kStep: {
      auto r = std::find_if(running_.begin(), running_.end(),
                            [&](const Running& x) { return x.node == e.node; });
      if (r == running_.end()) {
        if (!e.node.empty() || e.i >= e.n) return false;  // a node that is not running (now)
        running_.push_back(Running{{}, {}});
        r = running_.end() - 1;
      }
      auto c = std::find_if(r->counters.begin(), r->counters.end(),
                            [&](const Counter& x) { return x.label == e.label; });
      if (e.i >= e.n) {
        if (c != r->counters.end()) r->counters.erase(c);
      } else if (c == r->counters.end()) {
        r->counters.push_back(Counter{e.label, e.i, e.n, e.eta_s, e.t});
      } else {
        *c = Counter{e.label, e.i, e.n, e.eta_s, e.t};
      }
      if (r->node.empty() && r->counters.empty()) running_.erase(r);
      return false;
    }
    case EventKind::kLog:
      return false;
  }
  return false;
}

std::string ProgressStatus::text(double now) const {
  std::string s = fmt::format("[{}/{}] {}", finished_, total_,
                              format_seconds(std::max(0.0, now - std::max(0.0, start_))));
  if (running_.empty() && !last_finished_.empty()) s += " | " + last_finished_;
  for (const Running& r : running_) {
    s += " | ";
    s += r.node.empty() ? "..." : r.node;
    for (std::size_t k = 0; k < r.counters.size(); ++k) {
      const Counter& c = r.counters[k];
      s += fmt::format("{} {} {}/{}", k == 0 ? ":" : ",", c.label, c.i, c.n);
      if (c.eta_s >= 0)
        s += fmt::format(" ({} left)", format_seconds(std::max(0.0, c.eta_s - (now - c.at))));
    }
  }
  return s;
}

}  // namespace gen3d::pipeline
