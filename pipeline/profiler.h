#pragma once
// Profiler: spans and counters recorded into per-thread buffers, exported as a Chrome trace.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gen3d::pipeline {

struct SpanRecord {
  std::string name;      // "render_normals" or "view 3"
  std::string category;  // "node" for a node run, "stage" for sub-spans, ...
  std::string node;      // owning node id (empty for spans outside a node)
  int thread = 0;        // small dense thread index (Profiler::thread_index()), or a track's
  int64_t start_ns = 0;  // since the profiler's origin
  int64_t dur_ns = 0;
};

struct CounterRecord {
  std::string name;
  double value = 0;  // a delta for counters, the new value for gauges
  bool gauge = false;
  int thread = 0;
  int64_t ts_ns = 0;
};

class Profiler {
 public:
  Profiler();
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // RAII span: records [construction, destruction) on the calling thread. Spans on one thread nest
  // by construction (they live on the stack), which keeps the Chrome trace well formed.
  class Span {
   public:
    Span() = default;
    Span(Profiler* p, std::string name, std::string category, std::string node);
    Span(Span&& other) noexcept;
    Span& operator=(Span&& other) noexcept;
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;
    ~Span();
    void end();  // records now instead of at destruction

   private:
    Profiler* profiler_ = nullptr;
    std::string name_, category_, node_;
    int64_t start_ns_ = 0;
  };

  Span span(std::string name, std::string category = "stage", std::string node = {}) {
    return Span(this, std::move(name), std::move(category), std::move(node));
  }
  void count(std::string_view name, double delta = 1.0);  // adds to a running total
  void gauge(std::string_view name, double value);        // sets an absolute level

  int64_t now_ns() const;
  std::chrono::steady_clock::time_point origin() const { return origin_; }

  // A track of its own for spans timed elsewhere (a GPU's timeline, by its events), named `name`
  // ("cuda:0"): the same name gives the same track. Its index goes in SpanRecord::thread, apart
  // from every real thread's, and the Chrome trace shows it as a thread of that name, after the
  // real ones.
  int track(std::string_view name);
  // Records a span timed elsewhere, [start, end) on steady_clock (this profiler's clock), on
  // `track` (from track()). Safe from any thread.
  void add_span(int track, std::string name, std::string category, std::string node,
                std::chrono::steady_clock::time_point start,
                std::chrono::steady_clock::time_point end);
  // Whether model stages put their device's own timeline on a track (stages/shared.h:
  // DeviceTrace). Timing a GPU's every operation with events costs a little, so it is off unless
  // a trace is written (the CLI's --trace).
  void set_device_timelines(bool on) { device_timelines_ = on; }
  bool device_timelines() const { return device_timelines_; }

  // Merged views over every thread's buffer; call when recording threads are quiet.
  std::vector<SpanRecord> spans() const;
  std::vector<CounterRecord> counters() const;
  std::map<std::string, double> counter_totals() const;  // final value of each counter/gauge

  // Chrome trace event JSON (object form): X events for spans, C events for counters, M events
  // naming threads. Opens in Perfetto UI and chrome://tracing.
  std::string chrome_trace_json() const;

  // Small dense index of the calling thread, stable for the process lifetime.
  static int thread_index();

 private:
  struct Buffers;
  std::chrono::steady_clock::time_point origin_;
  int main_thread_;
  std::unique_ptr<Buffers> buffers_;
  bool device_timelines_ = false;
  // Track indices start here, far above any real thread's.
  static constexpr int kFirstTrack = 1 << 20;
  void record(SpanRecord&& span);
};

}  // namespace gen3d::pipeline
