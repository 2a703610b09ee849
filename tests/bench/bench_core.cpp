// The discrete-event core: event-queue throughput and max-min flow churn.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "core/event_queue.h"
#include "core/flow_network.h"

namespace {

using racksim::sim::EventQueue;
using racksim::sim::FlowNetwork;
using racksim::sim::SimTime;

// Schedules N events at pseudo-random times, then runs them all: items = events.
void BM_EventQueue_ScheduleRun(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  uint64_t x = 88172645463325252ull;
  for (auto _ : state) {
    EventQueue q;
    int64_t sum = 0;
    for (int i = 0; i < n; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      q.schedule(SimTime::from_seconds(static_cast<double>(x % 1000000) * 1e-9), [&sum, i] { sum += i; });
    }
    q.run();
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_EventQueue_ScheduleRun)->Arg(1 << 10)->Arg(1 << 16)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

// Events that schedule their successor (a chain per "stream"), as the replay does: the heap
// stays small while millions of events pass through.
void BM_EventQueue_Chains(benchmark::State& state) {
  const int streams = static_cast<int>(state.range(0));
  const int per_stream = 100000 / streams;
  for (auto _ : state) {
    EventQueue q;
    std::vector<int> left(streams, per_stream);
    std::function<void(int)> next = [&](int s) {
      if (--left[s] > 0) q.schedule_after(SimTime::from_seconds(1e-6 * (1 + s % 7)), [&next, s] { next(s); });
    };
    for (int s = 0; s < streams; ++s) q.schedule(SimTime{}, [&next, s] { next(s); });
    q.run();
    benchmark::DoNotOptimize(q.events_processed());
  }
  state.SetItemsProcessed(state.iterations() * streams * per_stream);
}
BENCHMARK(BM_EventQueue_Chains)->Arg(4)->Arg(64)->Unit(benchmark::kMillisecond);

// Start/finish churn: `width` flows alive at once on the resources of one GPU (sm, hbm, host
// link, nvlink, nic), each finishing flow starting another, 20,000 flows in all.
// items = flows (each is one start and one finish, both re-solving the touched component).
void BM_FlowNetwork_Churn(benchmark::State& state) {
  const int width = static_cast<int>(state.range(0));
  const int total = 20000;
  for (auto _ : state) {
    EventQueue q;
    FlowNetwork net(q);
    std::vector<FlowNetwork::ResourceId> r;
    for (const char* name : {"sm", "hbm", "host_link", "nvlink", "nic"}) r.push_back(net.add_resource(name, 1e12));
    int started = 0;
    std::function<void()> start = [&] {
      if (started >= total) return;
      const int k = started++;
      std::vector<FlowNetwork::Use> path = {{r[k % 5], 1.0}, {r[(k / 5 + 1) % 5], 0.5}};
      net.start_flow(std::move(path), 1e6 * (1 + k % 13), [&](FlowNetwork::FlowId) { start(); });
    };
    for (int i = 0; i < width; ++i) start();
    q.run();
    benchmark::DoNotOptimize(started);
  }
  state.SetItemsProcessed(state.iterations() * total);
}
BENCHMARK(BM_FlowNetwork_Churn)->Arg(4)->Arg(32)->Arg(256)->Unit(benchmark::kMillisecond);

// Many small independent components (one per simulated rank role's links): the solver touches
// only the component of the flow that changed.
void BM_FlowNetwork_Components(benchmark::State& state) {
  const int comps = static_cast<int>(state.range(0));
  const int per_comp = 4, total = 20000;
  for (auto _ : state) {
    EventQueue q;
    FlowNetwork net(q);
    std::vector<FlowNetwork::ResourceId> r;
    for (int c = 0; c < comps; ++c) r.push_back(net.add_resource("r", 1e12));
    int started = 0;
    std::function<void(int)> start = [&](int c) {
      if (started >= total) return;
      const int k = started++;
      net.start_flow({{r[c], 1.0}}, 1e6 * (1 + k % 11), [&, c](FlowNetwork::FlowId) { start(c); });
    };
    for (int c = 0; c < comps; ++c)
      for (int i = 0; i < per_comp; ++i) start(c);
    q.run();
    benchmark::DoNotOptimize(started);
  }
  state.SetItemsProcessed(state.iterations() * total);
}
BENCHMARK(BM_FlowNetwork_Components)->Arg(16)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace
