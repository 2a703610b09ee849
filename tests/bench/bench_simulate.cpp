// Whole-pipeline costs on shipped scenarios: building the training graph, replaying it, and a
// small sweep through the thread pool. Counters: ops = graph size; the time is per scenario.
// Issue #18's cases (docs/performance.md): one point of the 10k sweep (load + simulate, as a
// sweep runs it), a slice of that sweep, the 16,384-GPU Llama 3 step, a pipeline of 2,048
// micro-batches on 128 H100, and the HLO replay of a reference module.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <optional>
#include <string>

#include "sim/cli/commands.h"
#include "sim/report/report.h"
#include "sim/run/run.h"
#include "sim/scenario/scenario.h"
#include "sim/workflow/sweep.h"
#include "workloads/graph_builder.h"

namespace {

namespace sim = racksim::sim;

const std::string kSrc = RACKSIM_SOURCE_DIR;

// name -> scenario file (and overrides) of each benchmarked scenario.
struct Case {
  const char* name;
  const char* file;
  std::vector<sim::SetOverride> sets;
};
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"quickstart", "scenarios/quickstart.yaml", {}},                       // Llama 3 8B, 8 x H200
      {"llama3-70b-512gpu", "scenarios/llama3-70b-gb200.yaml", {}},          // 512 x GB200, tp 4
      {"llama3-70b-512gpu-pp4", "scenarios/llama3-70b-gb200.yaml",           // 1F1B over 4 stages
       {{"training.parallelism.pp", "4"}}},
      {"llama3-70b-64gpu-tp8", "scenarios/llama3-70b-gb200.yaml",            // 64 micro-steps: big graph
       {{"system.gpus", "64"}, {"training.parallelism.tp", "8"}}},
      {"llama3-405b-16384gpu", "scenarios/llama3-405b-h100.yaml", {}},       // Meta's layout, 16,384 H100
      {"pipeline-2048mb-128gpu", "scenarios/llama3-405b-h100.yaml",          // the same layout on 128 H100:
       {{"system.gpus", "128"}}},                                            // DP 1, 2,048 micro-batches
  };
  return c;
}

// The case's scenario, or nothing (the benchmark marked as errored, which fails CTest's bench.smoke)
// when its file is missing.
std::optional<sim::Scenario> load_or_skip(benchmark::State& state, const Case& c) {
  if (!std::filesystem::exists(kSrc + "/" + c.file)) {
    state.SkipWithError("scenario file missing");
    return std::nullopt;
  }
  return sim::load_scenario(kSrc + "/" + c.file, c.sets);
}

// With the builder's layer templates (as a run builds it) or op by op (BuildGraphOpByOp/: the same graph);
// stamped: layers copied from a template per build.
void build_graph(benchmark::State& state, const Case* c, bool layer_templates) {
  const std::optional<sim::Scenario> loaded = load_or_skip(state, *c);
  if (!loaded) return;
  const sim::Scenario& sc = *loaded;
  std::size_t ops = 0;
  int stamped = 0;
  for (auto _ : state) {
    stamped = 0;
    auto g = racksim::workloads::build_training_graph(sc.model, sc.training, sc.system.spec,
                                                      racksim::workloads::BuildOptions{layer_templates, &stamped});
    ops = g.ops.size();
    benchmark::DoNotOptimize(g.ops.data());
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["stamped"] = stamped;
}
void BM_BuildGraph(benchmark::State& state, const Case* c) { build_graph(state, c, true); }
void BM_BuildGraphOpByOp(benchmark::State& state, const Case* c) { build_graph(state, c, false); }

void BM_Simulate(benchmark::State& state, const Case* c) {
  const std::optional<sim::Scenario> loaded = load_or_skip(state, *c);
  if (!loaded) return;
  const sim::Scenario& sc = *loaded;
  std::size_t ops = 0;
  for (auto _ : state) {
    auto r = sim::simulate(sc);
    ops = r.graph.ops.size();
    benchmark::DoNotOptimize(r.report);
  }
  state.counters["ops"] = static_cast<double>(ops);
}

// One point of scenarios/sweeps/llama3-70b-10k.yaml as a sweep runs it: load (presets cached per
// process), simulate without keeping the graph, the report. The base scenario's own layout (512 GPUs,
// TP 8, selective recompute, ZeRO-1, global batch 512: 8 micro-steps).
void BM_SweepPoint(benchmark::State& state) {
  const std::string file = kSrc + "/scenarios/sweeps/llama3-70b-10k.yaml";
  if (!std::filesystem::exists(file)) {
    state.SkipWithError("sweep file missing");
    return;
  }
  const auto spec = racksim::workflow::load_sweep(file);
  // system.gpus 512, tp 8, pp 1, selective, zero1, global batch 512.
  const std::size_t index = ((((3 * 4 + 3) * 5 + 0) * 5 + 1) * 4 + 1) * 5 + 2;
  for (auto _ : state) {
    auto r = racksim::workflow::run_point(spec, index);
    benchmark::DoNotOptimize(r.report);
  }
}

// Every 97th point of the 10k sweep (103 points: invalid ones, fits and does-not-fit, every PP),
// on one thread, no replays shared between points: the time per point (items/s) without the
// sweep's sharing.
void BM_Sweep10kSlice(benchmark::State& state) {
  const std::string file = kSrc + "/scenarios/sweeps/llama3-70b-10k.yaml";
  if (!std::filesystem::exists(file)) {
    state.SkipWithError("sweep file missing");
    return;
  }
  const auto spec = racksim::workflow::load_sweep(file);
  const auto points = racksim::workflow::shard_points(spec.size(), {0, 97});
  for (auto _ : state) {
    for (std::size_t i : points) {
      auto r = racksim::workflow::run_point(spec, i);
      benchmark::DoNotOptimize(r.report);
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(points.size()));
}

// racksim replay of a reference XLA module (Llama-style, full remat, one H200).
void BM_ReplayHlo(benchmark::State& state) {
  const std::string file = kSrc + "/calibration/data/h200-2026-11-29/m1_full.hlo.txt.gz";
  if (!std::filesystem::exists(file)) {
    state.SkipWithError("module missing");
    return;
  }
  for (auto _ : state) {
    auto r = racksim::sim::run_hlo(file, "h200-sxm", 0, {}).report;
    benchmark::DoNotOptimize(r);
  }
}

// Loading + simulating every point of a 16-point sweep of the 70B scenario on 1 or 2 threads.
void BM_Sweep16(benchmark::State& state) {
  const std::string text = "base: " + kSrc + "/scenarios/llama3-70b-gb200.yaml\n"
                           "vary:\n"
                           "  system.gpus: [256, 512]\n"
                           "  training.parallelism.tp: [4, 8]\n"
                           "  training.recompute: [selective, full]\n"
                           "  training.optimizer_sharding: [zero1, fsdp]\n";
  const auto spec = racksim::workflow::load_sweep_text(text, kSrc + "/scenarios/sweeps/bench.yaml");
  const auto points = racksim::workflow::shard_points(spec.size(), {});
  for (auto _ : state) {
    auto rows = racksim::workflow::run_sweep(spec, points, static_cast<int>(state.range(0)));
    benchmark::DoNotOptimize(rows.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(points.size()));
}

const bool registered = [] {
  for (const auto& c : cases()) {
    benchmark::RegisterBenchmark((std::string("BuildGraph/") + c.name).c_str(), BM_BuildGraph, &c)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("BuildGraphOpByOp/") + c.name).c_str(), BM_BuildGraphOpByOp, &c)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("Simulate/") + c.name).c_str(), BM_Simulate, &c)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("Sweep16/jobs", BM_Sweep16)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("SweepPoint/llama3-70b-10k", BM_SweepPoint)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("Sweep10kSlice/103points", BM_Sweep10kSlice)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("ReplayHlo/m1_full", BM_ReplayHlo)->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace
