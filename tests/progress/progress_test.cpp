// The progress event source: delivery order, subscribing and unsubscribing (also from inside a
// callback and while other threads emit), node scopes, step counters with their ETA and
// throttling, and many threads emitting at once.

#include "progress/progress.h"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace gen3d::progress {
namespace {

// Collects what the process-wide hub delivers while it lives.
struct Recorder {
  std::mutex mutex;
  std::vector<Event> events;
  Hub::Subscription subscription;
  Recorder() {
    subscription = hub().subscribe([this](const Event& e) {
      std::lock_guard lock(mutex);
      events.push_back(e);
    });
  }
  std::vector<Event> steps() {
    std::lock_guard lock(mutex);
    std::vector<Event> out;
    for (const Event& e : events)
      if (e.kind == EventKind::kStep) out.push_back(e);
    return out;
  }
};

Event log_event(std::string message) {
  Event e;
  e.kind = EventKind::kLog;
  e.message = std::move(message);
  return e;
}

TEST(ProgressHub, ActiveOnlyWhileSomeoneListens) {
  Hub h;
  EXPECT_FALSE(h.active());
  int seen = 0;
  {
    auto s = h.subscribe([&](const Event&) { ++seen; });
    EXPECT_TRUE(h.active());
    h.emit(log_event("one"));
  }
  EXPECT_FALSE(h.active());
  h.emit(log_event("nobody hears this"));
  EXPECT_EQ(seen, 1);
}

TEST(ProgressHub, EverySubscriberSeesEveryEventInEmissionOrder) {
  Hub h;
  std::vector<std::string> a, b;
  std::vector<double> times;
  auto sa = h.subscribe([&](const Event& e) {
    a.push_back(e.message);
    times.push_back(e.t);
  });
  auto sb = h.subscribe([&](const Event& e) { b.push_back(e.message); });
  std::vector<std::string> sent;
  for (int i = 0; i < 100; ++i) {
    sent.push_back(std::to_string(i));
    h.emit(log_event(sent.back()));
  }
  EXPECT_EQ(a, sent);
  EXPECT_EQ(b, sent);
  for (std::size_t i = 1; i < times.size(); ++i) EXPECT_LE(times[i - 1], times[i]);
  EXPECT_GE(times.front(), 0.0);
}

TEST(ProgressHub, UnsubscribingStopsDeliveryAlsoFromInsideACallback) {
  Hub h;
  int first = 0, second = 0;
  Hub::Subscription s1;
  s1 = h.subscribe([&](const Event&) {
    ++first;
    s1.reset();  // stop after the first event, from inside the callback
  });
  auto s2 = h.subscribe([&](const Event&) { ++second; });
  for (int i = 0; i < 3; ++i) h.emit(log_event("x"));
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 3);
  EXPECT_TRUE(h.active());
  s2.reset();
  EXPECT_FALSE(h.active());
}

TEST(ProgressHub, EventsEmittedFromACallbackAreDroppedNotLooped) {
  Hub h;
  int calls = 0;
  auto s = h.subscribe([&](const Event&) {
    ++calls;
    h.emit(log_event("echo"));  // e.g. a display that logs
  });
  h.emit(log_event("x"));
  EXPECT_EQ(calls, 1);
}

TEST(ProgressHub, AThrowingSubscriberDoesNotStopTheOthers) {
  Hub h;
  int seen = 0;
  auto bad = h.subscribe([](const Event&) { throw std::runtime_error("display broke"); });
  auto good = h.subscribe([&](const Event&) { ++seen; });
  EXPECT_NO_THROW(h.emit(log_event("x")));
  EXPECT_EQ(seen, 1);
}

TEST(ProgressHub, ConcurrentEmittersAreDeliveredOneAtATimeInEachThreadsOrder) {
  Hub h;
  constexpr int kThreads = 8, kEach = 2000;
  // Unguarded on purpose: delivery is one event at a time, so the subscriber needs no lock.
  std::vector<std::pair<int, std::int64_t>> seen;
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  auto s = h.subscribe([&](const Event& e) {
    if (inside.fetch_add(1) != 0) overlapped = true;
    seen.emplace_back(std::stoi(e.node), e.i);
    std::this_thread::yield();  // widens the window another delivery would have to overlap
    inside.fetch_sub(1);
  });
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const std::string node = std::to_string(t);
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kEach; ++i) {
        Event e;
        e.node = node;
        e.i = i;
        h.emit(std::move(e));
      }
    });
  // Subscribers come and go while the others emit.
  std::thread churn([&] {
    while (!go.load()) std::this_thread::yield();
    for (int k = 0; k < 200; ++k) {
      auto extra = h.subscribe([](const Event&) {});
      std::this_thread::yield();
    }
  });
  go = true;
  for (auto& t : threads) t.join();
  churn.join();
  EXPECT_FALSE(overlapped.load());
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kThreads * kEach));
  std::vector<std::int64_t> next(kThreads, 0);
  for (const auto& [t, i] : seen) ASSERT_EQ(i, next[static_cast<std::size_t>(t)]++) << t;
}

TEST(ProgressNodeScope, NestsAndRestores) {
  EXPECT_EQ(current_node(), "");
  const std::string job = "job1", outer = "paint", inner = "uv";
  {
    NodeScope a(job, outer);
    EXPECT_EQ(current_run(), "job1");
    EXPECT_EQ(current_node(), "paint");
    {
      NodeScope b(job, inner);  // another node's task run while this thread waits
      EXPECT_EQ(current_node(), "uv");
    }
    EXPECT_EQ(current_node(), "paint");
    std::string elsewhere;
    std::thread([&] { elsewhere = current_node() + "-"; }).join();
    EXPECT_EQ(elsewhere, "-");  // scopes are per thread
  }
  EXPECT_EQ(current_node(), "");
  EXPECT_EQ(current_run(), "");
}

TEST(ProgressSteps, ReportsEachStepWithTheNodeAndAnEta) {
  Recorder rec;
  const std::string run, node = "denoise";
  std::optional<NodeScope> scope;
  scope.emplace(run, node);
  Steps steps("denoise step", 4);
  scope.reset();
  // Steps made inside the node keep naming it, on other threads too.
  std::thread([&] {
    for (int i = 1; i <= 4; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      steps.done(i);
    }
  }).join();
  const auto s = rec.steps();
  ASSERT_EQ(s.size(), 5u);
  for (int i = 0; i <= 4; ++i) {
    EXPECT_EQ(s[static_cast<std::size_t>(i)].i, i);
    EXPECT_EQ(s[static_cast<std::size_t>(i)].n, 4);
    EXPECT_EQ(s[static_cast<std::size_t>(i)].label, "denoise step");
    EXPECT_EQ(s[static_cast<std::size_t>(i)].node, "denoise");
  }
  EXPECT_LT(s[0].eta_s, 0.0);  // nothing timed yet
  // Mean step time so far times the steps left: about 3, 2, 1 and 0 steps of >= 2 ms.
  EXPECT_GT(s[1].eta_s, 0.003);
  EXPECT_LT(s[3].eta_s, s[1].eta_s);
  EXPECT_EQ(s[4].eta_s, 0.0);
}

TEST(ProgressSteps, ThrottledCountersReportTheFirstAndTheLast) {
  Recorder rec;
  Steps steps("loading weights", 1000, 3600.0);
  for (int i = 1; i <= 1000; ++i) steps.done(i);
  const auto s = rec.steps();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].i, 0);
  EXPECT_EQ(s[1].i, 1000);
}

TEST(ProgressSteps, CountQuietlyUntilSomeoneListens) {
  Steps steps("paint step", 10);  // nobody listens yet: no event, no clock
  steps.next();
  steps.next();
  EXPECT_EQ(steps.count(), 2);
  Recorder rec;
  steps.next();
  steps.next();
  const auto s = rec.steps();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].i, 3);
  EXPECT_LT(s[0].eta_s, 0.0);  // timing starts with the first step heard
  EXPECT_EQ(s[1].i, 4);
  EXPECT_GE(s[1].eta_s, 0.0);
}

}  // namespace
}  // namespace gen3d::progress
