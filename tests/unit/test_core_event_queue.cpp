#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "core/event_queue.h"

namespace racksim::sim {
namespace {

SimTime ps(int64_t p) { return SimTime::from_ps(p); }

TEST(EventQueue, OrdersByTimeThenInsertion) {
  EventQueue q;
  std::vector<std::string> log;
  auto rec = [&](std::string name) {
    return [&q, &log, name] { log.push_back(name + "@" + std::to_string(q.now().ps)); };
  };
  q.schedule(ps(30), rec("c"));
  q.schedule(ps(10), rec("a1"));
  q.schedule(ps(20), rec("b"));
  q.schedule(ps(10), rec("a2"));
  q.schedule(ps(10), rec("a3"));
  EXPECT_EQ(q.pending(), 5u);
  q.run();
  EXPECT_EQ(log, (std::vector<std::string>{"a1@10", "a2@10", "a3@10", "b@20", "c@30"}));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.now().ps, 30);
  EXPECT_EQ(q.events_processed(), 5u);
  EXPECT_FALSE(q.step());
}

TEST(EventQueue, ManySameTimeEventsRunFifo) {
  EventQueue q;
  std::vector<int> order;
  for (int i = 0; i < 1000; ++i) q.schedule(ps(7), [&order, i] { order.push_back(i); });
  q.run();
  ASSERT_EQ(order.size(), 1000u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(order[i], i);
}

TEST(EventQueue, CancelledEventsNeverRun) {
  EventQueue q;
  std::vector<int> ran;
  auto h1 = q.schedule(ps(10), [&] { ran.push_back(1); });
  auto h2 = q.schedule(ps(20), [&] { ran.push_back(2); });
  auto h3 = q.schedule(ps(30), [&] { ran.push_back(3); });
  EXPECT_TRUE(h1 && h2 && h3);
  EXPECT_TRUE(q.cancel(h2));
  EXPECT_FALSE(q.cancel(h2));  // already cancelled
  EXPECT_FALSE(q.cancel(EventQueue::Handle{}));
  EXPECT_FALSE(EventQueue::Handle{});
  EXPECT_EQ(q.pending(), 2u);
  EXPECT_TRUE(q.step());
  EXPECT_FALSE(q.cancel(h1));  // already ran
  q.run();
  EXPECT_EQ(ran, (std::vector<int>{1, 3}));
  EXPECT_EQ(q.events_processed(), 2u);
  EXPECT_EQ(q.now().ps, 30);
}

TEST(EventQueue, CancelEverythingLeavesEmpty) {
  EventQueue q;
  auto h = q.schedule(ps(5), [] { FAIL() << "cancelled event ran"; });
  EXPECT_FALSE(q.empty());
  EXPECT_TRUE(q.cancel(h));
  EXPECT_TRUE(q.empty());
  EXPECT_FALSE(q.step());
  EXPECT_EQ(q.now().ps, 0);  // a cancelled event does not advance time
}

TEST(EventQueue, HandlerSchedulingAtNowRunsAfterQueuedSameTimeEvents) {
  EventQueue q;
  std::vector<std::string> log;
  q.schedule(ps(5), [&] {
    log.push_back("A");
    q.schedule(q.now(), [&] { log.push_back("C"); });
    q.schedule_after(ps(0), [&] { log.push_back("D"); });
  });
  q.schedule(ps(5), [&] { log.push_back("B"); });
  q.schedule(ps(6), [&] { log.push_back("E"); });
  q.run();
  EXPECT_EQ(log, (std::vector<std::string>{"A", "B", "C", "D", "E"}));
}

TEST(EventQueue, HandlerCanCancelAnotherEvent) {
  EventQueue q;
  std::vector<int> ran;
  EventQueue::Handle victim;
  q.schedule(ps(5), [&] {
    ran.push_back(1);
    EXPECT_TRUE(q.cancel(victim));
  });
  victim = q.schedule(ps(5), [&] { ran.push_back(2); });
  q.schedule(ps(9), [&] { ran.push_back(3); });
  q.run();
  EXPECT_EQ(ran, (std::vector<int>{1, 3}));
}

TEST(EventQueue, ScheduleAfterIsRelativeToNow) {
  EventQueue q;
  int64_t fired_at = -1;
  q.schedule(ps(100), [&] { q.schedule_after(ps(25), [&] { fired_at = q.now().ps; }); });
  q.run();
  EXPECT_EQ(fired_at, 125);
}

TEST(EventQueue, RejectsThePastAndEmptyHandlers) {
  EventQueue q;
  q.schedule(ps(10), [] {});
  q.run();
  EXPECT_THROW(q.schedule(ps(9), [] {}), std::logic_error);
  EXPECT_THROW(q.schedule_after(ps(-1), [] {}), std::logic_error);
  EXPECT_THROW(q.schedule(ps(11), EventQueue::Handler{}), std::invalid_argument);
  EXPECT_THROW(q.schedule_after(SimTime::max(), [] {}), std::overflow_error);
  EXPECT_NO_THROW(q.schedule(ps(10), [] {}));  // now() itself is fine
}

TEST(EventQueue, RunUntilIsInclusiveAndSetsNow) {
  EventQueue q;
  std::vector<int64_t> ran;
  for (int64_t t : {10, 20, 30}) q.schedule(ps(t), [&, t] { ran.push_back(t); });
  // An event scheduled by a handler inside the window also runs.
  q.schedule(ps(15), [&] { q.schedule(ps(18), [&] { ran.push_back(18); }); });
  q.run_until(ps(20));
  EXPECT_EQ(ran, (std::vector<int64_t>{10, 18, 20}));
  EXPECT_EQ(q.now().ps, 20);
  EXPECT_EQ(q.pending(), 1u);
  q.run_until(ps(25));
  EXPECT_EQ(q.now().ps, 25);
  EXPECT_EQ(ran.size(), 3u);
  EXPECT_THROW(q.run_until(ps(24)), std::logic_error);
  EXPECT_THROW(q.schedule(ps(24), [] {}), std::logic_error);
  q.run();
  EXPECT_EQ(ran, (std::vector<int64_t>{10, 18, 20, 30}));
}

TEST(EventQueue, HeavyCancellationKeepsOrder) {
  // Exercises the heap compaction: 90% of events are cancelled before running.
  EventQueue q;
  std::vector<int> ran;
  std::vector<EventQueue::Handle> handles;
  for (int i = 0; i < 2000; ++i) {
    handles.push_back(q.schedule(ps((i * 7919) % 1000), [&ran, i] { ran.push_back(i); }));
  }
  for (int i = 0; i < 2000; ++i) {
    if (i % 10 != 0) {
      EXPECT_TRUE(q.cancel(handles[i]));
    }
  }
  EXPECT_EQ(q.pending(), 200u);
  int64_t last_t = -1;
  int last_i = -1;
  while (!q.empty()) {
    ASSERT_TRUE(q.step());
    const int i = ran.back();
    const int64_t t = (static_cast<int64_t>(i) * 7919) % 1000;
    EXPECT_EQ(i % 10, 0);
    EXPECT_EQ(q.now().ps, t);
    EXPECT_TRUE(t > last_t || (t == last_t && i > last_i));
    last_t = t;
    last_i = i;
  }
  EXPECT_EQ(ran.size(), 200u);
}

// Records the tags the queue delivers, with the time.
struct TagLog final : EventQueue::Sink {
  explicit TagLog(EventQueue& q) : q(q) {}
  void on_event(uint64_t tag) override { log.push_back(std::to_string(tag) + "@" + std::to_string(q.now().ps)); }
  EventQueue& q;
  std::vector<std::string> log;
};

TEST(EventQueue, TaggedEventsTakeTheirTurnAmongHandlers) {
  EventQueue q;
  TagLog sink(q);
  q.set_sink(&sink);
  q.schedule(ps(10), [&] { sink.log.push_back("h@" + std::to_string(q.now().ps)); });
  q.schedule_tagged(ps(10), 7);
  q.schedule_tagged(ps(5), 3);
  const auto cancelled = q.schedule_tagged(ps(8), 99);
  q.schedule(ps(10), [&] {
    sink.log.push_back("h2@" + std::to_string(q.now().ps));
    q.schedule_tagged_after(ps(4), 11);  // a tagged event scheduled from a handler
  });
  EXPECT_TRUE(q.cancel(cancelled));
  EXPECT_EQ(q.pending(), 4u);
  q.run();
  EXPECT_EQ(sink.log, (std::vector<std::string>{"3@5", "h@10", "7@10", "h2@10", "11@14"}));
  EXPECT_EQ(q.events_processed(), 5u);
  // A slot a tagged event used takes a handler again (and the other way round).
  bool ran = false;
  q.schedule(ps(20), [&] { ran = true; });
  q.schedule_tagged(ps(21), 5);
  q.run();
  EXPECT_TRUE(ran);
  EXPECT_EQ(sink.log.back(), "5@21");
}

TEST(EventQueue, TaggedEventsNeedASinkAndATimeNotPast) {
  EventQueue q;
  EXPECT_THROW(q.schedule_tagged(ps(1), 1), std::logic_error);  // no sink
  TagLog sink(q);
  q.set_sink(&sink);
  q.schedule_tagged(ps(10), 1);
  q.run();
  EXPECT_THROW(q.schedule_tagged(ps(9), 2), std::logic_error);
  EXPECT_THROW(q.schedule_tagged_after(ps(-1), 2), std::logic_error);
  EXPECT_TRUE(q.empty());
}

TEST(EventQueue, AdvanceToRefusesThePastAndSkippingAnEvent) {
  EventQueue q;
  q.schedule(ps(10), [] {});
  q.advance_to(ps(10));  // up to a pending event is allowed
  EXPECT_EQ(q.now().ps, 10);
  EXPECT_THROW(q.advance_to(ps(11)), std::logic_error);  // the event at 10 would be skipped
  q.run();
  EXPECT_THROW(q.advance_to(ps(9)), std::logic_error);
  q.advance_to(ps(12));
  EXPECT_EQ(q.now().ps, 12);
}

}  // namespace
}  // namespace racksim::sim
