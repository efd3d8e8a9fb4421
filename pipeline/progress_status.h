#pragma once
// The state of a run as its progress events tell it, in one line of text: nodes finished of all,
// the time since the start, the running nodes and, inside them, each unfinished step counter with
// the time it has left. The terminal status line shows it; it holds no terminal and no thread.
//
//   [5/17] 12.3 s | paint: paint step 12/50 (38.0 s left) | uv
//   [17/17] 40.2 s | save done

#include <cstdint>
#include <string>
#include <vector>

#include "progress/progress.h"

namespace gen3d::pipeline {

class ProgressStatus {
 public:
  // Folds in one event; returns whether the running nodes changed (worth showing at once).
  bool add(const progress::Event& e);
  // The line at hub time `now` (the clock and each step's time left move on between events).
  std::string text(double now) const;
  // Whether a run is going on (started, not finished).
  bool running() const { return start_ >= 0 && !ended_; }

 private:
  struct Counter {
    std::string label;
    std::int64_t i = 0, n = 0;
    double eta_s = -1.0;  // as of `at`
    double at = 0.0;
  };
  struct Running {
    std::string node;               // empty: steps reported outside any node
    std::vector<Counter> counters;  // unfinished ones, in the order they began
  };
  std::vector<Running> running_;  // in the order they started
  std::int64_t finished_ = 0, total_ = 0;
  std::string last_finished_;  // "save done"
  double start_ = -1.0;        // hub time of the run's start (or of the first event)
  bool ended_ = false;
};

// "12.3 s", "2m05s", "1h02m".
std::string format_seconds(double seconds);

}  // namespace gen3d::pipeline
