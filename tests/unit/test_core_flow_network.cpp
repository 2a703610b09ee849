// Fluid max-min fair flow network. Times are asserted in exact picoseconds.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/event_queue.h"
#include "core/flow_network.h"

namespace racksim::sim {
namespace {

// "r" + std::to_string(i) would be shorter, but GCC 12 reports a false -Wrestrict inside
// operator+(const char*, std::string&&) at -O2 (a known false positive, gone in GCC 13); appending does not.
std::string res_name(int i) {
  std::string s = "r";
  s += std::to_string(i);
  return s;
}

constexpr int64_t kS = 1'000'000'000'000;  // picoseconds per second

using FlowId = FlowNetwork::FlowId;

// Records completion time (ps) per flow id.
struct Done {
  std::map<FlowId, int64_t> at_ps;
  std::vector<FlowId> order;
  std::function<void(FlowId)> cb(EventQueue& q) {
    return [this, &q](FlowId f) {
      at_ps[f] = q.now().ps;
      order.push_back(f);
    };
  }
};

TEST(FlowNetwork, TwoFlowsShareOneLinkEqually) {
  EventQueue q;
  FlowNetwork net(q);
  Done done;
  const auto link = net.add_resource("link", 10.0);
  const FlowId a = net.start_flow({{link}}, 100.0, done.cb(q));
  const FlowId b = net.start_flow({{link}}, 100.0, done.cb(q));
  EXPECT_EQ(net.rate(a), 5.0);
  EXPECT_EQ(net.rate(b), 5.0);
  EXPECT_EQ(net.utilization(link), 1.0);
  EXPECT_EQ(net.bottleneck(a), "link");
  EXPECT_EQ(net.active_flows(), 2u);
  q.run();
  EXPECT_EQ(done.at_ps[a], 20 * kS);
  EXPECT_EQ(done.at_ps[b], 20 * kS);
  EXPECT_EQ(done.order, (std::vector<FlowId>{a, b}));
  EXPECT_EQ(net.active_flows(), 0u);
  EXPECT_EQ(net.utilization(link), 0.0);
}

TEST(FlowNetwork, CrossTrafficOnSecondLinkHalvesBoth) {
  EventQueue q;
  FlowNetwork net(q);
  Done done;
  const auto A = net.add_resource("A", 10.0);
  const auto B = net.add_resource("B", 10.0);
  const FlowId through = net.start_flow({{A}, {B}}, 100.0, done.cb(q));
  const FlowId cross = net.start_flow({{B}}, 100.0, done.cb(q));
  EXPECT_EQ(net.rate(through), 5.0);
  EXPECT_EQ(net.rate(cross), 5.0);
  EXPECT_EQ(net.bottleneck(through), "B");
  EXPECT_EQ(net.utilization(A), 0.5);
  EXPECT_EQ(net.utilization(B), 1.0);
  q.run();
  EXPECT_EQ(done.at_ps[through], 20 * kS);
  EXPECT_EQ(done.at_ps[cross], 20 * kS);
}

TEST(FlowNetwork, ShortFlowFinishesThenLongFlowSpeedsUp) {
  EventQueue q;
  FlowNetwork net(q);
  Done done;
  const auto link = net.add_resource("link", 10.0);
  const FlowId shortf = net.start_flow({{link}}, 10.0, done.cb(q));
  const FlowId longf = net.start_flow({{link}}, 100.0, done.cb(q));
  double rate_at_3s = 0, remaining_at_3s = 0;
  q.schedule(SimTime::from_ps(3 * kS), [&] {
    rate_at_3s = net.rate(longf);
    remaining_at_3s = net.remaining(longf);
  });
  q.run();
  EXPECT_EQ(done.at_ps[shortf], 2 * kS);   // 10 B at 5 B/s
  EXPECT_EQ(done.at_ps[longf], 11 * kS);   // 10 B by 2 s, then 90 B at 10 B/s
  EXPECT_EQ(rate_at_3s, 10.0);
  EXPECT_EQ(remaining_at_3s, 80.0);
}

TEST(FlowNetwork, RateCapLeavesTheRestToOthers) {
  EventQueue q;
  FlowNetwork net(q);
  Done done;
  const auto link = net.add_resource("link", 10.0);
  const FlowId capped = net.start_flow({{link}}, 10.0, done.cb(q), 2.0);
  const FlowId free = net.start_flow({{link}}, 100.0, done.cb(q));
  EXPECT_EQ(net.rate(capped), 2.0);
  EXPECT_EQ(net.rate(free), 8.0);
  EXPECT_EQ(net.bottleneck(capped), "cap");
  EXPECT_EQ(net.bottleneck(free), "link");
  q.run();
  EXPECT_EQ(done.at_ps[capped], 5 * kS);  // 10 B at 2 B/s
  EXPECT_EQ(done.at_ps[free], 11 * kS);   // 40 B by 5 s at 8 B/s, then 60 B at 10 B/s
}

TEST(FlowNetwork, CapAboveFairShareDoesNotBind) {
  EventQueue q;
  FlowNetwork net(q);
  const auto link = net.add_resource("link", 10.0);
  const FlowId a = net.start_flow({{link}}, 100.0, {}, 7.0);
  const FlowId b = net.start_flow({{link}}, 100.0, {});
  EXPECT_EQ(net.rate(a), 5.0);
  EXPECT_EQ(net.rate(b), 5.0);
  EXPECT_EQ(net.bottleneck(a), "link");
}

TEST(FlowNetwork, CapEqualToFairShareIsReportedAsTheResource) {
  EventQueue q;
  FlowNetwork net(q);
  const auto link = net.add_resource("link", 10.0);
  const FlowId capped = net.start_flow({{link}}, 100.0, {}, 5.0);
  const FlowId other = net.start_flow({{link}}, 100.0, {});
  EXPECT_EQ(net.rate(capped), 5.0);
  EXPECT_EQ(net.rate(other), 5.0);
  EXPECT_EQ(net.bottleneck(capped), "link");  // the link is saturated; the cap is not what binds
}

TEST(FlowNetwork, CoefficientsScaleResourceUse) {
  EventQueue q;
  FlowNetwork net(q);
  Done done;
  const auto r = net.add_resource("hbm", 12.0);
  // Rates rise together: 2t + t = 12 -> t = 4 each.
  const FlowId heavy = net.start_flow({{r, 2.0}}, 40.0, done.cb(q));
  const FlowId light = net.start_flow({{r, 1.0}}, 64.0, done.cb(q));
  EXPECT_EQ(net.rate(heavy), 4.0);
  EXPECT_EQ(net.rate(light), 4.0);
  EXPECT_EQ(net.utilization(r), 1.0);
  q.run();
  EXPECT_EQ(done.at_ps[heavy], 10 * kS);  // 40 B at 4 B/s
  EXPECT_EQ(done.at_ps[light], 12 * kS);  // 40 B by 10 s, then 24 B at 12 B/s
}

TEST(FlowNetwork, CoefficientAloneAndRepeatedResources) {
  EventQueue q;
  FlowNetwork net(q);
  const auto r = net.add_resource("r", 10.0);
  const auto other = net.add_resource("other", 1.0);
  const FlowId f = net.start_flow({{r, 2.0}}, 10.0, {});
  EXPECT_EQ(net.rate(f), 5.0);
  EXPECT_TRUE(net.cancel_flow(f));
  // Crossing a resource twice sums the coefficients; a zero coefficient is ignored.
  const FlowId g = net.start_flow({{r, 1.0}, {other, 0.0}, {r, 1.0}}, 10.0, {});
  EXPECT_EQ(net.rate(g), 5.0);
  EXPECT_EQ(net.utilization(r), 1.0);
  EXPECT_EQ(net.utilization(other), 0.0);
}

TEST(FlowNetwork, ClassicMaxMinThreeFlows) {
  EventQueue q;
  FlowNetwork net(q);
  const auto A = net.add_resource("A", 10.0);
  const auto B = net.add_resource("B", 4.0);
  const FlowId f1 = net.start_flow({{A}}, 1.0, {});
  const FlowId f2 = net.start_flow({{A}, {B}}, 1.0, {});
  const FlowId f3 = net.start_flow({{B}}, 1.0, {});
  // B saturates first at 2 each; f1 then takes what is left of A.
  EXPECT_EQ(net.rate(f2), 2.0);
  EXPECT_EQ(net.rate(f3), 2.0);
  EXPECT_EQ(net.rate(f1), 8.0);
  EXPECT_EQ(net.bottleneck(f1), "A");
  EXPECT_EQ(net.bottleneck(f2), "B");
}

TEST(FlowNetwork, SetCapacityMidFlow) {
  EventQueue q;
  FlowNetwork net(q);
  Done done;
  const auto link = net.add_resource("link", 10.0);
  const FlowId f = net.start_flow({{link}}, 100.0, done.cb(q));
  q.schedule(SimTime::from_ps(5 * kS), [&] { net.set_capacity(link, 5.0); });   // 50 B left
  q.schedule(SimTime::from_ps(9 * kS), [&] { net.set_capacity(link, 20.0); });  // 30 B left
  q.run();
  EXPECT_EQ(done.at_ps[f], 10'500'000'000'000);  // 9 s + 30 B / 20 B/s
  EXPECT_EQ(net.capacity(link), 20.0);
}

TEST(FlowNetwork, CancelFreesBandwidth) {
  EventQueue q;
  FlowNetwork net(q);
  Done done;
  const auto link = net.add_resource("link", 10.0);
  const FlowId a = net.start_flow({{link}}, 100.0, done.cb(q));
  const FlowId b = net.start_flow({{link}}, 100.0, done.cb(q));
  q.schedule(SimTime::from_ps(4 * kS), [&] {
    EXPECT_TRUE(net.cancel_flow(b));
    EXPECT_FALSE(net.cancel_flow(b));
    EXPECT_EQ(net.rate(a), 10.0);
    EXPECT_EQ(net.active_flows(), 1u);
  });
  q.run();
  EXPECT_EQ(done.at_ps[a], 12 * kS);  // 20 B by 4 s, then 80 B at 10 B/s
  EXPECT_EQ(done.at_ps.count(b), 0u);  // a cancelled flow never calls on_done
  EXPECT_FALSE(net.cancel_flow(a));    // already finished
  EXPECT_THROW(net.rate(b), std::out_of_range);
}

TEST(FlowNetwork, CompletionRoundsUpToTheNextPicosecond) {
  EventQueue q;
  FlowNetwork net(q);
  Done done;
  const auto link = net.add_resource("link", 3.0);
  const FlowId f = net.start_flow({{link}}, 1.0, done.cb(q));  // 1/3 s
  q.run();
  EXPECT_EQ(done.at_ps[f], 333'333'333'334);
}

TEST(FlowNetwork, FloatNoiseDoesNotAddAPicosecond) {
  EventQueue q;
  FlowNetwork net(q);
  Done done;
  const auto link = net.add_resource("link", 10.0);
  // 1.1 / 10 * 1e12 evaluates to 110000000000.00002 in binary floating point.
  const FlowId f = net.start_flow({{link}}, 1.1, done.cb(q));
  q.run();
  EXPECT_EQ(done.at_ps[f], 110'000'000'000);
}

TEST(FlowNetwork, ResidueBelowEpsilonCompletesNow) {
  EventQueue q;
  FlowNetwork net(q);
  Done done;
  const auto link = net.add_resource("link", 1.0);
  // 0.1 * 3 = 0.30000000000000004 B at 1 B/s completes at 3e11 ps (the extra 6e-5 ps is float
  // noise), where 5.6e-17 B is left over in floating point. A flow that starts at that same
  // picosecond, just before the completion event, re-solves the link while the residue remains:
  // the residue must not push the completion to the next picosecond.
  q.schedule(SimTime::from_ps(300'000'000'000), [&] { net.start_flow({{link}}, 1.0, done.cb(q)); });
  const FlowId f = net.start_flow({{link}}, 0.1 * 3, done.cb(q));
  q.run();
  EXPECT_EQ(done.at_ps[f], 300'000'000'000);
}

TEST(FlowNetwork, SamePicosecondCompletionsFollowStartOrder) {
  EventQueue q;
  FlowNetwork net(q);
  Done done;
  const auto fast = net.add_resource("fast", 10.0);
  const auto mid = net.add_resource("mid", 5.0);
  const auto slow = net.add_resource("slow", 2.0);
  // Started in the reverse order of resource ids; all end at 10 s.
  const FlowId f1 = net.start_flow({{slow}}, 20.0, done.cb(q));
  const FlowId f2 = net.start_flow({{fast}}, 100.0, done.cb(q));
  const FlowId f3 = net.start_flow({{mid}}, 50.0, done.cb(q));
  q.run();
  EXPECT_EQ(done.order, (std::vector<FlowId>{f1, f2, f3}));
  EXPECT_EQ(done.at_ps[f1], 10 * kS);
  EXPECT_EQ(done.at_ps[f3], 10 * kS);
  EXPECT_EQ(q.events_processed(), 1u);  // one event for the whole batch
}

TEST(FlowNetwork, ZeroAmountCompletesAtNowThroughTheQueue) {
  EventQueue q;
  FlowNetwork net(q);
  Done done;
  const auto link = net.add_resource("link", 10.0);
  const FlowId busy = net.start_flow({{link}}, 100.0, done.cb(q));
  q.schedule(SimTime::from_ps(7 * kS), [&] {
    const FlowId z = net.start_flow({{link}}, 0.0, done.cb(q));
    EXPECT_EQ(done.at_ps.count(z), 0u);  // not re-entrant
    EXPECT_EQ(net.rate(busy), 10.0);     // takes no bandwidth
    EXPECT_EQ(net.bottleneck(z), "none");
  });
  q.run();
  ASSERT_EQ(done.order.size(), 2u);
  EXPECT_EQ(done.at_ps[done.order[0]], 7 * kS);
  EXPECT_EQ(done.at_ps[busy], 10 * kS);
}

TEST(FlowNetwork, PathlessFlowRunsAtItsCap) {
  EventQueue q;
  FlowNetwork net(q);
  Done done;
  const FlowId f = net.start_flow({}, 10.0, done.cb(q), 2.0);
  EXPECT_EQ(net.rate(f), 2.0);
  EXPECT_EQ(net.bottleneck(f), "cap");
  q.run();
  EXPECT_EQ(done.at_ps[f], 5 * kS);
}

TEST(FlowNetwork, RejectsInvalidInput) {
  EventQueue q;
  FlowNetwork net(q);
  const auto link = net.add_resource("link", 10.0);
  EXPECT_THROW(net.start_flow({}, 10.0, {}), std::invalid_argument);  // no path, no cap
  EXPECT_THROW(net.start_flow({{link, 0.0}}, 10.0, {}), std::invalid_argument);  // effectively no path
  EXPECT_THROW(net.start_flow({{link}}, -1.0, {}), std::invalid_argument);
  EXPECT_THROW(net.start_flow({{link}}, INFINITY, {}), std::invalid_argument);
  EXPECT_THROW(net.start_flow({{link}}, 1.0, {}, 0.0), std::invalid_argument);
  EXPECT_THROW(net.start_flow({{link, -1.0}}, 1.0, {}), std::invalid_argument);
  EXPECT_THROW(net.start_flow({{link + 1}}, 1.0, {}), std::out_of_range);
  EXPECT_THROW(net.add_resource("bad", 0.0), std::invalid_argument);
  EXPECT_THROW(net.add_resource("bad", INFINITY), std::invalid_argument);
  EXPECT_THROW(net.set_capacity(link, -1.0), std::invalid_argument);
  EXPECT_THROW(net.utilization(link + 1), std::out_of_range);
  EXPECT_THROW(net.rate(12345), std::out_of_range);
  EXPECT_EQ(net.active_flows(), 0u);
  EXPECT_TRUE(q.empty());
}

// A start rejected for a use after valid ones (begin_flow checks each use as it builds the path) leaves
// nothing behind: the resources it named before the bad use carry no part of it, so later flows there
// (one of them in the slot the rejected start took) are alone at the full rate, and the flow already
// running keeps its rate and its end.
TEST(FlowNetwork, ARejectedStartLeavesTheNetworkAsItWas) {
  EventQueue q;
  FlowNetwork net(q);
  const auto a = net.add_resource("a", 10.0);
  const auto b = net.add_resource("b", 4.0);
  const auto c = net.add_resource("c", 5.0);
  Done done;
  const FlowId running = net.start_flow({{a}}, 20.0, done.cb(q));
  EXPECT_THROW(net.start_flow({{b}, {c}, {a, -1.0}}, 1.0, {}), std::invalid_argument);
  EXPECT_THROW(net.start_flow({{b}, {c}, {b + 7}}, 1.0, {}), std::out_of_range);
  EXPECT_EQ(net.active_flows(), 1u);
  EXPECT_EQ(net.rate(running), 10.0);
  const FlowId on_c = net.start_flow({{c}}, 10.0, done.cb(q));
  const FlowId on_b = net.start_flow({{b}}, 8.0, done.cb(q));
  EXPECT_EQ(net.rate(on_c), 5.0);
  EXPECT_EQ(net.rate(on_b), 4.0);
  EXPECT_EQ(net.utilization(b), 1.0);
  EXPECT_EQ(net.rate(running), 10.0);
  q.run();
  EXPECT_EQ(done.at_ps[running], 2 * kS);
  EXPECT_EQ(done.at_ps[on_c], 2 * kS);
  EXPECT_EQ(done.at_ps[on_b], 2 * kS);
}

TEST(FlowNetwork, OnDoneCanStartTheNextFlow) {
  EventQueue q;
  FlowNetwork net(q);
  const auto link = net.add_resource("link", 10.0);
  int started = 1;
  int64_t last_ps = -1;
  std::function<void(FlowId)> next = [&](FlowId) {
    last_ps = q.now().ps;
    if (started < 10) {
      ++started;
      net.start_flow({{link}}, 10.0, next);
    }
  };
  net.start_flow({{link}}, 10.0, next);
  q.run();
  EXPECT_EQ(started, 10);
  EXPECT_EQ(last_ps, 10 * kS);  // ten 1 s flows back to back
}

TEST(FlowNetwork, OnDoneMayStartManyFlowsAndKeepUsingItsCaptures) {
  // Starting flows from inside on_done grows the network's storage; the running callback must not
  // move under it. The capture is one pointer, small enough for std::function to store inline,
  // so a moved callback would read freed memory (which AddressSanitizer reports).
  EventQueue q;
  FlowNetwork net(q);
  struct Ctx {
    FlowNetwork* net;
    FlowNetwork::ResourceId link;
    int children_done = 0;
    bool finished_loop = false;
  } ctx{&net, net.add_resource("link", 100.0)};
  Ctx* p = &ctx;
  net.start_flow({{ctx.link}}, 1.0, [p](FlowId) {
    for (int i = 0; i < 1000; ++i) {
      p->net->start_flow({{p->link}}, 1.0, [p](FlowId) { ++p->children_done; });
    }
    p->finished_loop = true;
  });
  q.run();
  EXPECT_TRUE(ctx.finished_loop);
  EXPECT_EQ(ctx.children_done, 1000);
  EXPECT_EQ(q.now().ps, 10'010'000'000'000);  // 0.01 s, then 1000 flows of 1 B at 0.1 B/s each
}

TEST(FlowNetwork, CompletingFlowsAreQueryableInsideTheirBatch) {
  EventQueue q;
  FlowNetwork net(q);
  const auto link = net.add_resource("link", 10.0);
  FlowId a = 0, b = 0, c = 0;
  std::vector<std::string> log;
  a = net.start_flow({{link}}, 50.0, [&](FlowId f) {
    EXPECT_EQ(f, a);
    EXPECT_EQ(net.rate(a), 5.0);  // its last rate
    EXPECT_EQ(net.remaining(a), 0.0);
    EXPECT_EQ(net.bottleneck(a), "link");
    EXPECT_FALSE(net.cancel_flow(b));  // b completes at the same instant: too late to cancel
    c = net.start_flow({{link}}, 10.0, [&](FlowId) { log.push_back("c"); });
    EXPECT_EQ(net.rate(c), 10.0);  // queries see the new flow's rate at once
    log.push_back("a");
  });
  b = net.start_flow({{link}}, 50.0, [&](FlowId) { log.push_back("b"); });
  q.run();
  EXPECT_EQ(log, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(q.now().ps, 11 * kS);
  EXPECT_THROW(net.rate(a), std::out_of_range);  // forgotten after its batch
}

TEST(FlowNetwork, OnDoneCanCancelAnotherLiveFlow) {
  EventQueue q;
  FlowNetwork net(q);
  Done done;
  const auto link = net.add_resource("link", 10.0);
  FlowId victim = 0;
  const FlowId first = net.start_flow({{link}}, 10.0, [&](FlowId) { EXPECT_TRUE(net.cancel_flow(victim)); });
  victim = net.start_flow({{link}}, 100.0, done.cb(q));
  const FlowId other = net.start_flow({{link}}, 30.0, done.cb(q));
  q.run();
  (void)first;
  EXPECT_EQ(done.at_ps.count(victim), 0u);
  // 3 flows at 10/3 until first ends at 3 s (other has 20 left), then other alone: 2 s.
  EXPECT_EQ(done.at_ps[other], 5 * kS);
}

TEST(FlowNetwork, IndependentComponentsDoNotDisturbEachOther) {
  EventQueue q;
  FlowNetwork net(q);
  Done done;
  const auto A = net.add_resource("A", 3.0);
  const auto B = net.add_resource("B", 7.0);
  const FlowId fa = net.start_flow({{A}}, 1.0, done.cb(q));  // 1/3 s: rounds up
  // Churn on B at odd times must not move fa's completion.
  for (int i = 0; i < 20; ++i) {
    q.schedule(SimTime::from_ps(1 + i * 12'345'678'901), [&] { net.start_flow({{B}}, 0.3, {}); });
  }
  q.run();
  EXPECT_EQ(done.at_ps[fa], 333'333'333'334);
}

TEST(FlowNetwork, DestroyingTheNetworkCancelsItsEvent) {
  EventQueue q;
  bool called = false;
  {
    FlowNetwork net(q);
    const auto link = net.add_resource("link", 1.0);
    net.start_flow({{link}}, 1.0, [&](FlowId) { called = true; });
    EXPECT_EQ(q.pending(), 1u);
  }
  EXPECT_TRUE(q.empty());
  q.run();
  EXPECT_FALSE(called);
}

// A random scenario: flows start at random times on random paths with random caps.
std::vector<std::pair<FlowId, int64_t>> random_scenario(uint32_t seed) {
  EventQueue q;
  FlowNetwork net(q);
  std::mt19937 rng(seed);
  std::vector<FlowNetwork::ResourceId> res;
  for (int i = 0; i < 12; ++i) res.push_back(net.add_resource(res_name(i), 1.0 + rng() % 100));
  std::vector<std::pair<FlowId, int64_t>> log;
  for (int i = 0; i < 300; ++i) {
    const int64_t start_ps = static_cast<int64_t>(rng() % 50) * 100'000'000'000;
    std::vector<FlowNetwork::Use> path;
    const int hops = 1 + static_cast<int>(rng() % 3);
    for (int h = 0; h < hops; ++h) path.push_back({res[rng() % res.size()], 0.5 + (rng() % 4) * 0.5});
    const double amount = 1.0 + rng() % 1000;
    const double cap = (rng() % 4 == 0) ? 1.0 + rng() % 20 : INFINITY;
    q.schedule(SimTime::from_ps(start_ps), [&net, &q, &log, path, amount, cap] {
      net.start_flow(path, amount, [&q, &log](FlowId f) { log.emplace_back(f, q.now().ps); }, cap);
    });
  }
  q.run();
  EXPECT_EQ(net.active_flows(), 0u);
  return log;
}

TEST(FlowNetwork, DeterministicAcrossRuns) {
  const auto first = random_scenario(42);
  const auto second = random_scenario(42);
  ASSERT_EQ(first.size(), 300u);
  EXPECT_EQ(first, second);
  EXPECT_NE(first, random_scenario(43));  // the scenario does depend on its input
}

// Checks the max-min fairness conditions on the current allocation: every resource within
// capacity, and every flow either at its cap or crossing a saturated resource on which no flow
// has a higher rate.
void expect_max_min_fair(const FlowNetwork& net, const std::vector<FlowId>& flows,
                         const std::map<FlowId, std::vector<FlowNetwork::Use>>& paths,
                         const std::map<FlowId, double>& caps) {
  const double tol = 1e-9;
  std::vector<double> used(net.resource_count(), 0.0);
  std::vector<double> max_rate(net.resource_count(), 0.0);
  for (FlowId f : flows) {
    for (const auto& u : paths.at(f)) {
      used[u.resource] += u.coefficient * net.rate(f);
      max_rate[u.resource] = std::max(max_rate[u.resource], net.rate(f));
    }
  }
  for (FlowNetwork::ResourceId r = 0; r < net.resource_count(); ++r) {
    EXPECT_LE(used[r], net.capacity(r) * (1 + tol)) << net.resource_name(r);
    EXPECT_NEAR(net.utilization(r), used[r] / net.capacity(r), tol);
  }
  for (FlowId f : flows) {
    const double rate = net.rate(f);
    EXPECT_GT(rate, 0.0);
    if (rate >= caps.at(f) * (1 - tol)) {
      EXPECT_LE(rate, caps.at(f) * (1 + tol));
      continue;
    }
    bool bounded = false;
    for (const auto& u : paths.at(f)) {
      const auto r = u.resource;
      if (used[r] >= net.capacity(r) * (1 - tol) && rate >= max_rate[r] * (1 - tol)) bounded = true;
    }
    EXPECT_TRUE(bounded) << "flow " << f << " at " << rate << " could grow";
  }
}

TEST(FlowNetwork, RandomAllocationsAreMaxMinFair) {
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    EventQueue q;
    FlowNetwork net(q);
    std::mt19937 rng(seed);
    const int nres = 2 + static_cast<int>(rng() % 8);
    for (int i = 0; i < nres; ++i) net.add_resource(res_name(i), 1.0 + rng() % 50);
    std::vector<FlowId> flows;
    std::map<FlowId, std::vector<FlowNetwork::Use>> paths;
    std::map<FlowId, double> caps;
    const int nflows = 1 + static_cast<int>(rng() % 25);
    for (int i = 0; i < nflows; ++i) {
      std::vector<FlowNetwork::Use> path;
      std::vector<bool> seen(static_cast<std::size_t>(nres), false);
      const int hops = 1 + static_cast<int>(rng() % 3);
      for (int h = 0; h < hops; ++h) {
        const auto r = static_cast<FlowNetwork::ResourceId>(rng() % static_cast<uint32_t>(nres));
        if (seen[r]) continue;
        seen[r] = true;
        path.push_back({r, 0.25 + (rng() % 8) * 0.25});
      }
      const double cap = (rng() % 3 == 0) ? 0.5 + rng() % 10 : INFINITY;
      const FlowId f = net.start_flow(path, 1e6, {}, cap);
      flows.push_back(f);
      paths[f] = path;
      caps[f] = cap;
    }
    SCOPED_TRACE("seed " + std::to_string(seed));
    expect_max_min_fair(net, flows, paths, caps);
    // Cancel half and check again: re-solving after removals is fair too.
    std::vector<FlowId> kept;
    for (std::size_t i = 0; i < flows.size(); ++i) {
      if (i % 2 == 1) {
        EXPECT_TRUE(net.cancel_flow(flows[i]));
      } else {
        kept.push_back(flows[i]);
      }
    }
    expect_max_min_fair(net, kept, paths, caps);
  }
}

// Churn: `concurrent` flows over resources split into groups (each flow crosses two resources of
// one group, so a group is a component); every completion starts a replacement until `total`
// have run. Every flow completes exactly once and never sooner than its best-case rate allows.
void churn(int resources, int group_size, int concurrent, int total) {
  EventQueue q;
  FlowNetwork net(q);
  std::mt19937 rng(7);
  std::vector<FlowNetwork::ResourceId> res;
  for (int i = 0; i < resources; ++i) res.push_back(net.add_resource(res_name(i), 100.0 + rng() % 100));
  int started = 0, completed = 0;
  std::unordered_map<FlowId, std::pair<int64_t, double>> start_and_min_s;
  std::function<void()> start_one;
  std::function<void(FlowId)> on_done = [&](FlowId f) {
    ++completed;
    const auto [start, min_s] = start_and_min_s.at(f);
    const double took_s = static_cast<double>(q.now().ps - start) / 1e12;
    EXPECT_GE(took_s * (1 + 1e-9), min_s);
    start_and_min_s.erase(f);
    if (started < total) start_one();
  };
  start_one = [&] {
    const int group = static_cast<int>(rng() % static_cast<uint32_t>(resources / group_size));
    const auto r1 = res[static_cast<std::size_t>(group * group_size) + rng() % group_size];
    const auto r2 = res[static_cast<std::size_t>(group * group_size) + rng() % group_size];
    const double amount = 1.0 + rng() % 100;
    const FlowId f = net.start_flow({{r1}, {r2}}, amount, on_done);
    // Crossing one resource twice uses it twice (coefficient 2).
    const double best_rate = std::min(net.capacity(r1), net.capacity(r2)) / (r1 == r2 ? 2 : 1);
    start_and_min_s[f] = {q.now().ps, amount / best_rate};
    ++started;
  };
  for (int i = 0; i < concurrent; ++i) start_one();
  q.run();
  EXPECT_EQ(started, total);
  EXPECT_EQ(completed, total);
  EXPECT_EQ(net.active_flows(), 0u);
  EXPECT_TRUE(start_and_min_s.empty());
  EXPECT_TRUE(q.empty());
}

TEST(FlowNetwork, ChurnInOneLargeComponent) { churn(50, 50, 1000, 5000); }

TEST(FlowNetwork, ChurnInManySmallComponents) { churn(800, 8, 2000, 40000); }

// Records what flows started with a tag report.
struct TagSink final : FlowNetwork::CompletionSink {
  explicit TagSink(EventQueue& q) : q(q) {}
  void flow_done(FlowId id, uint64_t tag) override {
    ids.push_back(id);
    log.push_back(std::to_string(tag) + "@" + std::to_string(q.now().ps));
  }
  EventQueue& q;
  std::vector<FlowId> ids;
  std::vector<std::string> log;
};

TEST(FlowNetwork, TaggedFlowsReportToTheSinkInStartOrder) {
  EventQueue q;
  FlowNetwork net(q);
  TagSink sink(q);
  net.set_completion_sink(&sink);
  const auto link = net.add_resource("link", 10.0);
  const auto other = net.add_resource("other", 10.0);
  std::vector<std::string> fn_log;
  // Three flows end at 3 s (two share `link`, one alone on `other`), started tagged, with a
  // callback, tagged: they report in start order from one event.
  const FlowId a = net.start_flow_tagged(std::vector<FlowNetwork::Use>{{link}}.data(), 1, 15.0, 100);
  net.start_flow({{link}}, 15.0, [&](FlowId) { fn_log.push_back("fn@" + std::to_string(q.now().ps)); });
  const FlowNetwork::Use on_other{other};
  const FlowId c = net.start_flow_tagged(&on_other, 1, 30.0, 300);
  q.run();
  EXPECT_EQ(sink.log, (std::vector<std::string>{"100@" + std::to_string(3 * kS), "300@" + std::to_string(3 * kS)}));
  EXPECT_EQ(sink.ids, (std::vector<FlowId>{a, c}));
  EXPECT_EQ(fn_log, (std::vector<std::string>{"fn@" + std::to_string(3 * kS)}));
  EXPECT_EQ(net.active_flows(), 0u);
}

TEST(FlowNetwork, TaggedStartWithoutASinkThrows) {
  EventQueue q;
  FlowNetwork net(q);
  const FlowNetwork::Use u{net.add_resource("link", 1.0)};
  EXPECT_THROW(net.start_flow_tagged(&u, 1, 1.0, 1), std::logic_error);
  EXPECT_EQ(net.active_flows(), 0u);
}

// A flow alone on its resources takes its rate at once (no solve): the lowest of each resource's
// capacity over its coefficient and its cap, a resource winning a tie with the cap and the lower
// resource id a tie between resources -- what the progressive filling gives when others join.
TEST(FlowNetwork, AFlowAloneTakesTheLowestOfItsLimits) {
  EventQueue q;
  FlowNetwork net(q);
  const auto a = net.add_resource("a", 10.0);  // 10 / 2 = 5 per unit of the flow
  const auto b = net.add_resource("b", 4.0);
  const auto c = net.add_resource("c", 4.0);
  const FlowId f1 = net.start_flow({{a, 2.0}, {c}, {b}}, 40.0, nullptr);
  EXPECT_EQ(net.rate(f1), 4.0);
  EXPECT_EQ(net.bottleneck(f1), "b");  // b and c tie at 4: the lower id
  const FlowId f2 = net.start_flow({{net.add_resource("d", 8.0)}}, 8.0, nullptr, 8.0);
  EXPECT_EQ(net.rate(f2), 8.0);
  EXPECT_EQ(net.bottleneck(f2), "d");  // the resource, not the equal cap
  // A second flow on b: both are solved together, f1 halves.
  const FlowId f3 = net.start_flow({{b}}, 2.0, nullptr);
  EXPECT_EQ(net.rate(f1), 2.0);
  EXPECT_EQ(net.rate(f3), 2.0);
  // f3 ends at 1 s; f1, alone again, is re-solved back to 4 (it ran at 2 from the start: 38 left).
  q.run_until(SimTime::from_ps(kS));
  EXPECT_EQ(net.rate(f1), 4.0);
  EXPECT_EQ(net.remaining(f1), 38.0);
  q.run();
  EXPECT_EQ(q.now().ps, 10 * kS + kS / 2);  // 38 more at 4 per second
}

// A flow started inside a completion batch, on resources the finished flows left, is alone too:
// it starts at its full rate even though the batch's solve is deferred.
TEST(FlowNetwork, AFlowStartedInACompletionBatchIsAloneOnAFreedResource) {
  EventQueue q;
  FlowNetwork net(q);
  const auto link = net.add_resource("link", 10.0);
  FlowId next = 0;
  double next_rate = 0;
  net.start_flow({{link}}, 10.0, [&](FlowId) {
    next = net.start_flow({{link}}, 10.0, nullptr);
    next_rate = net.rate(next);
  });
  q.run();
  EXPECT_EQ(next_rate, 10.0);
  EXPECT_EQ(q.now().ps, 2 * kS);
}

}  // namespace
}  // namespace racksim::sim
