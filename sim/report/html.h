// `--report FILE.html`: one self-contained page per run, compare or sweep. No network access is
// needed to view it: the CSS and the script are inline, the data is an inline JSON block, and
// the script draws the charts as inline SVG. When the charts are drawn the script sets
// data-rendered="ok" on the element #render-status (tests look for it; on a script error it
// reads "error" and shows the message).
//
// A run page shows the headline numbers, the step-time breakdown, the memory breakdown against
// capacity and a per-stream timeline of the step; a compare page shows both runs side by side
// (same scales) with the speedup; a sweep page charts tokens/s per GPU against the varied keys,
// marks points that do not fit, and lists the invalid points with their errors.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "sim/report/report.h"

namespace racksim::sim {

std::string html_run_report(const RunResult& run);
std::string html_compare_report(const RunResult& base, const RunResult& variant);

struct SweepPointView {
  std::vector<std::string> values;  // one per key
  nlohmann::json report;            // the run report (null for an invalid point)
  std::string error;                // why the point is invalid
};
std::string html_sweep_report(const std::string& sweep_file, const std::string& base_scenario,
                              const std::vector<std::string>& keys, const std::vector<SweepPointView>& points);

// The per-stream timeline of a replayed step, downsampled for drawing: lanes compute,
// communication, H2D, D2H and the host launch thread; each lane a list of segments
// [start_s, end_s, category, ops, label] where adjacent ops of one category closer than the
// resolution are merged, so a lane holds at most about `max_segments_per_lane` segments
// whatever the size of the graph.
nlohmann::json timeline_json(const workloads::OpGraph& g, const ReplayResult& r,
                             std::size_t max_segments_per_lane = 1500);

}  // namespace racksim::sim
