#include "calibration/fit/nccl_tests.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "hardware_models/system_spec.h"
#include "input/diagnostics.h"

namespace racksim::calib {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& file, const std::string& msg, int line = 0) {
  throw input::input_error(file, line, line > 0 ? 1 : 0, "", msg);
}

// "all_reduce_perf", "./build/alltoall_perf" -> racksim's op name; "" if none.
std::string op_from_program(std::string name) {
  name = fs::path(name).filename().string();
  if (name.ends_with("_perf")) name = name.substr(0, name.size() - 5);
  if (name.ends_with("_perf_mpi")) name = name.substr(0, name.size() - 9);
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"all_reduce", "all_reduce"}, {"allreduce", "all_reduce"},         {"all_gather", "all_gather"},
      {"allgather", "all_gather"},  {"reduce_scatter", "reduce_scatter"}, {"reducescatter", "reduce_scatter"},
      {"all_to_all", "all_to_all"}, {"alltoall", "all_to_all"},          {"broadcast", "broadcast"},
      {"send_recv", "send_recv"},   {"sendrecv", "send_recv"}};
  std::string lower = name;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& [k, v] : names)
    if (lower == k || lower.find(k) != std::string::npos) return v;
  return "";
}

std::vector<std::string> tokens(const std::string& s) {
  std::vector<std::string> t;
  std::istringstream ss(s);
  for (std::string w; ss >> w;) t.push_back(w);
  return t;
}

// `srun --label` prefixes every line with "RANK: ", `mpirun --tag-output` with "[JOB,RANK]<stdout>:".
std::string strip_label(const std::string& line) {
  if (line.size() > 2 && line[0] == '[') {
    const auto close = line.find("]<std");
    if (close != std::string::npos) {
      const auto colon = line.find(">:", close);
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  std::size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  std::size_t j = i;
  while (j < line.size() && std::isdigit(static_cast<unsigned char>(line[j]))) ++j;
  if (j > i && j < line.size() && line[j] == ':' && (j + 1 == line.size() || line[j + 1] == ' '))
    return line.substr(j + 1 < line.size() ? j + 2 : j + 1);
  return line;
}

struct Building {
  NcclTestsLog log;
  std::vector<std::string> header;
  int i_size = -1, i_time = -1, i_alg = -1, i_bus = -1, i_wrong = -1;
  int rank_lines = 0, nthread = 0, ngpus = 0, header_line = 0;
  bool started = false, closed = false;
};

// "#  Rank  0 Group  0 Pid 1207 on vm device  0 [0000:00:06] NVIDIA H200" -> "NVIDIA H200" (what follows the bus id).
std::string rank_device(const std::string& line) {
  const auto close = line.find(']');
  if (close == std::string::npos) return "";
  const auto b = line.find_first_not_of(' ', close + 1);
  if (b == std::string::npos) return "";
  const auto e = line.find_last_not_of(" \t");
  return line.substr(b, e + 1 - b);
}

std::vector<NcclTestsLog> parse_text(const std::string& text, const std::string& file_label) {
  std::vector<NcclTestsLog> out;
  Building b;
  bool prediction = false;  // `racksim collective` marks its tables in the file's first line
  auto finish = [&]() {
    if (!b.header.empty()) {
      const int64_t per_process = static_cast<int64_t>(std::max(1, b.nthread)) * b.ngpus;
      const int64_t gpus = b.rank_lines > 0 ? b.rank_lines : per_process;
      if (gpus > hw::kMaxGpus)
        fail(file_label, fmt::format("nccl-tests log of {} GPUs (nThread x nGpus): more than the {} racksim models", gpus,
                                     hw::kMaxGpus));
      // Every process lists its nThread x nGpus devices, so the Rank lines are a whole multiple of them (one process:
      // equal; MPI: one set per process): fewer, or not a multiple, is a log cut or pasted together.
      if (b.rank_lines > 0 && per_process > 0 && b.rank_lines % per_process != 0)
        fail(file_label,
             fmt::format("nccl-tests log lists {} '#  Rank' lines, but each process runs nThread x nGpus = {} GPUs: "
                         "the device list is cut or the log is pasted together",
                         b.rank_lines, per_process),
             b.header_line);
      b.log.gpus = static_cast<int>(gpus);
      b.log.prediction = prediction;
      b.log.complete = b.closed;
      out.push_back(b.log);
    }
    b = Building{};
  };
  std::istringstream in(text);
  std::string raw;
  int lineno = 0;
  while (std::getline(in, raw)) {
    ++lineno;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    const std::string line = strip_label(raw);
    const auto t = tokens(line);
    if (t.empty()) continue;
    if (lineno == 1 && line.find("racksim") != std::string::npos && line.find("prediction") != std::string::npos)
      prediction = true;
    if (t[0].front() == '#') {
      std::vector<std::string> body = t;
      if (body[0] == "#") body.erase(body.begin());
      else body[0] = body[0].substr(1);
      if (body.empty()) continue;
      // "# Collective test starting: all_reduce_perf": a new test.
      for (std::size_t i = 0; i + 1 < body.size(); ++i)
        if (body[i] == "starting:") {
          if (!b.header.empty() || !b.log.rows.empty()) finish();
          b.started = true;
          b.log.op = op_from_program(body[i + 1]);
        }
      if (body.size() >= 2 && body[0] == "Rank") {
        if (b.rank_lines++ == 0) b.log.device = rank_device(line);
      }
      if (!b.log.rows.empty() && body.size() >= 2 &&
          ((body[0] == "Out" && body[1] == "of") || (body[0] == "Avg" && body[1] == "bus")))
        b.closed = true;
      for (std::size_t i = 0; i + 1 < body.size(); ++i) {
        if (body[i] != "nThread" && body[i] != "nGpus") continue;
        // A count, not whatever atoi makes of it: 99999999999 GPUs is an error, not 1215752191.
        const std::string& v = body[i + 1];
        char* end = nullptr;
        errno = 0;
        const long long n = std::strtoll(v.c_str(), &end, 10);
        if (v.empty() || end != v.c_str() + v.size() || errno == ERANGE || n < 1 || n > hw::kMaxGpus)
          fail(file_label, fmt::format("nccl-tests '{} {}' is not a count from 1 to {}", body[i], v, hw::kMaxGpus), lineno);
        (body[i] == "nThread" ? b.nthread : b.ngpus) = static_cast<int>(n);
      }
      const bool has = std::find(body.begin(), body.end(), "size") != body.end() &&
                       std::find(body.begin(), body.end(), "algbw") != body.end() &&
                       std::find(body.begin(), body.end(), "busbw") != body.end();
      const auto time_it = std::find_if(body.begin(), body.end(), [](const std::string& s) { return s == "time" || s == "cputime"; });
      if (has && time_it != body.end()) {
        if (!b.header.empty() && !b.log.rows.empty()) {
          // A second table without its own "starting" line: a new test of the same program.
          const std::string op = b.log.op;
          finish();
          b.log.op = op;
        }
        b.header = body;
        auto index_of = [&](const std::string& name) -> int {
          for (std::size_t i = 0; i < body.size(); ++i)
            if (body[i] == name) return static_cast<int>(i);
          return -1;
        };
        b.i_size = index_of("size");
        b.i_time = static_cast<int>(time_it - body.begin());  // the first: out-of-place
        b.i_alg = index_of("algbw");
        b.i_bus = index_of("busbw");
        b.i_wrong = index_of("#wrong");
        b.header_line = lineno;
        b.log.time_column = *time_it;
      }
      continue;
    }
    if (b.header.empty()) continue;
    // A data row starts with its size in bytes; anything else (job output) is skipped.
    char* end = nullptr;
    const double size = std::strtod(t[0].c_str(), &end);
    if (end != t[0].c_str() + t[0].size()) continue;
    if (static_cast<int>(t.size()) <= std::max({b.i_size, b.i_time, b.i_alg, b.i_bus})) {
      // nccl-tests prints error lines between rows under some failures; a short numeric line is malformed.
      fail(file_label, fmt::format("nccl-tests row has {} columns; the header names {}", t.size(), b.header.size()), lineno);
    }
    auto value = [&](int i) {
      char* e = nullptr;
      const double v = std::strtod(t[i].c_str(), &e);
      if (e != t[i].c_str() + t[i].size() || !std::isfinite(v))
        fail(file_label, fmt::format("nccl-tests column '{}' is not a number: '{}'", b.header[i], t[i]), lineno);
      return v;
    };
    NcclTestsLog::Row r;
    r.bytes = size;
    r.time_s = value(b.i_time) * 1e-6;  // nccl-tests prints us
    r.algbw_Bps = value(b.i_alg) * 1e9;  // and GB/s
    r.busbw_Bps = value(b.i_bus) * 1e9;
    // No time or bandwidth is negative (calibrate read had listed a -5.00 us row; a 0.00 row, which nccl-tests prints
    // below its resolution, is read and left out of the fit, which says how many rows it could use).
    if (r.time_s < 0 || r.algbw_Bps < 0 || r.busbw_Bps < 0)
      fail(file_label, fmt::format("nccl-tests row of {} bytes: time {} us, algbw {}, busbw {}: not a measurement (a time "
                                   "or a bandwidth is never negative)",
                                   t[0], t[b.i_time], t[b.i_alg], t[b.i_bus]),
           lineno);
    // nccl-tests' check of the result (-c 1): a row with wrong elements measured a broken collective ("N/A": not checked).
    if (b.i_wrong >= 0 && b.i_wrong < static_cast<int>(t.size()) && t[b.i_wrong] != "N/A" && value(b.i_wrong) != 0)
      fail(file_label, fmt::format("nccl-tests row of {} bytes has #wrong = {}: the collective returned wrong results, "
                                   "so its time is not a measurement of NCCL",
                                   t[0], t[b.i_wrong]),
           lineno);
    // The time and the algorithm bandwidth are two prints of one measurement (algbw = size / time), each rounded to two
    // decimals; a row where they disagree is edited or its columns are shifted. (-C 1 prints the host's time beside
    // the GPU's bandwidth: not comparable.)
    if (b.log.time_column == "time" && r.time_s > 0) {
      const double implied_GBps = size / r.time_s / 1e9, printed_GBps = r.algbw_Bps / 1e9;
      const double rounding_GBps = 0.006 + implied_GBps * 0.006;  // both columns' last digit
      if (std::fabs(implied_GBps - printed_GBps) > rounding_GBps + 0.05 * printed_GBps)
        fail(file_label, fmt::format("nccl-tests row of {} bytes: time {} us gives {:.2f} GB/s, but its algbw column says "
                                     "{}: the columns disagree (edited, or shifted)",
                                     t[0], t[b.i_time], implied_GBps, t[b.i_alg]),
             lineno);
    }
    b.log.rows.push_back(r);
  }
  finish();
  return out;
}

double number(const json& j, const std::string& file, const char* what) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    char* e = nullptr;
    const std::string s = j.get<std::string>();
    const double v = std::strtod(s.c_str(), &e);
    if (e == s.c_str() + s.size() && std::isfinite(v)) return v;
  }
  fail(file, fmt::format("nccl-tests JSON: '{}' is not a number: {}", what, j.dump()));
}

// A whole count of 1 to 1,048,576 from the JSON's config (nthreads, ngpus); `fallback` when absent.
long long json_count(const json& cfg, const char* key, long long fallback, const std::string& file) {
  if (!cfg.contains(key)) return fallback;
  const double v = number(cfg[key], file, key);
  if (v != std::floor(v) || v < 1 || v > 1'048'576)
    fail(file, fmt::format("nccl-tests JSON: config.{} is {}, not a count of 1 to 1,048,576", key, cfg[key].dump()));
  return static_cast<long long>(v);
}

std::vector<NcclTestsLog> parse_json(const json& j, const std::string& file_label) {
  NcclTestsLog log;
  log.format = "json";
  if (j.contains("args") && j["args"].is_array() && !j["args"].empty() && j["args"][0].is_string())
    log.op = op_from_program(j["args"][0].get<std::string>());
  const json& cfg = j.contains("config") && j["config"].is_object() ? j["config"] : json::object();
  if (cfg.contains("devices") && cfg["devices"].is_array() && !cfg["devices"].empty()) {
    log.gpus = static_cast<int>(std::min<std::size_t>(cfg["devices"].size(), 1'048'577));
    // The device measured, as the text log's first "#  Rank" line names it (checked against the base preset).
    const json& d0 = cfg["devices"][0];
    if (d0.is_object() && d0.contains("device_info") && d0["device_info"].is_string())
      log.device = d0["device_info"].get<std::string>();
  } else {
    const long long gpus = json_count(cfg, "nthreads", 1, file_label) * json_count(cfg, "ngpus", 0, file_label);
    log.gpus = static_cast<int>(std::min<long long>(gpus, 1'048'577));  // (beyond the bound: refused where it is used)
  }
  if (!j["results"].is_array()) fail(file_label, "nccl-tests JSON: 'results' is not a list");
  for (const auto& r : j["results"]) {
    if (!r.is_object()) continue;
    const json* body = nullptr;
    if (r.contains("out_of_place") && r["out_of_place"].is_object()) body = &r["out_of_place"];
    else if (r.contains("in_place") && r["in_place"].is_object()) body = &r["in_place"];
    if (!body) continue;
    NcclTestsLog::Row row;
    row.bytes = number(r.value("size", json()), file_label, "size");
    if (body->contains("cpu_time")) {
      row.time_s = number((*body)["cpu_time"], file_label, "cpu_time") * 1e-6;
      log.time_column = "cputime";
    } else {
      row.time_s = number(body->value("time", json()), file_label, "time") * 1e-6;
    }
    row.algbw_Bps = number(body->value("alg_bw", json()), file_label, "alg_bw") * 1e9;
    row.busbw_Bps = number(body->value("bus_bw", json()), file_label, "bus_bw") * 1e9;
    if (row.time_s < 0 || row.algbw_Bps < 0 || row.busbw_Bps < 0)
      fail(file_label, fmt::format("nccl-tests JSON row of {} bytes: time {:g} us, alg_bw {:g}, bus_bw {:g}: not a "
                                   "measurement (a time or a bandwidth is never negative)",
                                   row.bytes, row.time_s * 1e6, row.algbw_Bps / 1e9, row.busbw_Bps / 1e9));
    // The text reader's checks of a row, on the same fields: the result check and the time against the bandwidth.
    if (body->contains("nwrong") && number((*body)["nwrong"], file_label, "nwrong") != 0)
      fail(file_label, fmt::format("nccl-tests JSON row of {} bytes has nwrong = {}: the collective returned wrong "
                                   "results, so its time is not a measurement of NCCL",
                                   row.bytes, (*body)["nwrong"].dump()));
    if (log.time_column == "time" && row.time_s > 0) {
      const double implied_GBps = row.bytes / row.time_s / 1e9, printed_GBps = row.algbw_Bps / 1e9;
      if (std::fabs(implied_GBps - printed_GBps) > 1e-6 + 0.05 * printed_GBps)  // (JSON keeps the digits nccl-tests had)
        fail(file_label, fmt::format("nccl-tests JSON row of {} bytes: time {} us gives {:.4g} GB/s, but its alg_bw says "
                                     "{}: the fields disagree (edited)",
                                     row.bytes, row.time_s * 1e6, implied_GBps, printed_GBps));
    }
    log.rows.push_back(row);
  }
  return {log};
}

}  // namespace

bool is_nccl_tests_json(const json& j) {
  return j.is_object() && !j.contains("schema") && j.contains("results") && (j.contains("config") || j.contains("nccl_version"));
}

std::vector<NcclTestsLog> parse_nccl_tests_output(const std::string& text, const std::string& file_label) {
  std::vector<NcclTestsLog> logs;
  const auto first = text.find_first_not_of(" \t\r\n");
  // A JSON document (-J); text that only starts like one (JSON lines, a log) is read as text.
  json j;
  bool is_json = false;
  if (first != std::string::npos && text[first] == '{') {
    try {
      j = json::parse(text);
      is_json = true;
    } catch (const json::exception&) {
    }
  }
  if (is_json) {
    if (!is_nccl_tests_json(j)) return {};
    logs = parse_json(j, file_label);
  } else {
    logs = parse_text(text, file_label);
  }
  // The file name names the test when the output does not (all_reduce_perf.log, alltoall_8gpu.txt).
  const std::string from_name = op_from_program(fs::path(file_label).stem().string());
  for (auto& l : logs)
    if (l.op.empty()) l.op = from_name;
  return logs;
}

json nccl_tests_json(const NcclTestsLog& log) {
  json rows = json::array();
  for (const auto& r : log.rows)
    rows.push_back({{"size", r.bytes}, {"time_us", r.time_s * 1e6}, {"algbw_GBps", r.algbw_Bps / 1e9},
                    {"busbw_GBps", r.busbw_Bps / 1e9}});
  return {{"op", log.op}, {"gpus", log.gpus}, {"time_column", log.time_column}, {"format", log.format}, {"rows", rows}};
}

double nccl_busbw_factor(const std::string& op, int gpus) {
  const double n = std::max(1, gpus);
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all") return (n - 1) / n;
  return 1.0;
}


std::optional<NcclTestsLog> parse_nccl_tests_log(const std::string& text, const std::string& file_label) {
  auto logs = parse_nccl_tests_output(text, file_label);
  if (logs.empty()) return std::nullopt;
  return logs.front();
}

}  // namespace racksim::calib
