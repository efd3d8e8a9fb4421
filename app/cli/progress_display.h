#pragma once
// How the command line shows progress events (progress/progress.h): a status line on the terminal
// that names the running nodes and their steps, or one JSON object per event (`--progress json`).
// Log lines and the status line share stderr through one lock: a log line clears the status
// line, is printed, and the status line is drawn again under it.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <spdlog/common.h>

#include "pipeline/progress_status.h"
#include "progress/progress.h"

namespace gen3d::app::cli {

// --progress: auto (a status line when stderr is a terminal and not -q), none, json.
enum class ProgressMode { kAuto, kNone, kJson };
ProgressMode parse_progress_mode(const std::string& name);  // throws ConfigError

// The last line of the terminal on stderr, kept below everything printed through print_above.
class StatusLine {
 public:
  static StatusLine& on_stderr();

  // Shows `text` (cut to the terminal's width, so it never wraps); empty: clears it.
  void show(const std::string& text);
  void clear() { show({}); }
  // Writes through `print` (whole lines on stderr) with the status line out of the way, then
  // draws it again below them.
  template <class Print>
  void print_above(Print&& print) {
    std::lock_guard lock(mutex_);
    if (!text_.empty()) erase_locked();
    print();
    if (!text_.empty()) draw_locked();
  }

 private:
  StatusLine() = default;
  void erase_locked();
  void draw_locked();

  std::mutex mutex_;
  std::string text_;  // shown now
};

// A log sink that prints through `inner` with the status line out of the way.
spdlog::sink_ptr status_line_log_sink(spdlog::sink_ptr inner, StatusLine& line);

// Sets up how this process shows logs and progress, from the global options: the logger (see
// pipeline/log.h) and, for json, the subscriber that prints every event. Keep the returned object
// for the life of the command.
class ProgressOutput {
 public:
  ProgressOutput(ProgressMode mode, bool quiet, int verbosity);
  ~ProgressOutput();
  ProgressOutput(const ProgressOutput&) = delete;
  ProgressOutput& operator=(const ProgressOutput&) = delete;

  // Whether runs draw a status line (auto, not quiet, stderr a terminal).
  bool status_line() const { return status_line_; }
  // Whether stderr carries JSON events only: no tables or other text there.
  bool json() const { return mode_ == ProgressMode::kJson; }

 private:
  ProgressMode mode_;
  bool status_line_ = false;
  progress::Hub::Subscription json_;
};

// Whether the current command may draw a status line (set by ProgressOutput).
bool status_line_enabled();

// While it lives: the status line shows the run's progress (pipeline/progress_status.h), kept
// current by the progress events and by a timer (the clock and the time left move between
// events). Cleared when it ends.
class RunStatus {
 public:
  explicit RunStatus(StatusLine& line);
  ~RunStatus();
  RunStatus(const RunStatus&) = delete;
  RunStatus& operator=(const RunStatus&) = delete;

 private:
  void on_event(const progress::Event& e);
  void draw_locked(double now);
  void tick();

  StatusLine& line_;
  std::mutex mutex_;
  pipeline::ProgressStatus status_;
  double last_draw_ = -1e30;
  bool stop_ = false;
  std::condition_variable wake_;
  std::thread timer_;
  progress::Hub::Subscription subscription_;
};

}  // namespace gen3d::app::cli
