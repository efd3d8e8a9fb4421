#include "app/cli/progress_display.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <fmt/format.h>
#include <spdlog/sinks/sink.h>

#include "pipeline/error.h"
#include "pipeline/log.h"
#include "pipeline/progress_json.h"

namespace gen3d::app::cli {

namespace {

bool g_status_line = false;

void write_stderr(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stderr);
  std::fflush(stderr);
}

// Columns of the terminal on stderr (80 when it does not say).
std::size_t terminal_width() {
  winsize ws{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

// At most `width` bytes of `s`, not cutting a UTF-8 sequence (node ids and labels are ASCII; file
// names in them may not be).
std::string cut(const std::string& s, std::size_t width) {
  if (s.size() <= width) return s;
  std::size_t end = width;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return s.substr(0, end);
}

class StatusLineSink final : public spdlog::sinks::sink {
 public:
  StatusLineSink(spdlog::sink_ptr inner, StatusLine& line)
      : inner_(std::move(inner)), line_(line) {}
  void log(const spdlog::details::log_msg& msg) override {
    line_.print_above([&] {
      inner_->log(msg);
      inner_->flush();
    });
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    inner_->set_formatter(std::move(formatter));
  }

 private:
  spdlog::sink_ptr inner_;
  StatusLine& line_;
};

}  // namespace

ProgressMode parse_progress_mode(const std::string& name) {
  if (name == "auto") return ProgressMode::kAuto;
  if (name == "none") return ProgressMode::kNone;
  if (name == "json") return ProgressMode::kJson;
  throw pipeline::ConfigError("--progress " + name + ": expected auto, none or json");
}

// ---- StatusLine --------------------------------------------------------------------------------

StatusLine& StatusLine::on_stderr() {
  static StatusLine line;
  return line;
}

void StatusLine::show(const std::string& text) {
  std::lock_guard lock(mutex_);
  if (text == text_) return;
  const bool was_shown = !text_.empty();
  text_ = text;
  if (!text_.empty())
    draw_locked();
  else if (was_shown)
    erase_locked();
}

void StatusLine::erase_locked() {
  write_stderr("\r\033[K");
}

void StatusLine::draw_locked() {
  // One column short of the width: a line that fills the last column wraps on some terminals.
  write_stderr("\r\033[K" + cut(text_, terminal_width() - 1));
}

spdlog::sink_ptr status_line_log_sink(spdlog::sink_ptr inner, StatusLine& line) {
  return std::make_shared<StatusLineSink>(std::move(inner), line);
}

// ---- ProgressOutput ----------------------------------------------------------------------------

bool status_line_enabled() {
  return g_status_line;
}

ProgressOutput::ProgressOutput(ProgressMode mode, bool quiet, int verbosity) : mode_(mode) {
  const int level = quiet ? -1 : verbosity;
  if (mode == ProgressMode::kJson) {
    // Every event, log messages included, as one JSON line; nothing else on stderr.
    pipeline::init_logging(level, nullptr);
    json_ = progress::hub().subscribe([](const progress::Event& e) {
      write_stderr(pipeline::progress_event_json(e).dump(
                       -1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
                   "\n");
    });
    return;
  }
  status_line_ = mode == ProgressMode::kAuto && !quiet && isatty(STDERR_FILENO);
  g_status_line = status_line_;
  if (status_line_)
    pipeline::init_logging(
        level, status_line_log_sink(pipeline::stderr_log_sink(), StatusLine::on_stderr()));
  else
    pipeline::init_logging(level);
}

ProgressOutput::~ProgressOutput() {
  g_status_line = false;
}

// ---- RunStatus ---------------------------------------------------------------------------------

RunStatus::RunStatus(StatusLine& line) : line_(line) {
  subscription_ = progress::hub().subscribe([this](const progress::Event& e) { on_event(e); });
  timer_ = std::thread([this] { tick(); });
}

RunStatus::~RunStatus() {
  subscription_.reset();  // no callback runs once this returns
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  timer_.join();
  line_.clear();
}

void RunStatus::on_event(const progress::Event& e) {
  if (e.kind == progress::EventKind::kLog) return;  // the log sink prints those
  std::lock_guard lock(mutex_);
  const bool nodes_changed = status_.add(e);
  // Steps may come fast (weights are counted per tensor): the timer draws those in between.
  if (nodes_changed || e.t - last_draw_ >= 0.1) draw_locked(e.t);
}

void RunStatus::draw_locked(double now) {
  line_.show(status_.text(now));
  last_draw_ = now;
}

void RunStatus::tick() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::milliseconds(250));
    if (!stop_ && status_.running()) draw_locked(progress::hub().now());
  }
}

}  // namespace gen3d::app::cli
