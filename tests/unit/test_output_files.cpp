// What `run`, `compare`, `replay` and `sweep` write (an audit of the trace and the HTML report, 2026-12-05): an output
// may not name an input, another output or an empty path; a compressed trace that cannot be written says why, as an
// uncompressed one does; the HTML timeline of an extrapolated step spans what was replayed and says so.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "cli_util.h"
#include "input/files.h"
#include "sim/report/html.h"
#include "sim/report/report.h"
#include "sim/run/run.h"
#include "sim/scenario/scenario.h"

using namespace racksim;
namespace fs = std::filesystem;
using racksim::testing::read_file;
using racksim::testing::run_cli;

namespace {
const std::string kSrc = RACKSIM_SOURCE_DIR;
const std::string kQuick = kSrc + "/scenarios/quickstart.yaml";

}  // namespace

// A robustness pass's finding (2026-12-07): the guard covered the files on the command line only, so `--trace` over the
// model file a scenario names replaced it with trace JSON (exit 0), and the next run failed on it. Every file the
// scenario's load read is an input now: its model file, a calibration file named by --set, a preset file.
TEST(OutputFiles, OutputsMayNotNameAFileTheScenarioReads) {
  const std::string dir = ::testing::TempDir() + "/output_files_read";
  fs::create_directories(dir);
  const std::string model = dir + "/mymodel.yaml", scen = dir + "/s.yaml";
  fs::copy_file(kSrc + "/workloads/models/llama3-8b.yaml", model, fs::copy_options::overwrite_existing);
  {
    std::ofstream f(scen);
    f << "name: s\nsystem: {preset: h200-sxm, gpus: 8}\nmodel: {preset: mymodel.yaml}\n"
         "training: {seq_len: 8192, global_batch: 128, micro_batch: 1, precision: bf16, parallelism: {tp: 1, pp: 1, cp: 1, dp: auto}}\n";
  }
  const std::string before = read_file(model);
  for (const char* option : {"--trace", "--report"}) {
    const auto r = run_cli({"run", scen, option, model});
    EXPECT_EQ(r.code, 1) << option;
    EXPECT_EQ(r.err, model + ": error: " + option + ": is a file the scenario reads (" + model +
                         "): writing the output would destroy it\n");
  }
  EXPECT_EQ(run_cli({"compare", scen, kQuick, "--report", model}).code, 1);
  EXPECT_EQ(read_file(model), before);
  // A calibration file named by --set, the same way.
  const std::string cal = dir + "/cal.yaml";
  fs::copy_file(kSrc + "/hardware_models/calibrated/h200.yaml", cal, fs::copy_options::overwrite_existing);
  const std::string cal_before = read_file(cal);
  const auto c = run_cli({"run", kQuick, "--set", "system.calibration=" + cal, "--trace", cal});
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.err.find("--trace: is a file the scenario reads"), std::string::npos) << c.err;
  EXPECT_EQ(read_file(cal), cal_before);
  // And a trace beside them is written as before.
  EXPECT_EQ(run_cli({"run", scen, "--trace", dir + "/t.json"}).code, 0);
}

TEST(OutputFiles, OutputsMayNotNameInputsEachOtherOrNothing) {
  const std::string dir = ::testing::TempDir() + "/output_files";
  fs::create_directories(dir);
  const std::string scen = dir + "/scen.yaml";
  fs::copy_file(kQuick, scen, fs::copy_options::overwrite_existing);
  // The trace or the report over the scenario: refused, the scenario intact.
  for (const char* option : {"--trace", "--report"}) {
    const auto r = run_cli({"run", scen, option, scen});
    EXPECT_EQ(r.code, 1) << option;
    EXPECT_EQ(r.err, scen + ": error: " + option + ": is the scenario (" + scen + "): writing the output would destroy it\n");
  }
  EXPECT_EQ(read_file(scen), read_file(kQuick));
  // Both on one file: the trace had been lost under the report.
  const auto both = run_cli({"run", scen, "--trace", dir + "/same.json", "--report", dir + "/same.json"});
  EXPECT_EQ(both.code, 1);
  EXPECT_NE(both.err.find("--trace and --report name the same file"), std::string::npos) << both.err;
  // compare's report over a side.
  EXPECT_EQ(run_cli({"compare", scen, kQuick, "--report", scen}).code, 1);
  // An empty path had written nothing and said nothing.
  for (const char* option : {"--trace", "--report"}) {
    const auto r = run_cli({"run", scen, option, ""});
    EXPECT_EQ(r.code, 1) << option;
    EXPECT_NE(r.err.find(std::string(option) + ": an empty path: name a file"), std::string::npos) << r.err;
  }
  // A compressed trace that cannot be written names the reason, as an uncompressed one does.
  for (const char* name : {"/missing/x.json.gz", "/missing/x.json"}) {
    const auto r = run_cli({"run", scen, "--trace", dir + name});
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err, dir + name + ": error: cannot write (--trace): No such file or directory\n");
  }
}

// A red-team pass's finding (2026-12-07): two spellings of one file not yet written ("t.json" and "./t.json", a relative
// and an absolute path, a dangling symlink and its target) were taken for two files, so the report replaced the trace
// (or a sweep's CSV) with exit 0.
TEST(OutputFiles, OneFileSpelledTwoWaysIsOneFile) {
  const std::string dir = fs::weakly_canonical(::testing::TempDir() + "/output_spellings").string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string t = dir + "/t.json";
  EXPECT_TRUE(input::same_file(t, dir + "/./t.json"));
  EXPECT_TRUE(input::same_file(t, dir + "/missing/../t.json"));
  EXPECT_FALSE(input::same_file(t, dir + "/u.json"));
  fs::create_symlink(t, dir + "/link");  // dangling: writing the link writes t.json
  EXPECT_TRUE(input::same_file(dir + "/link", t));
  const fs::path cwd = fs::current_path();
  fs::current_path(dir);
  EXPECT_TRUE(input::same_file("t.json", "./t.json"));
  EXPECT_TRUE(input::same_file("t.json", t));
  EXPECT_FALSE(input::same_file("t.json", "u.json"));
  fs::current_path(cwd);
  const auto r = run_cli({"run", kQuick, "--trace", dir + "/./x.json", "--report", dir + "/x.json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--trace and --report name the same file"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir + "/x.json"));
}

// An interrupted trace (a review's findings, 2026-12-07): in the CLI's process a signal removes the output being
// written, only that regular file (a symlink to it is left), and a signal the process was started ignoring (nohup's
// SIGHUP) stays ignored. Each case runs in a child process, which the signal ends.
TEST(OutputFiles, AnInterruptedOutputIsRemovedAndIgnoredSignalsStayIgnored) {
  const std::string dir = ::testing::TempDir() + "/output_signals";
  fs::create_directories(dir);
  const auto in_child = [](const std::function<void()>& body) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      body();
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  };
  const std::string file = dir + "/t.json";
  std::ofstream(file) << "{\"traceEvents\":[";
  int status = in_child([&] {
    input::install_partial_output_cleanup();
    const input::PartialOutputGuard guard(file);
    ::raise(SIGTERM);
  });
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  EXPECT_FALSE(fs::exists(file));
  // Through a symlink: the link and its target stay.
  std::ofstream(file) << "{";
  fs::remove(dir + "/link");
  fs::create_symlink(file, dir + "/link");
  status = in_child([&] {
    input::install_partial_output_cleanup();
    const input::PartialOutputGuard guard(dir + "/link");
    ::raise(SIGTERM);
  });
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(fs::is_symlink(dir + "/link"));
  EXPECT_TRUE(fs::exists(file));
  // SIGHUP ignored at the start (nohup) stays ignored: the child runs on and exits 0, its output kept.
  status = in_child([&] {
    ::signal(SIGHUP, SIG_IGN);
    input::install_partial_output_cleanup();
    const input::PartialOutputGuard guard(file);
    ::raise(SIGHUP);
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(fs::exists(file));
  // Without install_partial_output_cleanup (the Python module), a guard does nothing.
  status = in_child([&] {
    const input::PartialOutputGuard guard(file);
    ::raise(SIGTERM);
  });
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(fs::exists(file));
}

// The quickstart's step is extrapolated from its first micro-steps: the timeline's ops end at the replayed span, which
// the page draws (and says), not at the step's end on the same axis.
TEST(OutputFiles, TimelineOfAnExtrapolatedStepSpansWhatWasReplayed) {
  const auto res = sim::simulate(sim::load_scenario(kQuick));
  const auto tl = sim::timeline_json(res.graph, res.replay);
  const double step = tl["step_time_s"].get<double>(), replayed = tl["replayed_s"].get<double>();
  EXPECT_GT(replayed, 0);
  EXPECT_LT(replayed, 0.5 * step);  // 3.6 of 14.2 s
  double last_end = 0;
  for (const auto& lane : tl["lanes"])
    for (const auto& seg : lane["segments"]) last_end = std::max(last_end, seg[1].get<double>());
  EXPECT_NEAR(last_end, replayed, 1e-6 * step);
  // --exact replays it all: the two meet.
  sim::SimulateOptions exact;
  exact.exact = true;
  const auto full = sim::simulate(sim::load_scenario(kQuick), exact);
  const auto tl2 = sim::timeline_json(full.graph, full.replay);
  EXPECT_NEAR(tl2["replayed_s"].get<double>(), tl2["step_time_s"].get<double>(), 1e-6 * step);
}

// The trace is written as it is built (a 256-GPU step replayed whole had held 9.4 GB as one JSON document): the file
// is the document's text, plain and gzip-compressed alike, and a write that fails leaves no file.
TEST(OutputFiles, TraceIsStreamedAsTheDocumentsText) {
  const auto res = sim::simulate(sim::load_scenario(kQuick));
  const std::string want = sim::make_trace(res.job, res.graph, res.replay).dump() + "\n";
  ASSERT_GT(want.size(), std::size_t{2} << 20);  // more than one of the writer's 1 MB pieces
  const std::string dir = ::testing::TempDir() + "/racksim_trace_stream";
  fs::create_directories(dir);
  sim::write_trace_file(dir + "/t.json", res.job, res.graph, res.replay);
  EXPECT_TRUE(read_file(dir + "/t.json") == want);
  sim::write_trace_file(dir + "/t.json.gz", res.job, res.graph, res.replay);
  gzFile gz = gzopen((dir + "/t.json.gz").c_str(), "rb");
  ASSERT_NE(gz, nullptr);
  std::string text;
  std::vector<char> buf(1 << 16);
  for (int n; (n = gzread(gz, buf.data(), static_cast<unsigned>(buf.size()))) > 0;) text.append(buf.data(), n);
  gzclose(gz);
  EXPECT_TRUE(text == want);
  EXPECT_LT(fs::file_size(dir + "/t.json.gz"), want.size() / 4);
  // /dev/full takes the open and refuses the first write: the error names it; a device is not removed.
  if (fs::exists("/dev/full")) {
    try {
      sim::write_trace_file("/dev/full", res.job, res.graph, res.replay);
      ADD_FAILURE() << "no error";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("cannot write (--trace): No space left on device"), std::string::npos)
          << e.what();
    }
    EXPECT_TRUE(fs::exists("/dev/full"));
  }
}
