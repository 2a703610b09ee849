// Sweeps and validation suites: expansion order, sharding, thread-count independence, error
// rows, strict file loading, validate's table, JSON and exit codes, compare's JSON.
#include <gtest/gtest.h>
#include <unistd.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/units.h"
#include "sim/cli/cli.h"
#include "input/diagnostics.h"
#include "sim/run/run.h"
#include "sim/workflow/sweep.h"
#include "sim/workflow/thread_pool.h"
#include "sim/workflow/validate.h"
#include "tests/unit/cli_util.h"

using nlohmann::json;
namespace wf = racksim::workflow;
namespace sim = racksim::sim;

namespace {

using racksim::testing::run_cli;

namespace fs = std::filesystem;
const std::string kSrc = RACKSIM_SOURCE_DIR;
const std::string kQuick = kSrc + "/scenarios/quickstart.yaml";

// A file in a folder of this process under the test temp dir: ctest -j runs each test in a process of its
// own, and every process sets up the suite's files again, so a shared path would be rewritten while
// another process reads it.
std::string tmp_dir() {
  const std::string dir = ::testing::TempDir() + "/racksim_workflow_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  return dir;
}
std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = tmp_dir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::string load_error(const std::string& text, const std::string& label) {
  try {
    wf::load_sweep_text(text, label);
  } catch (const racksim::input::InputError& e) {
    return e.what();
  }
  return "";
}

// A sweep whose base is the shipped quickstart, named relative to a file in scenarios/sweeps/.
const std::string kLabel = kSrc + "/scenarios/sweeps/test.yaml";

}  // namespace

TEST(WorkflowSweep, ExpansionIsCartesianInFileOrderFirstKeySlowest) {
  const auto spec = wf::load_sweep_text(
      "base: ../quickstart.yaml\n"
      "vary:\n"
      "  training.parallelism.tp: [1, 2]\n"
      "  training.recompute: [none, selective, full]\n"
      "  training.offload: [{optimizer: true}]\n",
      kLabel);
  EXPECT_EQ(spec.base, kSrc + "/scenarios/quickstart.yaml");  // relative to the sweep file
  ASSERT_EQ(spec.size(), 6u);
  const std::vector<std::vector<std::string>> want = {
      {"1", "none", "{optimizer: true}"},  {"1", "selective", "{optimizer: true}"}, {"1", "full", "{optimizer: true}"},
      {"2", "none", "{optimizer: true}"},  {"2", "selective", "{optimizer: true}"}, {"2", "full", "{optimizer: true}"}};
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(wf::point_values(spec, i), want[i]) << i;
  const auto sets = wf::point_overrides(spec, 4);
  ASSERT_EQ(sets.size(), 3u);
  EXPECT_EQ(sets[0].key_path, "training.parallelism.tp");
  EXPECT_EQ(sets[0].value, "2");
  EXPECT_EQ(sets[1].value, "selective");
}

TEST(WorkflowSweep, ShardsPartitionThePointsInOrder) {
  EXPECT_EQ(wf::shard_points(10, {1, 3}), (std::vector<std::size_t>{1, 4, 7}));
  EXPECT_EQ(wf::shard_points(2, {3, 4}), (std::vector<std::size_t>{}));
  for (std::size_t total : {0u, 1u, 7u, 100u})
    for (int n = 1; n <= 5; ++n) {
      std::multiset<std::size_t> all;
      for (int k = 0; k < n; ++k)
        for (auto i : wf::shard_points(total, {k, n})) all.insert(i);
      ASSERT_EQ(all.size(), total);
      std::size_t expect = 0;
      for (auto i : all) EXPECT_EQ(i, expect++);
    }
  EXPECT_EQ(wf::parse_shard("0/1").count, 1);
  EXPECT_EQ(wf::parse_shard("3/4").index, 3);
  for (const char* bad : {"4/4", "1", "-1/2", "a/b", "1/0", "/2", "1/", " 1/2"})
    EXPECT_THROW(wf::parse_shard(bad), racksim::input::InputError) << bad;
}

TEST(WorkflowSweep, StrictLoadingNamesFileLineColumn) {
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  training.recompute: [none]\nvaryy: 1\n", kLabel),
            kLabel + ":4:1: error: varyy: unknown key 'varyy'; did you mean 'vary'?");
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  training.recompute: []\n", kLabel),
            kLabel + ":3:23: error: vary.training.recompute: the list of values is empty: a sweep needs at least one "
                     "value per key");
  // An empty list and a misspelt key are said together (the key had been hidden until the list was fixed).
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  system.presett: [h100-sxm]\n  training.recompute: []\n", kLabel),
            kLabel + ":4:23: error: vary.training.recompute: the list of values is empty: a sweep needs at least one "
                     "value per key\n" + kLabel + ":3:3: error: vary.system.presett: not a key of the base scenario: "
                     "unknown key 'presett'; did you mean 'preset'?");
  // A list of nulls only: its errors, and no probe of a key without values (a review found a segfault there).
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  training.parallelism.tp: [~]\n  training.recompte: [full]\n", kLabel),
            kLabel + ":3:29: error: vary.training.parallelism.tp[0]: expected a value, got nothing (null)\n" + kLabel +
                ":4:3: error: vary.training.recompte: not a key of the base scenario: unknown key 'recompte'; did you mean "
                "'recompute'?");
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  training.recompute: full\n", kLabel),
            kLabel + ":3:23: error: vary.training.recompute: expected a list of values ([a, b, ...]), got 'full'");
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary: {}\n", kLabel),
            kLabel + ":2:7: error: vary: needs at least one key path with a list of values");
  EXPECT_EQ(load_error("base: nowhere.yaml\nvary:\n  training.recompute: [full]\n", kLabel),
            kLabel + ":1:7: error: base: cannot open the base scenario 'nowhere.yaml' (looked for " + kSrc +
                "/scenarios/sweeps/nowhere.yaml)");
  // A key path the scenario does not have is reported at the key, with the loader's suggestion.
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  training.parallelism.tpp: [1, 2]\n", kLabel),
            kLabel + ":3:3: error: vary.training.parallelism.tpp: not a key of the base scenario: unknown key 'tpp'; "
                     "did you mean 'tp'?");
  // A value its key cannot take is reported at the value; a well-formed value that makes the layout impossible
  // (tp 3 does not divide the heads) stays a per-point error row.
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  training.parallelism.tp: [1, two]\n", kLabel),
            kLabel + ":3:32: error: vary.training.parallelism.tp: expected a whole number, got 'two'");
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  training.recompute: [none, sometimes]\n", kLabel),
            kLabel + ":3:30: error: vary.training.recompute: unknown value 'sometimes'; expected one of none | "
                     "selective | full | save_dots | {save: [...], offload: [...]}");
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  training.parallelism.tp: [1, 3]\n", kLabel), "");
  // A value outside its key's range, too (it had been an error row at every point that used it).
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  training.seq_len: [4096, -5]\n", kLabel),
            kLabel + ":3:28: error: vary.training.seq_len: must be between 1 and 100000000, got -5");
  // Units, as the contract says: a value without one, with one of another kind, or misspelt, at the value.
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  system.overrides.gpu.hbm_capacity: [80 GB, 80]\n", kLabel),
            kLabel + ":3:46: error: vary.system.overrides.gpu.hbm_capacity: missing unit: expected a size (e.g. 141 GB), "
                     "got '80'");
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  system.overrides.gpu.hbm_capacity: [80 GB/s]\n", kLabel),
            kLabel + ":3:39: error: vary.system.overrides.gpu.hbm_capacity: wrong unit: expected a size (e.g. 141 GB), got "
                     "a bandwidth '80 GB/s'");
  // A quantity that is no number at all, or negative, as well.
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  system.overrides.gpu.hbm_capacity: [abc GB]\n", kLabel),
            kLabel + ":3:39: error: vary.system.overrides.gpu.hbm_capacity: not a number: 'abc GB'");
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  system.overrides.gpu.hbm_capacity: [-1 GB]\n", kLabel),
            kLabel + ":3:39: error: vary.system.overrides.gpu.hbm_capacity: negative size '-1 GB'");
  // A preset name that names none (a red-team pass, 2026-12-07: it had been an error row at every point using it).
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  system.preset: [h200-sxm, h200]\n", kLabel),
            kLabel + ":3:29: error: vary.system.preset: unknown system preset 'h200'; did you mean 'h200-sxm'? (available: "
                     "b200, gb200-nvl72, gb300-nvl72, h100-sxm, h200-sxm, h800-sxm)");
  EXPECT_NE(load_error("base: ../quickstart.yaml\nvary:\n  model: [{preset: llama3-8b}, {preset: llama3-8bb}]\n", kLabel)
                .find(":3:32: error: vary.model: a value of this axis: unknown model preset 'llama3-8bb'"),
            std::string::npos);
  // A preset or calibration file that does not exist, the same (a review's finding: names were, paths were not).
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  model.preset: [llama3-8b, /nonexistent/m.yaml]\n", kLabel),
            kLabel + ":3:29: error: vary.model.preset: model file '/nonexistent/m.yaml' does not exist");
  // Every message the quantity parser throws is a value its key cannot take (the reader marks it so where it writes
  // it, input::DiagnosticKind; the sweep had matched the parser's message starts).
  for (const char* bad : {"", "abc GB", "4.8", "1,000 GB", "1 2 GB", "4 GBx", "4 xyzzy", "4 GB extra", "4 GB/s", "1e999 GB",
                          "-1 GB", "400 gb", "1 Gbit"}) {
    const std::string err =
        load_error(fmt::format("base: ../quickstart.yaml\nvary:\n  system.overrides.gpu.hbm_capacity: ['{}']\n", bad), kLabel);
    EXPECT_EQ(err.rfind(kLabel + ":3:39: error: vary.system.overrides.gpu.hbm_capacity: ", 0), 0u) << bad << ": " << err;
  }
  // A preset field's fixed lower bound and an empty preset name, the same (both had been an error row at every
  // point: their messages began with none of the words the sweep had looked for).
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  system.overrides.gpu.hbm_capacity: [80 GB, 0 GB]\n", kLabel),
            kLabel + ":3:46: error: vary.system.overrides.gpu.hbm_capacity: must be more than 0, got '0 GB'");
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  system.preset: [h200-sxm, '']\n", kLabel)
                .rfind(kLabel + ":3:29: error: vary.system.preset: an empty name: name a system preset", 0),
            0u);
  // An axis inside another's value: the rows would be labelled with a value that did not run.
  EXPECT_EQ(load_error("base: ../quickstart.yaml\nvary:\n  training.parallelism: [{tp: 1}]\n  training.parallelism.tp: [4]\n",
                       kLabel),
            kLabel + ":4:3: error: vary.training.parallelism.tp: 'training.parallelism.tp' and the axis "
                     "'training.parallelism' set the same key (one lies inside the other's value): vary one of them");
  // Every problem at once.
  const std::string many = load_error("vary:\n  a: []\n  b: 3\n", kLabel);
  EXPECT_EQ(lines(many).size(), 3u) << many;
}

TEST(WorkflowSweep, CsvQuotesOnlyWhenNeeded) {
  EXPECT_EQ(wf::csv_line({"a", "b,c", "say \"hi\"", ""}), "a,\"b,c\",\"say \"\"hi\"\"\",\n");
  EXPECT_EQ(wf::one_line("a\nb\n"), "a; b");
}

// The CSV columns cover every scalar of the run report, so a new report field cannot be left
// out of sweeps silently.
TEST(WorkflowSweep, ColumnsCoverEveryScalarOfTheReport) {
  auto r = run_cli({"run", kQuick, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json report = json::parse(r.out);
  std::vector<std::string> scalars;
  for (auto& [k, v] : report.items()) {
    if (k == "scenario" || k == "warnings" || k == "racksim_version" || k == "fits") continue;
    if (v.is_object()) {
      for (auto& [k2, v2] : v.items())
        if (v2.is_number()) scalars.push_back(k + "." + k2);
    } else if (v.is_number()) {
      scalars.push_back(k);
    }
  }
  const auto& cols = wf::report_columns();
  for (const auto& s : scalars) EXPECT_NE(std::find(cols.begin(), cols.end(), s), cols.end()) << s;
  for (const auto& c : cols) EXPECT_TRUE(wf::report_number(report, c).has_value()) << c;
}

TEST(WorkflowPool, RunsEveryItemOnceAndRethrows) {
  std::vector<int> hits(1000, 0);
  std::atomic<int> calls{0};
  std::size_t last_done = 0;
  wf::parallel_for(hits.size(), 3, [&](std::size_t i) { ++hits[i]; ++calls; },
                   [&](std::size_t d, std::size_t t) {
                     EXPECT_EQ(t, 1000u);
                     EXPECT_GE(d, last_done);
                     last_done = d;
                   });
  EXPECT_EQ(calls.load(), 1000);
  EXPECT_EQ(last_done, 1000u);
  for (int h : hits) EXPECT_EQ(h, 1);
  EXPECT_THROW(wf::parallel_for(50, 2, [](std::size_t i) { if (i == 7) throw std::runtime_error("x"); }),
               std::runtime_error);
}

class WorkflowSweepCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // tp = 3 does not divide the heads: those points are error rows.
    sweep_ = write_file("wf_sweep.yaml", "base: " + kQuick +
                                             "\nvary:\n  training.parallelism.tp: [1, 3, 2]\n"
                                             "  training.recompute: [none, full]\n");
  }
  static std::string sweep_;
};
std::string WorkflowSweepCli::sweep_;

TEST_F(WorkflowSweepCli, OneRowPerPointWithErrorRows) {
  auto r = run_cli({"sweep", sweep_});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");  // quiet when stderr is not a terminal
  const auto rows = lines(r.out);
  ASSERT_EQ(rows.size(), 7u);
  EXPECT_EQ(rows[0].rfind("point,training.parallelism.tp,training.recompute,step_time_s,tokens_per_s_per_gpu,", 0), 0u);
  EXPECT_EQ(rows[0].substr(rows[0].size() - 32), ",fits,error,warnings,calibration");
  // Each row names its calibration (a sweep over presets can mix a preset's default one with none); an error row none.
  EXPECT_EQ(rows[1].substr(rows[1].size() - 5), ",h200");
  EXPECT_EQ(rows[3].back(), ',');
  EXPECT_EQ(rows[1].rfind("0,1,none,", 0), 0u);
  EXPECT_EQ(rows[2].rfind("1,1,full,", 0), 0u);
  EXPECT_EQ(rows[3].rfind("2,3,none,,,", 0), 0u);  // error row: no numbers
  EXPECT_NE(rows[3].find("tp (3) must divide the model's heads (32)"), std::string::npos) << rows[3];
  EXPECT_EQ(rows[5].rfind("4,2,none,", 0), 0u);
  EXPECT_NE(rows[5].find(",true,"), std::string::npos);
  EXPECT_NE(rows[5].find(",true,,"), std::string::npos);  // valid row: empty error
}

// A point's caveats reach its row (they had been dropped: a layer split Megatron-LM refuses looked as clean as the rest),
// less what is the same on every point (the calibration's statement, the extrapolation).
TEST(WorkflowSweep, ARowCarriesItsPointsWarnings) {
  const std::string sweep = write_file("wf_sweep_warn.yaml", "base: " + kQuick +
                                                               "\nvary:\n  training.parallelism.pp: [2]\n"
                                                               "  training.parallelism.vp: [1, 3]\n");
  const auto r = run_cli({"sweep", sweep});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = lines(r.out);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].substr(rows[1].size() - 6), ",,h200");  // vp 1: nothing to say (then its calibration)
  EXPECT_NE(rows[2].find("model.layers 32 over 6 virtual pipeline stages (pp 2 x vp 3) do not divide"), std::string::npos)
      << rows[2];
  EXPECT_EQ(rows[2].find("calibration: "), std::string::npos) << rows[2];
  EXPECT_EQ(rows[2].find("micro-steps: simulated"), std::string::npos) << rows[2];
}

// A sweep caches replays by the report's scenario JSON: a model field missing from it (model.qk_norm was) gave
// every point of an axis over that field the first point's replay.
TEST(WorkflowSweep, PointsThatDifferOnlyInQkNormAreReplayedApart) {
  const std::string base =
      write_file("wf_qk_base.yaml", "name: qk\nsystem: {preset: h200-sxm, gpus: 8}\n"
                                    "model: {layers: 4, hidden: 4096, ffn_hidden: 12288, heads: 32, kv_heads: 4, "
                                    "head_dim: 128, vocab: 32000}\n"
                                    "training: {seq_len: 4096, global_batch: 8, micro_batch: 1}\n");
  const std::string sweep = write_file("wf_qk_sweep.yaml", "base: " + base + "\nvary:\n  model.qk_norm: [true, false]\n");
  auto r = run_cli({"sweep", sweep, "--jobs", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = lines(r.out);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].rfind("0,true,", 0), 0u) << rows[1];
  EXPECT_EQ(rows[2].rfind("1,false,", 0), 0u) << rows[2];
  auto step = [](const std::string& row) {
    const auto a = row.find(',', row.find(',') + 1) + 1;
    return std::stod(row.substr(a, row.find(',', a) - a));
  };
  EXPECT_GT(step(rows[1]), step(rows[2]));  // the q/k norms' kernels
  const auto alone = run_cli({"run", base, "--json", "--set", "model.qk_norm=false"});
  ASSERT_EQ(alone.code, 0) << alone.err;
  EXPECT_DOUBLE_EQ(step(rows[2]), nlohmann::json::parse(alone.out)["step_time_s"].get<double>());
}

TEST_F(WorkflowSweepCli, JobsDoNotChangeTheBytes) {
  auto a = run_cli({"sweep", sweep_, "--jobs", "1"});
  auto b = run_cli({"sweep", sweep_, "--jobs", "2"});
  auto c = run_cli({"sweep", sweep_, "--jobs", "5"});
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out, c.out);
}

TEST_F(WorkflowSweepCli, ShardsTogetherAreTheWhole) {
  const auto whole = lines(run_cli({"sweep", sweep_}).out);
  const std::string out0 = tmp_dir() + "/wf_shard0.csv";
  ASSERT_EQ(run_cli({"sweep", sweep_, "--shard", "0/2", "--out", out0, "--jobs", "2"}).code, 0);
  const auto s1 = lines(run_cli({"sweep", sweep_, "--shard", "1/2"}).out);
  std::ifstream f(out0);
  std::stringstream ss;
  ss << f.rdbuf();
  const auto s0 = lines(ss.str());
  ASSERT_EQ(s0.size(), 4u);
  ASSERT_EQ(s1.size(), 4u);
  EXPECT_EQ(s0[0], whole[0]);
  EXPECT_EQ(s1[0], whole[0]);
  for (std::size_t i = 1; i < whole.size(); ++i) EXPECT_EQ(whole[i], (i % 2 == 1 ? s0 : s1)[(i + 1) / 2]) << i;
  EXPECT_EQ(run_cli({"sweep", sweep_, "--shard", "2/2"}).code, 1);
  EXPECT_EQ(run_cli({"sweep", sweep_, "--jobs", "0"}).code, 1);
}

// Shard CSVs (a Slurm job array's) merge into the CSV and the HTML report one unsharded run writes.
TEST_F(WorkflowSweepCli, ShardCsvsMergeIntoOneReport) {
  const std::string d = tmp_dir();
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  auto whole = run_cli({"sweep", sweep_, "--report", d + "/wf_whole.html"});
  ASSERT_EQ(whole.code, 0) << whole.err;
  for (const char* k : {"0", "1", "2"})
    ASSERT_EQ(run_cli({"sweep", sweep_, "--shard", std::string(k) + "/3", "--out", d + "/wf_m" + k + ".csv"}).code, 0);
  // Any order of the files; the rows come out in point order.
  auto m = run_cli({"sweep", sweep_, "--merge", d + "/wf_m2.csv", d + "/wf_m0.csv", d + "/wf_m1.csv", "--report",
                    d + "/wf_merged.html"});
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_EQ(m.out, whole.out);
  EXPECT_EQ(slurp(d + "/wf_merged.html"), slurp(d + "/wf_whole.html"));
  // A shard written before the calibration column (2026-12-07), or also before the warnings column (2026-12-05), merges
  // with the others: its rows keep their figures, with an empty calibration cell (and no warnings).
  {
    const std::string text = slurp(d + "/wf_m1.csv");
    std::string older, oldest;
    for (std::size_t a = 0, b; (b = text.find('\n', a)) != std::string::npos; a = b + 1) {
      std::string row = text.substr(a, b - a);
      row = row.substr(0, row.rfind(','));  // drop calibration
      older += row + "\n";
      oldest += row.substr(0, row.rfind(',')) + "\n";  // and warnings
    }
    std::ofstream(d + "/wf_m1_older.csv") << older;
    std::ofstream(d + "/wf_m1_oldest.csv") << oldest;
    // The whole run's row with its last `n` cells emptied (these points' cells hold no commas).
    const auto emptied = [](std::string row, int n) {
      std::string tail;
      for (int i = 0; i < n; ++i) {
        row = row.substr(0, row.rfind(','));
        tail += ",";
      }
      return row + tail;
    };
    for (const auto& [f, gone] : {std::pair{"/wf_m1_older.csv", 1}, std::pair{"/wf_m1_oldest.csv", 2}}) {
      auto o = run_cli({"sweep", sweep_, "--merge", d + "/wf_m0.csv", d + f, d + "/wf_m2.csv"});
      ASSERT_EQ(o.code, 0) << f << o.err;
      const auto got = lines(o.out), want = lines(whole.out);
      ASSERT_EQ(got.size(), want.size()) << f;
      for (std::size_t i = 0; i < got.size(); ++i) {
        const bool from_old = want[i].rfind("1,", 0) == 0 || want[i].rfind("4,", 0) == 0;  // shard 1's points
        EXPECT_EQ(got[i], from_old ? emptied(want[i], gone) : want[i]) << f << " row " << i;
      }
    }
  }
  // A shard missing: the rows there are, and a warning.
  auto part = run_cli({"sweep", sweep_, "--merge", d + "/wf_m0.csv", d + "/wf_m1.csv"});
  ASSERT_EQ(part.code, 0) << part.err;
  EXPECT_EQ(lines(part.out).size(), 5u);
  EXPECT_NE(part.err.find("2 of the sweep's 6 points are in none of the 2 CSV files"), std::string::npos) << part.err;
  // Overlapping shards, another sweep's CSV, and --merge with --shard are errors (exit 1).
  auto twice = run_cli({"sweep", sweep_, "--merge", d + "/wf_m0.csv", d + "/wf_m0.csv"});
  EXPECT_EQ(twice.code, 1);
  EXPECT_NE(twice.err.find("point 0 is also in " + d + "/wf_m0.csv (line 2): shards must not overlap"),
            std::string::npos) << twice.err;
  const std::string other = write_file("wf_other.yaml", "base: " + kQuick + "\nvary:\n  training.micro_batch: [1, 2]\n");
  auto wrong = run_cli({"sweep", other, "--merge", d + "/wf_m0.csv"});
  EXPECT_EQ(wrong.code, 1);
  EXPECT_NE(wrong.err.find("not a CSV of the sweep"), std::string::npos) << wrong.err;
  EXPECT_EQ(run_cli({"sweep", sweep_, "--merge", d + "/wf_m0.csv", "--shard", "0/2"}).code, 1);
}

TEST_F(WorkflowSweepCli, InvalidSweepFileIsExitOne) {
  const auto bad = write_file("wf_bad_sweep.yaml", "base: " + kQuick + "\nvary:\n  training.recompute: nope\n");
  auto r = run_cli({"sweep", bad});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, bad + ":3:23: error: vary.training.recompute: expected a list of values ([a, b, ...]), got 'nope'\n");
}

// An output that names an input (the sweep file, its base) or the other output is refused before anything is opened:
// it had been emptied at the start of the run (exit 0, every row an error).
// A CSV write that fails (here /dev/full) leaves no report page behind: the page had been left empty beside a CSV cut
// mid-row on a full disk (a review's finding; a regular file that fails is removed as well, which a test cannot fill).
TEST_F(WorkflowSweepCli, AFailedWriteLeavesNoOutputBehind) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const std::string page = tmp_dir() + "/wf_full.html";
  fs::remove(page);
  const auto r = run_cli({"sweep", sweep_, "--out", "/dev/full", "--report", page});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("/dev/full: error: cannot write (--out): No space left on device"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(page));
}

TEST_F(WorkflowSweepCli, OutputsThatNameAnInputAreRefused) {
  const std::string copy = write_file("wf_sweep_copy.yaml", "base: " + kQuick + "\nvary:\n  training.recompute: [none]\n");
  const auto text_of = [](const std::string& path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const std::string before = text_of(copy);
  auto onto_sweep = run_cli({"sweep", copy, "--out", copy});
  EXPECT_EQ(onto_sweep.code, 1);
  EXPECT_NE(onto_sweep.err.find("--out: is the sweep file (" + copy + "): writing the output would destroy it"),
            std::string::npos) << onto_sweep.err;
  EXPECT_EQ(text_of(copy), before);
  const std::string out = tmp_dir() + "/wf_same.out";
  auto both = run_cli({"sweep", copy, "--out", out, "--report", out});
  EXPECT_EQ(both.code, 1);
  EXPECT_NE(both.err.find("--out and --report name the same file"), std::string::npos) << both.err;
}

// docs/contracts.md, "Self-describing": a report embeds the fully resolved scenario so that it can be run again. It had
// failed on its own record (system.resolved, model.name); now it reruns to the same step, a MoE scenario included.
TEST(WorkflowRun, TheReportsScenarioRunsAgainToTheSameStep) {
  for (const std::string& f : {kQuick, kSrc + "/scenarios/deepseek-v3-gb200.yaml"}) {
    const auto first = run_cli({"run", f, "--json"});
    ASSERT_EQ(first.code, 0) << first.err;
    const json report = json::parse(first.out);
    const std::string again = write_file("wf_rerun.json", report["scenario"].dump());
    const auto second = run_cli({"run", again, "--json"});
    ASSERT_EQ(second.code, 0) << second.err;
    EXPECT_EQ(json::parse(second.out)["step_time_s"], report["step_time_s"]) << f;
    EXPECT_NE(second.err.find("system.resolved is a report's record of the resolved preset and is not read"),
              std::string::npos) << second.err;
  }
}

// A --set replaces what stands at its path: a mapping given for the scenario's system.overrides drops the scenario's
// other overrides (a seed scenario's NVLink domain of 64 had gone back to the preset's 72 without a word). The run says
// so, once, with the per-entry form, which keeps them.
TEST(WorkflowRun, ASetThatReplacesAMappingSaysWhichKeysItDrops) {
  std::ifstream in(kQuick);
  std::string text(std::istreambuf_iterator<char>(in), {});
  const std::string marker = "  gpus: 8\n";
  ASSERT_NE(text.find(marker), std::string::npos);
  text.replace(text.find(marker), marker.size(), "  gpus: 8\n  overrides: {scale_up.domain_size: 4, scale_up.nvls: false}\n");
  const std::string file = write_file("wf_overrides.yaml", text);
  const auto domain_of = [](const std::string& out) {
    return json::parse(out)["scenario"]["system"]["resolved"]["scale_up"]["domain_size"].get<int>();
  };
  const auto whole = run_cli({"run", file, "--json", "--set", "system.overrides={launch.graph_launch: 2.5 us}"});
  ASSERT_EQ(whole.code, 0) << whole.err;
  EXPECT_EQ(domain_of(whole.out), 8);  // the preset's: the scenario's 4 is gone
  EXPECT_NE(whole.err.find("--set system.overrides={launch.graph_launch: 2.5 us}: replaces the whole mapping at "
                           "system.overrides, so its scale_up.domain_size, scale_up.nvls are no longer set; to change "
                           "one entry and keep the others, give system.overrides.KEY its value instead"),
            std::string::npos)
      << whole.err;
  const auto one = run_cli({"run", file, "--json", "--set", "system.overrides.launch.graph_launch=2.5 us"});
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(domain_of(one.out), 4);
  EXPECT_EQ(one.err.find("replaces the whole mapping"), std::string::npos) << one.err;
  // Setting a key the scenario does not have drops nothing.
  const auto fresh = run_cli({"run", kQuick, "--json", "--set", "system.overrides={scale_up.nvls: false}"});
  ASSERT_EQ(fresh.code, 0) << fresh.err;
  EXPECT_EQ(fresh.err.find("replaces the whole mapping"), std::string::npos) << fresh.err;
}

// system.overrides spelled more than one way (an audit of 2026-12-05): a nested value's dropped keys are named; a
// per-entry set replaces the file's dotted entry rather than adding a second spelling beside it; a duplicate key, or one
// field under two spellings, is refused (yaml-cpp ran the first, the report echoed the last).
TEST(WorkflowRun, OverridesAreSpelledOnce) {
  std::ifstream in(kQuick);
  const std::string quick(std::istreambuf_iterator<char>(in), {});
  const auto with = [&](const std::string& name, const std::string& overrides) {
    std::string text = quick;
    const std::string marker = "  gpus: 8\n";
    text.replace(text.find(marker), marker.size(), "  gpus: 8\n  overrides: " + overrides + "\n");
    return write_file(name, text);
  };
  const auto domain_of = [](const std::string& out) {
    return json::parse(out)["scenario"]["system"]["resolved"]["scale_up"]["domain_size"].get<int>();
  };
  const std::string nested = with("wf_nested.yaml", "{scale_up: {domain_size: 4}}");
  const auto inner = run_cli({"run", nested, "--json", "--set", "system.overrides={scale_up: {nvls: false}}"});
  ASSERT_EQ(inner.code, 0) << inner.err;
  EXPECT_EQ(domain_of(inner.out), 8);
  EXPECT_NE(inner.err.find("so its scale_up.domain_size is no longer set"), std::string::npos) << inner.err;

  const std::string dotted = with("wf_dotted.yaml", "{scale_up.domain_size: 4}");
  const auto entry = run_cli({"run", dotted, "--json", "--set", "system.overrides.scale_up.domain_size=2"});
  ASSERT_EQ(entry.code, 0) << entry.err;
  EXPECT_EQ(domain_of(entry.out), 2);
  EXPECT_EQ(json::parse(entry.out)["scenario"]["system"]["overrides"], json::parse(R"({"scale_up.domain_size": "2"})"));

  // A set's spelling replaces the file's other spelling of the same field, whatever their order (a review's finding:
  // the what-if had become an error), and a nested value holding the field drops nothing.
  for (const std::string set : {"system.overrides.domain_size=2", "system.overrides.scale_up={domain_size: 2}"}) {
    const auto other = run_cli({"run", dotted, "--json", "--set", set});
    ASSERT_EQ(other.code, 0) << set << ": " << other.err;
    EXPECT_EQ(domain_of(other.out), 2) << set;
    EXPECT_EQ(other.err.find("replaces the whole mapping"), std::string::npos) << other.err;
  }
  const auto held = run_cli({"run", dotted, "--json", "--set", "system.overrides={scale_up: {domain_size: 2}}"});
  ASSERT_EQ(held.code, 0) << held.err;
  EXPECT_EQ(domain_of(held.out), 2);
  EXPECT_EQ(held.err.find("replaces the whole mapping"), std::string::npos) << held.err;

  const auto twice = run_cli({"run", with("wf_dup.yaml", "{scale_up.domain_size: 4, scale_up.domain_size: 2}")});
  EXPECT_EQ(twice.code, 1);
  EXPECT_NE(twice.err.find("system.overrides.scale_up.domain_size: duplicate key"), std::string::npos) << twice.err;
  const auto spellings = run_cli({"run", with("wf_spell.yaml", "{scale_up: {domain_size: 4}, domain_size: 2}")});
  EXPECT_EQ(spellings.code, 1);
  EXPECT_NE(spellings.err.find("system.overrides.domain_size: sets scale_up.domain_size a second time (as "
                               "'domain_size' after 'scale_up.domain_size'): give each preset field once"),
            std::string::npos)
      << spellings.err;
}

// A key only the other framework's mode reads is accepted and said (it had been echoed as if modelled), in both
// directions, and only where the scenario gives it (scan_layers' default is echoed in every report).
TEST(WorkflowRun, KeysOfTheOtherFrameworkAreNoted) {
  const auto notes_of = [](const std::string& out) {
    std::vector<std::string> v;
    const json report = json::parse(out);
    for (const auto& w : report["warnings"])
      if (w.get<std::string>().find("changes nothing") != std::string::npos) v.push_back(w.get<std::string>());
    return v;
  };
  const auto plain = run_cli({"run", kQuick, "--json"});
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_TRUE(notes_of(plain.out).empty());
  const auto megatron = run_cli({"run", kQuick, "--json", "--set", "training.scan_layers=false", "--set",
                                 "training.xla_pipelined_collectives=true"});
  ASSERT_EQ(megatron.code, 0) << megatron.err;
  EXPECT_EQ(notes_of(megatron.out),
            (std::vector<std::string>{"training.scan_layers is XLA's (JAX mode); in Megatron mode it changes nothing",
                                      "training.xla_pipelined_collectives is XLA's (JAX mode); in Megatron mode it "
                                      "changes nothing"}));
  EXPECT_EQ(json::parse(megatron.out)["step_time_s"], json::parse(plain.out)["step_time_s"]);
  const auto jax = run_cli({"run", kQuick, "--json", "--set", "training.framework=jax", "--set",
                            "training.overlap_grad_reduce=true"});
  ASSERT_EQ(jax.code, 0) << jax.err;
  EXPECT_EQ(notes_of(jax.out),
            (std::vector<std::string>{"training.overlap_grad_reduce is Megatron's; in JAX mode it changes nothing"}));
  // A report echoes scan_layers, donate_state and the overlap switches whatever the mode: its scenario run again grows
  // no notes (a review's finding).
  for (const auto* run : {&plain, &jax}) {
    const std::string again = write_file("wf_again.json", json::parse(run->out)["scenario"].dump());
    const auto rerun = run_cli({"run", again, "--json"});
    ASSERT_EQ(rerun.code, 0) << rerun.err;
    EXPECT_EQ(notes_of(rerun.out).size(), run == &jax ? 1u : 0u) << rerun.out;  // jax: the overlap switch it was given
  }
}

// A calibration named by a file beside the scenario: the report's scenario names it by its absolute path, so the saved
// scenario reruns to the same step from another folder (a review found `mycal.yaml` echoed as written, which a rerun
// looked for beside the saved file).
TEST(WorkflowRun, ReportNamesACalibrationFileSoItsScenarioRerunsElsewhere) {
  const fs::path dir = fs::path(::testing::TempDir()) / "wf_cal_beside";
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  fs::copy_file(kSrc + "/hardware_models/calibrated/h100.yaml", dir / "sub" / "mycal.yaml");
  std::ofstream(dir / "sub" / "s.yaml") << "system: {preset: h100-sxm, gpus: 8, calibration: mycal.yaml}\n"
                                            "model: {preset: llama3-8b}\ntraining: {seq_len: 4096, global_batch: 8}\n";
  const auto first = run_cli({"run", (dir / "sub" / "s.yaml").string(), "--json"});
  ASSERT_EQ(first.code, 0) << first.err;
  const json report = json::parse(first.out);
  EXPECT_EQ(report["scenario"]["system"]["calibration"], (dir / "sub" / "mycal.yaml").lexically_normal().generic_string());
  std::ofstream(dir / "again.json") << report["scenario"].dump();
  const auto again = run_cli({"run", (dir / "again.json").string(), "--json"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(json::parse(again.out)["step_time_s"], report["step_time_s"]);
}

// tp_comm_overlap is Transformer Engine's userbuffers: in JAX mode it changes nothing, and says so. (Until 2026-12-08 it
// moved XLA's tensor-parallel collectives beside the next GEMM without splitting the GEMM, neither userbuffers nor
// XLA's collective matmul: the Llama 3 70B what-if at tp 4 came out 0.12% slower with the "overlap" on.)
TEST(WorkflowRun, TpCommOverlapChangesNothingInJaxMode) {
  const std::string file = kSrc + "/scenarios/llama3-70b-gb200.yaml";
  std::vector<json> reports;
  for (const char* v : {"false", "true"}) {
    const auto r = run_cli({"run", file, "--json", "--set", "training.framework=jax", "--set", "training.parallelism.tp=4",
                            "--set", "training.sequence_parallel=true", "--set", std::string("training.tp_comm_overlap=") + v});
    ASSERT_EQ(r.code, 0) << r.err;
    reports.push_back(json::parse(r.out));
  }
  EXPECT_EQ(reports[0]["step_time_s"], reports[1]["step_time_s"]);
  EXPECT_EQ(reports[0]["breakdown_s"], reports[1]["breakdown_s"]);
  const std::string note = "training.tp_comm_overlap is Transformer Engine's userbuffers (Megatron mode; XLA's collective "
                           "matmul is not modelled); in JAX mode it changes nothing";
  EXPECT_NE(reports[1]["warnings"].dump().find(note), std::string::npos) << reports[1]["warnings"].dump();
  EXPECT_EQ(reports[0]["warnings"].dump().find("tp_comm_overlap"), std::string::npos);
}

// Smaller traps an audit reproduced: an override of a datasheet fact nothing reads, a YAML merge key, a validate set:
// that gives a key twice.
TEST(WorkflowRun, SmallTrapsAreSaid) {
  const auto tdp = run_cli({"run", kQuick, "--json", "--set", "system.overrides.gpu.tdp=100 W"});
  ASSERT_EQ(tdp.code, 0) << tdp.err;
  EXPECT_NE(tdp.err.find("system.overrides.gpu.tdp: recorded, not modelled: no part of the step depends on gpu.tdp"),
            std::string::npos)
      << tdp.err;
  // gpu.sm_count moves only the collectives' SM share: a "fewer SMs" what-if is told where the rates are (a review found
  // sm_count 1 and 132 giving the same GEMM time without a word).
  const auto sms = run_cli({"run", kQuick, "--json", "--set", "system.overrides.gpu.sm_count=16"});
  ASSERT_EQ(sms.code, 0) << sms.err;
  EXPECT_NE(sms.err.find("system.overrides.gpu.sm_count: sets only the share of the SMs a collective's CTAs take beside "
                         "compute"),
            std::string::npos)
      << sms.err;
  // An empty names policy recomputes what the backward needs, not Megatron's whole layer: said (22% less recompute than
  // full at the same memory had looked like a free gain).
  const auto empty = run_cli({"run", kQuick, "--json", "--set", "training.recompute={}"});
  ASSERT_EQ(empty.code, 0) << empty.err;
  EXPECT_EQ(json::parse(empty.out)["warnings"][0],
            "training.recompute saves nothing by name: the backward recomputes what it needs (JAX's remat with nothing "
            "saveable), not the whole layer forward that Megatron's full recompute reruns (recompute: full)");
  std::ifstream in(kQuick);
  std::string text(std::istreambuf_iterator<char>(in), {});
  const std::string par = "  parallelism: {tp: 1, pp: 1, cp: 1, dp: auto}";
  ASSERT_NE(text.find(par), std::string::npos);
  text.replace(text.find(par), par.size(), "  parallelism: {<<: *par, tp: 1}");
  text = "defaults: &par {pp: 1}\n" + text;
  const auto merge = run_cli({"run", write_file("wf_merge.yaml", text)});
  EXPECT_EQ(merge.code, 1);
  EXPECT_NE(merge.err.find("training.parallelism.<<: YAML merge keys (<<: *anchor) are not supported"), std::string::npos)
      << merge.err;
  const std::string suite = write_file("wf_setdup.yaml", "cases:\n  - name: a\n    scenario: " + kQuick +
                                                             "\n    set: {training.micro_batch: 2, training.micro_batch: 4}"
                                                             "\n    measured: {step_time_s: 14.0}\n    tolerance: 0.5\n");
  const auto dup = run_cli({"validate", suite});
  EXPECT_EQ(dup.code, 1);
  EXPECT_NE(dup.err.find(":4:36: error: cases[0].set.training.micro_batch: duplicate key"), std::string::npos) << dup.err;
}

// host.framework_speed, a what-if for another host CPU: every host figure the report lists is divided by it, the GPU's
// front end (eager_kernel_gap) is not, and the step is the one the same figures give when each is set by hand.
TEST(WorkflowRun, HostFrameworkSpeedDividesEveryHostFigure) {
  const std::string row = kSrc + "/scenarios/validation/at_scale/megatron-gpt-1.7b.yaml";  // host-paced in racksim
  const auto base = run_cli({"run", row, "--json"});
  ASSERT_EQ(base.code, 0) << base.err;
  const json launch = json::parse(base.out)["scenario"]["system"]["resolved"]["launch"];
  const auto fast = run_cli({"run", row, "--json", "--set", "system.overrides.host.framework_speed=2"});
  ASSERT_EQ(fast.code, 0) << fast.err;
  const json fast_report = json::parse(fast.out);
  const json& resolved = fast_report["scenario"]["system"]["resolved"];
  EXPECT_EQ(resolved["host"]["framework_speed"], 2.0);
  std::vector<std::string> by_hand = {"run", row, "--json"};
  ASSERT_GT(launch.size(), 20u);  // every figure, not the seven the record once held
  for (const auto& [name, value] : launch.items()) {
    const double before = sim::parse_quantity(value.get<std::string>(), sim::QuantityKind::seconds);
    const double after = sim::parse_quantity(resolved["launch"][name].get<std::string>(), sim::QuantityKind::seconds);
    EXPECT_NEAR(after, name == "eager_kernel_gap" ? before : before / 2, 1e-3 * before) << name;
    if (name != "eager_kernel_gap")
      by_hand.insert(by_hand.end(), {"--set", fmt::format("system.overrides.launch.{}={:.9g} s", name, before / 2)});
  }
  const auto hand = run_cli(by_hand);
  ASSERT_EQ(hand.code, 0) << hand.err;
  const double step = fast_report["step_time_s"].get<double>();
  EXPECT_NEAR(json::parse(hand.out)["step_time_s"].get<double>(), step, 1e-6 * step);
  EXPECT_LT(step, 0.95 * json::parse(base.out)["step_time_s"].get<double>());  // a host-paced step moves
  const auto zero = run_cli({"run", row, "--set", "system.overrides.host.framework_speed=0"});
  EXPECT_EQ(zero.code, 1);
  EXPECT_NE(zero.err.find("system.overrides.host.framework_speed: must be between 0.01 and 100, got 0"), std::string::npos)
      << zero.err;
}

// --- validate ------------------------------------------------------------------------------

// A check on a job that does not fit in memory says so (it had passed with nothing on its line): validate's table and
// --json carry a note, compare prints one under its speedup.
TEST(WorkflowValidateSets, AJobThatDoesNotFitIsNoted) {
  const std::string big = "\n    set: {training.recompute: none, training.micro_batch: 4}";
  const std::string suite = write_file(
      "wf_nofit.yaml", "cases:\n  - name: big\n    scenario: " + kQuick + big +
                           "\n    measured: {step_time_s: 12.0}\n    tolerance: 0.5\n"
                           "  - name: cmp\n    compare: {base: " + kQuick + ", variant: " + kQuick + "}\n"
                           "    expect_speedup: [0.5, 2.0]\n");
  const auto r = run_cli({"validate", suite});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("note: case 'big': the prediction does not fit in memory (does not fit: peak 231.7 GB of HBM "
                       "against 149.4 GB)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("note: case 'cmp'"), std::string::npos) << r.out;
  const auto j = run_cli({"validate", suite, "--json"});
  const json rows = json::parse(j.out);
  const json& list = rows.is_array() ? rows : rows["cases"];
  EXPECT_TRUE(list[0].contains("note")) << j.out;
  EXPECT_FALSE(list[1].contains("note")) << j.out;
  const auto c = run_cli({"compare", kQuick, kQuick, "--variant-set", "training.recompute=none", "--variant-set",
                          "training.micro_batch=4"});
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("note: the variant does not fit in memory (its warnings say why): the speedup is of a job that "
                       "would not start"),
            std::string::npos)
      << c.out;
  // Sides of different sizes: the step's ratio beside the per-GPU speedup (an audit: 0.99 read as "no gain" where the
  // step halved).
  const auto wider = run_cli({"compare", kQuick, kQuick, "--variant-set", "system.gpus=16"});
  ASSERT_EQ(wider.code, 0) << wider.err;
  EXPECT_NE(wider.out.find("step time ratio (base / variant step time; the sides have 8 and 16 GPUs): 1.9"),
            std::string::npos)
      << wider.out;
  EXPECT_EQ(c.out.find("step time ratio"), std::string::npos) << c.out;  // same size: the speedup says it
  // The side's header says what its own sets changed (its scenario name is the file's).
  EXPECT_NE(c.out.find("== variant --variant-set training.recompute=none --variant-set training.micro_batch=4\n"),
            std::string::npos)
      << c.out;
}

// A tolerance is a fraction: 10 meant as 10% had passed a prediction 609% off with exit 0.
TEST(WorkflowValidateSets, AToleranceAboveOneIsRefused) {
  const std::string suite = write_file("wf_tol.yaml", "cases:\n  - name: a\n    scenario: " + kQuick +
                                                         "\n    measured: {step_time_s: 2.0}\n    tolerance: 10\n"
                                                         "  - name: b\n    scenario: " + kQuick +
                                                         "\n    measured: {step_time_s: 2.0}\n    tolerance: {step_time_s: 5}\n");
  const auto r = run_cli({"validate", suite});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(":5:16: error: cases[0].tolerance: a tolerance is a fraction of the measured value (0.10 is 10%), "
                       "at most 1; got 10, which would pass a prediction 1000% off (for 10%, write 0.1)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("cases[1].tolerance.step_time_s: a tolerance is a fraction"), std::string::npos) << r.err;
}

// A case's set: typo is reported at its place in the suite (it had been labelled '--set training.recompte=...:1:1').
TEST(WorkflowValidateSets, ACasesSetErrorNamesTheSuitesLine) {
  const std::string suite = write_file("wf_case_set.yaml", "cases:\n  - name: a\n    scenario: " + kQuick +
                                                               "\n    measured: {step_time_s: 14.2}\n    tolerance: 0.1\n"
                                                               "    set: {training.recompte: selective}\n");
  const auto r = run_cli({"validate", suite});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(suite + ":6:11: error: training.recompte: unknown key 'recompte'; did you mean 'recompute'?"),
            std::string::npos) << r.err;
  // A value its key cannot take, too (the value's own marks are those of its text alone).
  const std::string value = write_file("wf_case_set_value.yaml", "cases:\n  - name: a\n    scenario: " + kQuick +
                                                                      "\n    measured: {step_time_s: 14.2}\n    tolerance: 0.1\n"
                                                                      "    set: {training.recompute: bogus}\n");
  const auto v = run_cli({"validate", value});
  EXPECT_NE(v.err.find(value + ":6:11: error: training.recompute: unknown value 'bogus'"), std::string::npos) << v.err;
}

class WorkflowValidate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto r = run_cli({"run", kQuick, "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    capacity_ = json::parse(r.out)["memory_capacity_bytes"].get<double>();
  }
  // A suite of a measured case and a compare case; `cap_factor` scales the "measured" capacity.
  static std::string suite(double cap_factor, const std::string& name) {
    return write_file(name, fmt::format("cases:\n"
                                        "  - name: quickstart capacity\n"
                                        "    scenario: {}\n"
                                        "    measured: {{memory_capacity_bytes: {}, fits: true}}\n"
                                        "    tolerance: 0.10\n"
                                        "  - name: same scenario twice\n"
                                        "    compare:\n"
                                        "      base: {{scenario: {}, set: {{training.recompute: full}}}}\n"
                                        "      variant: {}\n"
                                        "    expect_speedup: [0.999, 1.001]\n",
                                        kQuick, capacity_ * cap_factor, kQuick, kQuick));
  }
  static double capacity_;
};
double WorkflowValidate::capacity_ = 0;

// The table is pinned except for the predicted capacity, which belongs to the preset.
TEST_F(WorkflowValidate, AllPassIsExitZeroWithTheTable) {
  auto r = run_cli({"validate", suite(1.0, "wf_pass.yaml")});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const std::string cap = fmt::format("{:.6g}", capacity_);
  const std::size_t pw = std::max<std::size_t>(9, cap.size()), mw = std::max<std::size_t>(14, cap.size());
  auto row = [&](const char* c, const char* f, const std::string& p, const std::string& m, const char* e,
                 const char* ok) {
    std::string l = fmt::format("{:<19}  {:<21}  {:>{}}  {:>{}}  {:>6}  {}", c, f, p, pw, m, mw, e, ok);
    while (l.back() == ' ') l.pop_back();
    return l + "\n";
  };
  EXPECT_EQ(r.out, row("case", "field", "predicted", "measured", " error", "pass") +
                       row(std::string(19, '-').c_str(), std::string(21, '-').c_str(), std::string(pw, '-'),
                           std::string(mw, '-'), "------", "----") +
                       row("quickstart capacity", "memory_capacity_bytes", cap, cap, "+0.00%", "yes") +
                       row("quickstart capacity", "fits", "true", "true", "-", "yes") +
                       row("same scenario twice", "speedup", "1", "[0.999, 1.001]", "+0.00%", "yes") +
                       "\n3 checks: 3 pass, 0 outside tolerance\n");
}

TEST_F(WorkflowValidate, OutsideToleranceIsExitFour) {
  auto r = run_cli({"validate", suite(1.25, "wf_fail.yaml")});
  EXPECT_EQ(r.code, 4) << r.out << r.err;
  EXPECT_NE(r.out.find("-20.00%  NO\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("outside tolerance"), std::string::npos);
}

TEST_F(WorkflowValidate, InvalidSuiteIsExitOne) {
  const auto bad = write_file("wf_bad_suite.yaml", "cases:\n"
                                                   "  - name: x\n"
                                                   "    scenario: " + kQuick + "\n"
                                                   "    measured: {step_time: 1.0}\n"
                                                   "    tolerence: 0.1\n");
  auto r = run_cli({"validate", bad});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, bad + ":5:5: error: cases[0].tolerence: unknown key 'tolerence'; did you mean 'tolerance'?\n" +
                       bad + ":4:16: error: cases[0].measured.step_time: 'step_time' is not a scalar field of the run "
                             "report; did you mean 'step_time_s'?\n");
  const auto no_tol = write_file("wf_no_tolerance.yaml", "cases:\n  - name: x\n    scenario: " + kQuick +
                                                             "\n    measured: {step_time_s: 1.0}\n");
  EXPECT_EQ(run_cli({"validate", no_tol}).err,
            no_tol + ":2:5: error: cases[0].tolerance: required key is missing (a relative tolerance such as 0.10, or "
                     "one per field)\n");
  // A non-positive measurement is an input error (exit 1), not a failed check: the check is relative to it.
  const auto nonpos = write_file("wf_nonpositive.yaml", "cases:\n  - name: x\n    scenario: " + kQuick +
                                                            "\n    measured: {step_time_s: -0.4}\n    tolerance: 0.1\n");
  const auto np = run_cli({"validate", nonpos});
  EXPECT_EQ(np.code, 1);
  EXPECT_EQ(np.err, nonpos + ":4:29: error: cases[0].measured.step_time_s: a measured step_time_s must be positive: the "
                             "check is the prediction's error relative to it, got '-0.4'\n");
  EXPECT_EQ(run_cli({"validate", write_file("wf_empty_suite.yaml", "cases: []\n")}).code, 1);
  EXPECT_EQ(run_cli({"validate", write_file("wf_nokind.yaml", "cases:\n  - name: a\n")}).code, 1);
}

// A replay case runs the HLO importer through the run layer, as `racksim replay` does: its path
// resolved against the suite file, its gpus and set: given to the job.
TEST_F(WorkflowValidate, ReplayCaseIsTheReplayReport) {
  const std::string module = kSrc + "/tests/fuzz/hlo_corpus/loop_gemm.hlo";
  const auto bad = write_file("wf_module.hlo.gz", "not really gzip");
  const auto s = write_file("wf_replay.yaml", "cases:\n"
                                              "  - name: replayed\n"
                                              "    replay: " + module + "\n"
                                              "    system: h200-sxm\n"
                                              "    gpus: 8\n"
                                              "    set: {system.calibration: none}\n"
                                              "    measured: {step_time_s: 0.5}\n"
                                              "    tolerance: 0.1\n"
                                              "  - name: not a module\n"
                                              "    replay: wf_module.hlo.gz\n"
                                              "    system: h200-sxm\n"
                                              "    measured: {step_time_s: 0.5}\n"
                                              "    tolerance: 0.1\n");
  const auto r = wf::run_suite(wf::load_suite(s));
  EXPECT_EQ(wf::exit_code(r), 1);
  ASSERT_EQ(r.rows.size(), 2u);
  const json direct = sim::run_hlo(module, "h200-sxm", 8, {"system.calibration=none"}).report;
  const json j = wf::to_json(r);
  EXPECT_EQ(j[0]["case"], "replayed");
  EXPECT_EQ(j[0]["field"], "step_time_s");
  EXPECT_EQ(j[0]["predicted"].get<double>(), direct["step_time_s"].get<double>());
  EXPECT_EQ(j[0]["pass"], false);
  // The module's path is resolved against the suite file.
  EXPECT_NE(r.rows[1].message.find(std::filesystem::path(bad).lexically_normal().string()), std::string::npos)
      << r.rows[1].message;
}

TEST_F(WorkflowValidate, JsonIsTheTableAsAList) {
  auto r = run_cli({"validate", suite(1.25, "wf_fail_json.yaml"), "--json"});
  EXPECT_EQ(r.code, 4);
  const json j = json::parse(r.out);
  ASSERT_EQ(j.size(), 3u);
  for (const auto& row : j)
    for (const char* k : {"case", "field", "predicted", "measured", "error", "pass"}) EXPECT_TRUE(row.contains(k)) << k;
  EXPECT_EQ(j[0]["pass"], false);
  EXPECT_NEAR(j[0]["error"].get<double>(), -0.2, 1e-9);
  EXPECT_EQ(j[1]["field"], "fits");
  EXPECT_TRUE(j[1]["error"].is_null());
  EXPECT_EQ(j[2]["field"], "speedup");
  EXPECT_TRUE(j[2]["measured"].is_array());
}

// A side's own override is named as given (--variant-set), and a file compared with itself keeps its lines: the second
// read of a file comes from the cache as a clone, which yaml-cpp makes without marks (both had been wrong: '--set' and
// 'quickstart.yaml:1:1').
TEST(WorkflowCompare, ErrorsNameTheSideAndTheLine) {
  const auto r = run_cli({"compare", kQuick, kQuick, "--variant-set", "training.parallelism.tp=3"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(kQuick + ":8:9: error: system.gpus: gpus (8) must be a multiple of tp"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--variant-set training.parallelism.tp=3: error: training.parallelism.tp: tp (3) must divide"),
            std::string::npos) << r.err;
  const auto b = run_cli({"compare", kQuick, kQuick, "--base-set", "training.recompute=nope"});
  EXPECT_NE(b.err.find("--base-set training.recompute=nope: error: training.recompute: unknown value 'nope'"),
            std::string::npos) << b.err;
}

TEST(WorkflowCompare, JsonHasBothReportsAndTheSpeedup) {
  auto r = run_cli({"compare", kQuick, kQuick, "--json", "--set", "training.recompute=none"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.size(), 3u);
  for (const char* side : {"base", "variant"})
    for (const char* k : {"scenario", "step_time_s", "tokens_per_s_per_gpu", "fits", "breakdown_s"})
      EXPECT_TRUE(j[side].contains(k)) << side << "." << k;
  EXPECT_DOUBLE_EQ(j["speedup"].get<double>(), j["variant"]["tokens_per_s_per_gpu"].get<double>() /
                                                   j["base"]["tokens_per_s_per_gpu"].get<double>());
}
