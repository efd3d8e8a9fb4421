#include "pipeline/profiler.h"

#include <tbb/enumerable_thread_specific.h>
#include <algorithm>
#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

namespace gen3d::pipeline {

struct Profiler::Buffers {
  struct Local {
    std::vector<SpanRecord> spans;
    std::vector<CounterRecord> counters;
  };
  tbb::enumerable_thread_specific<Local> per_thread;
  std::mutex tracks_mutex;
  std::vector<std::string> tracks;  // track kFirstTrack + i is named tracks[i]
};

Profiler::Profiler()
    : origin_(std::chrono::steady_clock::now()),
      main_thread_(thread_index()),
      buffers_(std::make_unique<Buffers>()) {}

Profiler::~Profiler() = default;

int Profiler::thread_index() {
  static std::atomic<int> next{0};
  thread_local const int index = next.fetch_add(1);
  return index;
}

int64_t Profiler::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              origin_)
      .count();
}

void Profiler::record(SpanRecord&& span) {
  buffers_->per_thread.local().spans.push_back(std::move(span));
}

int Profiler::track(std::string_view name) {
  std::lock_guard lock(buffers_->tracks_mutex);
  auto& tracks = buffers_->tracks;
  const auto it = std::find(tracks.begin(), tracks.end(), name);
  if (it != tracks.end()) return kFirstTrack + static_cast<int>(it - tracks.begin());
  tracks.emplace_back(name);
  return kFirstTrack + static_cast<int>(tracks.size()) - 1;
}

void Profiler::add_span(int track, std::string name, std::string category, std::string node,
                        std::chrono::steady_clock::time_point start,
                        std::chrono::steady_clock::time_point end) {
  using std::chrono::nanoseconds;
  const int64_t start_ns = std::chrono::duration_cast<nanoseconds>(start - origin_).count();
  const int64_t dur_ns = std::chrono::duration_cast<nanoseconds>(end - start).count();
  record(SpanRecord{std::move(name), std::move(category), std::move(node), track, start_ns,
                    std::max<int64_t>(dur_ns, 0)});
}

void Profiler::count(std::string_view name, double delta) {
  buffers_->per_thread.local().counters.push_back(
      CounterRecord{std::string(name), delta, false, thread_index(), now_ns()});
}

void Profiler::gauge(std::string_view name, double value) {
  buffers_->per_thread.local().counters.push_back(
      CounterRecord{std::string(name), value, true, thread_index(), now_ns()});
}

Profiler::Span::Span(Profiler* p, std::string name, std::string category, std::string node)
    : profiler_(p),
      name_(std::move(name)),
      category_(std::move(category)),
      node_(std::move(node)),
      start_ns_(p ? p->now_ns() : 0) {}

Profiler::Span::Span(Span&& other) noexcept {
  *this = std::move(other);
}

Profiler::Span& Profiler::Span::operator=(Span&& other) noexcept {
  if (this != &other) {
    end();
    profiler_ = std::exchange(other.profiler_, nullptr);
    name_ = std::move(other.name_);
    category_ = std::move(other.category_);
    node_ = std::move(other.node_);
    start_ns_ = other.start_ns_;
  }
  return *this;
}

Profiler::Span::~Span() {
  end();
}

void Profiler::Span::end() {
  if (!profiler_) return;
  Profiler* p = std::exchange(profiler_, nullptr);
  const int64_t end_ns = p->now_ns();
  p->record(SpanRecord{std::move(name_), std::move(category_), std::move(node_), thread_index(),
                       start_ns_, end_ns - start_ns_});
}

std::vector<SpanRecord> Profiler::spans() const {
  std::vector<SpanRecord> out;
  for (const auto& local : buffers_->per_thread)
    out.insert(out.end(), local.spans.begin(), local.spans.end());
  // Parents before children: by start, then longer first, so nesting reads top-down.
  std::sort(out.begin(), out.end(), [](const SpanRecord& a, const SpanRecord& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    return a.dur_ns > b.dur_ns;
  });
  return out;
}

std::vector<CounterRecord> Profiler::counters() const {
  std::vector<CounterRecord> out;
  for (const auto& local : buffers_->per_thread)
    out.insert(out.end(), local.counters.begin(), local.counters.end());
  std::stable_sort(out.begin(), out.end(), [](const CounterRecord& a, const CounterRecord& b) {
    return a.ts_ns < b.ts_ns;
  });
  return out;
}

std::map<std::string, double> Profiler::counter_totals() const {
  std::map<std::string, double> totals;
  for (const CounterRecord& c : counters()) {
    if (c.gauge)
      totals[c.name] = c.value;
    else
      totals[c.name] += c.value;
  }
  return totals;
}

std::string Profiler::chrome_trace_json() const {
  using nlohmann::json;
  json events = json::array();
  std::set<int> threads;
  const auto us = [](int64_t ns) { return static_cast<double>(ns) / 1000.0; };
  for (const SpanRecord& s : spans()) {
    threads.insert(s.thread);
    json e = {{"name", s.name},  {"cat", s.category},    {"ph", "X"},          {"pid", 1},
              {"tid", s.thread}, {"ts", us(s.start_ns)}, {"dur", us(s.dur_ns)}};
    if (!s.node.empty()) e["args"] = {{"node", s.node}};
    events.push_back(std::move(e));
  }
  std::map<std::string, double> running;
  for (const CounterRecord& c : counters()) {
    double& v = running[c.name];
    v = c.gauge ? c.value : v + c.value;
    events.push_back({{"name", c.name},
                      {"ph", "C"},
                      {"pid", 1},
                      {"tid", c.thread},
                      {"ts", us(c.ts_ns)},
                      {"args", {{"value", v}}}});
  }
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "gen3d"}}}});
  std::vector<std::string> tracks;
  {
    std::lock_guard lock(buffers_->tracks_mutex);
    tracks = buffers_->tracks;
  }
  for (int t : threads) {
    if (t >= kFirstTrack) {  // a track: its name, sorted after the threads
      const auto i = static_cast<std::size_t>(t - kFirstTrack);
      const std::string name = i < tracks.size() ? tracks[i] : "track " + std::to_string(t);
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", 1},
                        {"tid", t},
                        {"args", {{"name", name}}}});
      events.push_back({{"name", "thread_sort_index"},
                        {"ph", "M"},
                        {"pid", 1},
                        {"tid", t},
                        {"args", {{"sort_index", t}}}});
      continue;
    }
    const std::string name = t == main_thread_ ? "main" : "worker " + std::to_string(t);
    events.push_back(
        {{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", t}, {"args", {{"name", name}}}});
  }
  return json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace gen3d::pipeline
