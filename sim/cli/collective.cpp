#include "sim/cli/collective.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <cmath>
#include <string_view>
#include <optional>
#include <sstream>

#include "hardware_models/collectives.h"
#include "hardware_models/system_preset.h"
#include "hardware_models/topology.h"
#include "core/units.h"
#include "input/diagnostics.h"
#include "input/yaml_reader.h"
#include "sim/report/report.h"

namespace racksim::cli {

using nlohmann::json;

namespace {

using input::input_error;

struct Prepared {
  hw::SystemSpec spec;
  hw::CollectiveOp op{};
  hw::CollectiveOptions opt;
};

// Loads the preset and checks op/algo/gpus, collecting every problem into `diag`.
Prepared prepare(const std::string& system, const std::string& op_s, const std::string& algo_s,
                 input::LoadSession& session) {
  Prepared p;
  auto& diag = session.diag;
  hw::load_system_preset(system, nullptr, std::nullopt, session.ctx, p.spec);
  const auto op = hw::collective_op_from_string(op_s);
  if (!op)
    diag.error({"--op", 0, 0}, "", fmt::format("unknown collective '{}'; expected {}", op_s,
                                               fmt::join(sim::names_in(hw::kCollectiveOpNames), " | ")));
  const auto algo = hw::collective_algorithm_from_string(algo_s);
  if (!algo)
    diag.error({"--algo", 0, 0}, "", fmt::format("unknown algorithm '{}'; expected {}", algo_s,
                                                 fmt::join(sim::names_in(hw::kCollectiveAlgorithmNames), " | ")));
  if (op) p.op = *op;
  if (algo) p.opt.algorithm = *algo;
  return p;
}

// A message per GPU of more than a petabyte is no collective a job runs (docs/decisions.md, "Input limits").
constexpr double kMaxCollectiveBytes = 1e15;

// nccl-tests' size with a plain number meaning bytes and K/M/G suffixes powers of 1024 (its -b
// 8 -e 8G); anything else goes through racksim's quantity parser (1GiB, 64MB).
// A decimal number only: std::stod also reads "nan", "inf", hexadecimal and leading spaces, which had given an empty
// table with exit 0 (-e nan passes every range check).
// Whether `text` is characters of `number_chars` followed by at most one other character (a unit suffix).
bool number_then_one_suffix(const std::string& text, const char* number_chars) {
  const std::size_t end = text.find_first_not_of(number_chars);
  return end == std::string::npos || end + 1 == text.size();
}

std::optional<double> nccl_size(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const std::size_t number_end = text.find_first_not_of("0123456789.eE+-");
  if (number_end == 0 || !number_then_one_suffix(text, "0123456789.eE+-")) return std::nullopt;
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    return std::nullopt;
  }
  if (!std::isfinite(v) || used != std::min(number_end, text.size())) return std::nullopt;
  const std::string rest = text.substr(used);
  if (rest.empty()) return v;
  if (rest.size() == 1) {
    switch (rest[0]) {
      case 'K': case 'k': return v * 1024.0;
      case 'M': case 'm': return v * 1024.0 * 1024.0;
      case 'G': case 'g': return v * 1024.0 * 1024.0 * 1024.0;
      case 'T': case 't': return v * 1024.0 * 1024.0 * 1024.0 * 1024.0;
      default: break;
    }
  }
  return std::nullopt;
}

double parse_bytes(const std::string& text, const char* option, input::Diagnostics& diag) {
  try {
    const double bytes = sim::parse_quantity(text, sim::QuantityKind::bytes);
    if (bytes > kMaxCollectiveBytes)
      diag.error({option, 0, 0}, "",
                 fmt::format("{} is more than the 1 PB per GPU racksim times (docs/decisions.md, \"Input limits\")", text));
    else if (bytes != std::floor(bytes))
      diag.error({option, 0, 0}, "", fmt::format("{} is {} bytes: a collective moves whole bytes", text, bytes));
    return bytes;
  } catch (const sim::UnitError& e) {
    // nccl-tests' own size (8G: GiB) is what -b/-e read; --bytes takes a quantity, and says so where the text is one
    // (a number and one of nccl_size's suffixes).
    if (std::string_view(option) == "--bytes" && !text.empty() && std::isalpha(static_cast<unsigned char>(text.back())) &&
        nccl_size(text)) {
      const std::string num = text.substr(0, text.size() - 1);
      const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
      diag.error({option, 0, 0}, "",
                 fmt::format("'{}': --bytes takes a size with its unit: {}{}iB (what nccl-tests' {}, which -b and -e "
                             "read, means) or {}{}B",
                             text, num, unit, text, num, unit));
    } else {
      diag.error({option, 0, 0}, "", e.what());
    }
  }
  return 0;
}

void check_gpus(int gpus, int stride, input::Diagnostics& diag) {
  // One GPU: NCCL returns after a launch and no transfer, which racksim does not time (it had printed 0 us as a result).
  if (gpus < 2 || gpus > hw::kMaxGpus)
    diag.error({fmt::format("--gpus {}", gpus), 0, 0}, "",
               fmt::format("must be between 2 and {} (a collective over one GPU moves nothing; {} is the most GPUs racksim "
                           "models, docs/decisions.md, \"Input limits\")",
                           hw::kMaxGpus, hw::kMaxGpus));
  else if (stride < 1 || (static_cast<int64_t>(gpus) - 1) * stride + 1 > hw::kMaxGpus)
    diag.error({fmt::format("--stride {}", stride), 0, 0}, "",
               fmt::format("must be at least 1, and the group's span (gpus - 1) x stride + 1 at most {} GPUs", hw::kMaxGpus));
}

double parse_nccl_size(const std::string& text, const char* option, input::Diagnostics& diag) {
  if (auto v = nccl_size(text)) return *v;
  // A number nccl_size could not read (1e400, a leading space) is no quantity either: say what -b/-e/-i take, where the
  // quantity parser would have said "missing unit".
  if (!text.empty() && number_then_one_suffix(text, "0123456789.eE+- ")) {
    diag.error({option, 0, 0}, "",
               fmt::format("'{}' is not a size nccl-tests reads: a finite decimal number of bytes, with K, M, G or T for "
                           "powers of 1024 (8, 64K, 8G)",
                           text));
    return 0;
  }
  return parse_bytes(text, option, diag);
}

hw::CollectiveCost estimate(const Prepared& p, double bytes, int gpus, int stride, const char* option) {
  try {
    return hw::estimate_collective(p.spec, p.op, bytes, hw::place_group(p.spec, gpus, stride), p.opt);
  } catch (const std::invalid_argument& e) {
    throw input_error(option, 0, 0, "", e.what());
  }
}

const char* nccl_tests_binary(hw::CollectiveOp op) {
  switch (op) {
    case hw::CollectiveOp::all_reduce: return "all_reduce_perf";
    case hw::CollectiveOp::all_gather: return "all_gather_perf";
    case hw::CollectiveOp::reduce_scatter: return "reduce_scatter_perf";
    case hw::CollectiveOp::all_to_all: return "alltoall_perf";
    case hw::CollectiveOp::broadcast: return "broadcast_perf";
    case hw::CollectiveOp::send_recv: return "sendrecv_perf";
  }
  return "perf";
}

// nccl-tests' number formatting (getFloatStr): 2 decimals if they fit the width, then 1, 0, exponent.
std::string float_str(double v, int width) {
  std::string s = fmt::format("{:{}.2f}", v, width);
  if (static_cast<int>(s.size()) <= width) return s;
  s = fmt::format("{:{}.1f}", v, width);
  if (static_cast<int>(s.size()) <= width) return s;
  s = fmt::format("{:{}.0f}", v, width);
  if (static_cast<int>(s.size()) <= width) return s;
  return width >= 7 ? fmt::format("{:{}.1e}", v, width) : fmt::format("{:{}.0e}", v, width);
}

}  // namespace

json collective_json(const std::string& system, int gpus, const std::string& op, const std::string& bytes_s,
                     const std::string& algo, int stride) {
  input::LoadSession session;
  Prepared p = prepare(system, op, algo, session);
  const double bytes = parse_bytes(bytes_s, "--bytes", session.diag);
  check_gpus(gpus, stride, session.diag);
  session.diag.throw_if_any();
  const hw::CollectiveCost c = estimate(p, bytes, gpus, stride, "--algo");
  return json{{"op", hw::to_string(p.op)},
              {"gpus", gpus},
              {"bytes", bytes},
              {"algorithm", hw::to_string(c.algorithm)},
              {"protocol", c.protocol},
              {"time_s", c.time_s},
              {"algbw_GBps", c.algbw_Bps / 1e9},
              {"busbw_GBps", c.busbw_Bps / 1e9}};
}

json collective_sweep_json(const CollectiveSweep& s) {
  input::LoadSession session;
  auto& diag = session.diag;
  Prepared p = prepare(s.system, s.op, s.algo, session);
  check_gpus(s.gpus, s.stride, diag);
  const std::size_t errors_before = diag.size();
  const double lo = parse_nccl_size(s.min_bytes, "-b", diag);
  const double hi = parse_nccl_size(s.max_bytes, "-e", diag);
  const bool sizes_read = diag.size() == errors_before;  // (a size that did not parse is not compared with the other)
  double step = 0;
  const std::size_t errors_before_step = diag.size();
  if (!s.step_bytes.empty()) step = parse_nccl_size(s.step_bytes, "-i", diag);
  const bool step_read = diag.size() == errors_before_step;
  if (sizes_read && lo < 1) diag.error({"-b", 0, 0}, "", "the smallest size must be at least 1 byte");
  if (sizes_read && hi < lo) diag.error({"-e", 0, 0}, "", "the largest size must not be smaller than -b");
  if (hi > kMaxCollectiveBytes)
    diag.error({"-e", 0, 0}, "", fmt::format("{} is more than the 1 PB per GPU racksim times (docs/decisions.md, \"Input limits\")", s.max_bytes));
  // A given factor, 0, negative and NaN too, must be > 1; not given, the default 2 or -i applies.
  if (s.factor && !(*s.factor > 1))
    diag.error({"-f", 0, 0}, "", fmt::format("the factor must be greater than 1, got {:g}", *s.factor));
  if (s.factor && !s.step_bytes.empty()) diag.error({"-i", 0, 0}, "", "give -f or -i, not both");
  if (!s.factor && !s.step_bytes.empty() && step_read && step < 1) diag.error({"-i", 0, 0}, "", "the step must be at least 1 byte");
  diag.throw_if_any();
  const double factor = s.factor ? *s.factor : (s.step_bytes.empty() ? 2.0 : 0.0);
  // nccl-tests' loop: size from -b to -e, times the factor or plus the step; count = size / 4
  // (float); the collectives whose buffers split over ranks round the count down to a multiple.
  const double word = 4;
  const auto ranks_split = p.op == hw::CollectiveOp::all_gather || p.op == hw::CollectiveOp::reduce_scatter ||
                           p.op == hw::CollectiveOp::all_to_all;
  const bool reduces = p.op == hw::CollectiveOp::all_reduce || p.op == hw::CollectiveOp::reduce_scatter;
  json rows = json::array();
  constexpr int kMaxRows = 10000;
  for (double size = lo; size <= hi; size = factor > 0 ? size * factor : size + step) {
    if (static_cast<int>(rows.size()) >= kMaxRows) {
      diag.error({"-e", 0, 0}, "", fmt::format("more than {} sizes; use a larger -f or -i", kMaxRows));
      diag.throw_if_any();
    }
    double count = std::floor(size / word);
    double bytes = count * word;
    double param_count = count;
    if (ranks_split) {
      param_count = std::floor(count / s.gpus);
      bytes = param_count * s.gpus * word;
    }
    const hw::CollectiveCost c = estimate(p, bytes, s.gpus, s.stride, "--algo");
    // nccl-tests' columns, and the --bytes mode's fields of the contract (docs/contracts.md: op, gpus, bytes, time_s), so
    // that one reader takes either mode's rows.
    rows.push_back({{"op", s.op},
                    {"gpus", s.gpus},
                    {"bytes", bytes},
                    {"time_s", c.time_s},
                    {"size", static_cast<std::int64_t>(bytes)},
                    {"count", static_cast<std::int64_t>(param_count)},
                    {"type", "float"},
                    {"redop", reduces ? "sum" : "none"},
                    {"root", p.op == hw::CollectiveOp::broadcast ? 0 : -1},
                    {"time_us", c.time_s * 1e6},
                    {"algbw_GBps", c.algbw_Bps / 1e9},
                    {"busbw_GBps", c.busbw_Bps / 1e9},
                    {"algorithm", hw::to_string(c.algorithm)},
                    {"protocol", c.protocol}});
  }
  return rows;
}

std::string nccl_tests_table(const CollectiveSweep& s, const json& rows) {
  const auto op = hw::collective_op_from_string(s.op);
  const std::string binary = op ? nccl_tests_binary(*op) : s.op;
  std::ostringstream o;
  const auto lo = rows.empty() ? 0 : rows.front()["size"].get<std::int64_t>();
  const auto hi = rows.empty() ? 0 : rows.back()["size"].get<std::int64_t>();
  o << fmt::format("# racksim {} prediction, not a measurement: {} on {} x {}, algorithm {} (racksim collective)\n",
                   sim::version(), s.op, s.gpus, s.system, s.algo);
  o << fmt::format("# Collective test starting: {}\n", binary);
  o << fmt::format("# nThread 1 nGpus {} minBytes {} maxBytes {} step: {}({}) warmup iters: 0 iters: 1 agg iters: 1 "
                   "validation: 0 graph: 0\n",
                   s.gpus, lo, hi, s.step_bytes.empty() ? fmt::format("{:g}", s.factor.value_or(2.0)) : s.step_bytes,
                   s.step_bytes.empty() ? "factor" : "bytes");
  o << "#\n# Using devices\n";
  for (int r = 0; r < s.gpus; ++r)
    o << fmt::format("#  Rank {:2} Group  0 Pid      0 on    racksim device {:2} [0000:00:00] {}\n", r, r, s.system);
  o << "#\n";
  o << fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          \n",
                   "", "", "", "", "");
  o << fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}\n", "size",
                   "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  o << fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}\n", "(B)",
                   "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  double bus_sum = 0;
  for (const auto& r : rows) {
    const std::string body = fmt::format("  {:>7}  {:>6}  {:>6}    N/A", float_str(r["time_us"].get<double>(), 7),
                                         float_str(r["algbw_GBps"].get<double>(), 6),
                                         float_str(r["busbw_GBps"].get<double>(), 6));
    o << fmt::format("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}{}{}\n", r["size"].get<std::int64_t>(),
                     r["count"].get<std::int64_t>(), r["type"].get<std::string>(), r["redop"].get<std::string>(),
                     r["root"].get<int>(), body, body);
    bus_sum += r["busbw_GBps"].get<double>();
  }
  o << fmt::format("# {:<20} : {} {}\n", "Out of bounds values", 0, "OK");
  o << fmt::format("# {:<20} : {:g} \n", "Avg bus bandwidth", rows.empty() ? 0.0 : bus_sum / rows.size());
  o << "#\n";
  o << fmt::format("# Collective test concluded: {}\n", binary);
  return o.str();
}

}  // namespace racksim::cli
