// The HTML reports of run, compare and sweep: self-contained (nothing fetched from the
// network), and they render in headless Chromium without script errors and with their charts.
//
// The rendering tests need Chromium and are skipped (with a message) when it is missing; it is
// large, so scripts/deps.sh installs it only with RACKSIM_CI=1, which scripts/test.sh (and so CI)
// sets. Otherwise:  apt-get install -y chromium
// (see docs/performance.md, "Looking at the reports").
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <unistd.h>

#include "sim/cli/cli.h"
#include "tests/unit/cli_util.h"

namespace {

using racksim::testing::run_cli;

std::string slurp(const std::string& path) { return racksim::testing::read_file(path); }

const std::string kQuickHtml = std::string(RACKSIM_SOURCE_DIR) + "/scenarios/quickstart.yaml";

std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}) {
    const std::string cmd = std::string("command -v ") + name + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return name;
  }
  return "";
}

struct Rendered {
  int status = -1;
  std::string dom, log;
};

// Loads the page headless and returns the DOM after the scripts ran, and Chromium's log (the
// page's console messages appear there as ":CONSOLE" lines).
Rendered render(const std::string& chromium, const std::string& page) {
  const std::string dir = ::testing::TempDir();
  const std::string dom = page + ".dom", log = page + ".log";
  const std::string cmd = "timeout 120 " + chromium +
                          " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                          " --disable-background-networking --disable-component-update --disable-sync"
                          " --enable-logging=stderr --v=0 --user-data-dir=$(mktemp -d " + dir +
                          "/chromium.XXXXXX) --dump-dom file://" + page + " >" + dom + " 2>" + log;
  Rendered r;
  r.status = std::system(cmd.c_str());
  r.dom = slurp(dom);
  r.log = slurp(log);
  return r;
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

void expect_self_contained(const std::string& html) {
  // The SVG namespace URI is an identifier, not a fetch.
  const std::string without_ns = std::regex_replace(html, std::regex("http://www\\.w3\\.org/2000/svg"), "");
  EXPECT_EQ(without_ns.find("http://"), std::string::npos);
  EXPECT_EQ(without_ns.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
}

void expect_rendered(const Rendered& r, std::size_t min_charts, const std::vector<std::string>& ids) {
  ASSERT_EQ(r.status, 0) << r.log;
  EXPECT_NE(r.dom.find("data-rendered=\"ok\""), std::string::npos) << r.dom.substr(0, 2000);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.dom, m, std::regex("data-charts=\"(\\d+)\""))) << "no chart count";
  EXPECT_GE(std::stoul(m[1]), min_charts);
  EXPECT_GE(count(r.dom, "<svg"), min_charts);
  for (const auto& id : ids) EXPECT_NE(r.dom.find("id=\"" + id + "\""), std::string::npos) << id;
  EXPECT_EQ(r.log.find(":CONSOLE"), std::string::npos) << "console output from the page:\n" << r.log;
}

class HtmlReport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // CTest runs each test of this suite in its own process, each writing these files first: a folder per
    // process, so that one test's set-up does not rewrite the reports while another reads them.
    const std::string d = ::testing::TempDir() + "/racksim_html_report_" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    run_ = d + "/report_run.html";
    compare_ = d + "/report_compare.html";
    sweep_ = d + "/report_sweep.html";
    const std::string sweep_file = d + "/report_sweep.yaml";
    std::ofstream(sweep_file) << "base: " << kQuickHtml
                              << "\nvary:\n  training.parallelism.tp: [1, 2, 3]\n"
                                 "  training.micro_batch: [1, 16]\n"
                                 "  training.recompute: [none, full]\n";
    codes_[0] = run_cli({"run", kQuickHtml, "--report", run_}).code;
    codes_[1] = run_cli({"compare", kQuickHtml, kQuickHtml, "--report", compare_}).code;
    codes_[2] = run_cli({"sweep", sweep_file, "--report", sweep_, "--out", d + "/report_sweep.csv"}).code;
  }
  static std::string run_, compare_, sweep_;
  static int codes_[3];
};
std::string HtmlReport::run_, HtmlReport::compare_, HtmlReport::sweep_;
int HtmlReport::codes_[3];

TEST_F(HtmlReport, WrittenAndSelfContained) {
  for (int c : codes_) EXPECT_EQ(c, 0);
  for (const auto& p : {run_, compare_, sweep_}) {
    const std::string html = slurp(p);
    ASSERT_FALSE(html.empty()) << p;
    EXPECT_EQ(html.rfind("<!doctype html>", 0), 0u);
    expect_self_contained(html);
    EXPECT_LT(html.size(), 2u << 20) << p;  // downsampled: small whatever the graph
  }
  const std::string sweep = slurp(sweep_);
  EXPECT_NE(sweep.find("must divide the model's heads"), std::string::npos);  // errors listed
  EXPECT_NE(sweep.find("\"f\":false"), std::string::npos);                   // a point that does not fit
}

TEST_F(HtmlReport, RunRendersInChromium) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (apt-get install -y chromium); skipping render check";
  const auto r = render(chromium, run_);
  expect_rendered(r, 3, {"chart-breakdown", "chart-memory", "chart-timeline"});
  EXPECT_GE(count(r.dom, "class=\"capacity-line\""), 1u);
}

TEST_F(HtmlReport, CompareRendersInChromium) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (apt-get install -y chromium); skipping render check";
  const auto r = render(chromium, compare_);
  expect_rendered(r, 4, {"chart-breakdown", "chart-memory", "chart-timeline", "speedup"});
  EXPECT_NE(r.dom.find("1.000\u00d7"), std::string::npos);
}

TEST_F(HtmlReport, SweepRendersInChromium) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (apt-get install -y chromium); skipping render check";
  const auto r = render(chromium, sweep_);
  expect_rendered(r, 1, {"chart-sweep", "sweep-errors", "sweep-x", "sweep-color"});
  EXPECT_GE(count(r.dom, "class=\"pt fits\""), 1u);
  EXPECT_GE(count(r.dom, "class=\"pt nofit\""), 1u);  // marked distinctly
  EXPECT_GE(count(r.dom, "class=\"invalid-count\""), 1u);
}

}  // namespace
