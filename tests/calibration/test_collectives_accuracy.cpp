// Checks the collective model, on the shipped system presets (hardware_models/presets/), against public
// nccl-tests measurements. Nothing here feeds the model: every constant it uses is NCCL's or a datasheet's
// (collectives.cpp); these rows only check it. The figures are copied into the rows with their source:
//   B4.x  = shared reference hardware_specs.md section B4
//   PM9   = shared reference public_collective_gemm_measurements.md section 9
// The brief asks for all_reduce at 1 GiB and 1 MiB and all_gather / reduce_scatter at 1 GiB; where the public
// figure is at another size (B4.1 stops at 512 MiB, B4.2 ring/NVLS pairs are at 8-16 GiB) the row is evaluated at
// the published size. GB200 rows use the 4 GPUs of one tray where only tray data exists (B4.1, Azure ND GB200 v6).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "hardware_models/collectives.h"
#include "hardware_models/system_preset.h"
#include "input/diagnostics.h"
#include "sim/scenario/scenario.h"
#include "tests/unit/preset_util.h"

namespace racksim::hw {
namespace {

SystemSpec preset(const std::string& name) { return racksim::testing::shipped_preset(name); }
SystemSpec h100_sxm() { return preset("h100-sxm"); }
SystemSpec h200_sxm() { return preset("h200-sxm"); }
SystemSpec b200() { return preset("b200"); }
SystemSpec gb200_nvl72() { return preset("gb200-nvl72"); }
constexpr double MiB = 1024.0 * 1024.0, GiB = 1024.0 * MiB;

enum class Mode { auto_select, ring_nvls_off, nvls };

struct Row {
  SystemSpec sys;
  CollectiveOp op;
  double bytes;
  int n;
  Mode mode;
  double published_GBps;  // busbw
  const char* source;
  // A miss the model does not explain; the reason is in collectives.cpp's header. The test insists the list
  // stays true: a known miss that starts passing, or a new miss, fails it.
  bool known_miss = false;
};

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::auto_select: return "auto";
    case Mode::ring_nvls_off: return "ring/NVLS off";
    case Mode::nvls: return "nvls";
  }
  return "";
}

std::string size_name(double b) {
  char buf[32];
  if (b >= GiB) std::snprintf(buf, sizeof buf, "%g GiB", b / GiB);
  else std::snprintf(buf, sizeof buf, "%g MiB", b / MiB);
  return buf;
}

CollectiveCost run(const Row& r) {
  CollectiveOptions o;
  if (r.mode == Mode::ring_nvls_off) {
    o.nvls_enabled = false;
    o.algorithm = CollectiveAlgorithm::ring;
  } else if (r.mode == Mode::nvls) {
    o.algorithm = CollectiveAlgorithm::nvls;
  }
  return estimate_collective(r.sys, r.op, r.bytes, GroupPlacement{r.n, r.n, 1}, o);
}

std::vector<Row> table() {
  using O = CollectiveOp;
  const auto h100 = h100_sxm(), h200 = h200_sxm(), b2 = b200(), gb = gb200_nvl72();
  return {
      // ---- 8 x H100 SXM
      {h100, O::all_reduce, GiB, 8, Mode::auto_select, 466.35, "PM9 Azure ND H100 v5, NCCL 2.18.5 NVLS, 1G"},
      {h100, O::all_reduce, GiB, 8, Mode::nvls, 480.0, "B4.2 8xH100 GTC24/25 slide, NVLS (large)"},
      {h100, O::all_reduce, GiB, 8, Mode::ring_nvls_off, 370.0, "B4.2 8xH100 GTC24/25 slide, ring (large)"},
      {h100, O::all_reduce, MiB, 8, Mode::auto_select, 72.0, "B4.1 8xH100 AllReduce @1 MiB"},
      {h100, O::all_gather, 512 * MiB, 8, Mode::auto_select, 335.0, "B4.1 8xH100 AllGather @512 MiB"},
      {h100, O::reduce_scatter, 512 * MiB, 8, Mode::auto_select, 336.0, "B4.1 8xH100 ReduceScatter @512 MiB"},
      // ---- 8 x H200
      {h200, O::all_reduce, GiB, 8, Mode::auto_select, 467.58, "PM9 Azure ND H200 v5, NCCL 2.20.5 NVLS, 1G"},
      {h200, O::all_reduce, 8 * GiB, 8, Mode::nvls, 473.1, "B4.2 8xH200 8 GiB n=8, NVLS (NCCL 2.27.7)"},
      {h200, O::all_reduce, 8 * GiB, 8, Mode::ring_nvls_off, 365.6, "B4.2 8xH200 8 GiB n=8, NVLS off"},
      {h200, O::all_reduce, MiB, 8, Mode::auto_select, 70.0, "B4.1 8xH200 AllReduce @1 MiB"},
      {h200, O::all_gather, 512 * MiB, 8, Mode::auto_select, 337.0, "B4.1 8xH200 AllGather @512 MiB"},
      {h200, O::all_gather, 16 * GiB, 8, Mode::auto_select, 361.4, "B4.2 8xH200 AllGather 16 GiB (ring)"},
      {h200, O::reduce_scatter, 512 * MiB, 8, Mode::auto_select, 337.0, "B4.1 8xH200 ReduceScatter @512 MiB"},
      {h200, O::reduce_scatter, 16 * GiB, 8, Mode::auto_select, 362.9, "B4.2 8xH200 ReduceScatter 16 GiB (ring)"},
      // ---- 8 x B200
      {b2, O::all_reduce, GiB, 8, Mode::auto_select, 723.34, "PM9 ml-eng all_reduce_bench 8xB200 1 GiB (NCCL 2.27.7)"},
      {b2, O::all_reduce, 512 * MiB, 8, Mode::auto_select, 704.0, "B4.1 8xB200 AllReduce @512 MiB"},
      {b2, O::all_reduce, 8 * GiB, 8, Mode::nvls, 838.0, "B4.2 8xB200 8 GiB n=8, NVLS (NCCL 2.27.7)"},
      {b2, O::all_reduce, 8 * GiB, 8, Mode::ring_nvls_off, 682.2, "B4.2 8xB200 8 GiB n=8, NVLS off"},
      {b2, O::all_reduce, MiB, 8, Mode::auto_select, 61.0, "B4.1 8xB200 AllReduce @1 MiB"},
      {b2, O::all_gather, 512 * MiB, 8, Mode::auto_select, 617.0, "B4.1 8xB200 AllGather @512 MiB"},
      {b2, O::reduce_scatter, 512 * MiB, 8, Mode::auto_select, 613.0, "B4.1 8xB200 ReduceScatter @512 MiB"},
      // ---- GB200 NVL72: whole rack
      {gb, O::all_reduce, GiB, 72, Mode::auto_select, 681.17, "B4.2/PM9 CoreWeave NVL72 72 GPUs 1 GiB (NVLS)", true},
      {gb, O::all_reduce, 4 * GiB, 72, Mode::auto_select, 839.16, "B4.2/PM9 CoreWeave NVL72 72 GPUs 4 GiB (NVLS)"},
      {gb, O::all_reduce, 8 * GiB, 72, Mode::nvls, 850.0, "B4.2 GB200 NVL72 GTC25 slide, NVLS (large)"},
      {gb, O::all_reduce, 8 * GiB, 72, Mode::ring_nvls_off, 680.0, "B4.2 GB200 NVL72 GTC25 slide, non-SHARP (large)"},
      // ---- GB200: one compute tray (4 GPUs)
      {gb, O::all_reduce, GiB, 4, Mode::auto_select, 646.87, "PM9 Azure ND GB200 v6 4 GPUs 1G, Ring (NCCL 2.25.1)"},
      {gb, O::all_reduce, 512 * MiB, 4, Mode::auto_select, 628.0, "B4.1 GB200 tray AllReduce @512 MiB"},
      {gb, O::all_reduce, MiB, 4, Mode::auto_select, 80.0, "B4.1 GB200 tray AllReduce @1 MiB"},
      {gb, O::all_gather, 512 * MiB, 4, Mode::auto_select, 564.0, "B4.1 GB200 tray AllGather @512 MiB", true},
      {gb, O::reduce_scatter, 512 * MiB, 4, Mode::auto_select, 549.0, "B4.1 GB200 tray ReduceScatter @512 MiB", true},
  };
}

TEST(CollectiveAccuracy, PublicSingleDomainMeasurementsWithin15Percent) {
  const auto rows = table();
  std::printf("\n%-12s %-15s %-8s %3s %-14s %-22s %10s %10s %8s  %s\n", "system", "op", "size", "n", "requested",
              "chosen", "pred GB/s", "pub GB/s", "err %", "source");
  int misses = 0;
  for (const auto& r : rows) {
    const auto c = run(r);
    const double pred = c.busbw_Bps / 1e9;
    const double err = (pred - r.published_GBps) / r.published_GBps;
    const bool ok = std::fabs(err) <= 0.15;
    std::string chosen = to_string(c.algorithm) + "/" + c.protocol;
    std::printf("%-12s %-15s %-8s %3d %-14s %-22s %10.1f %10.1f %+7.1f%%  %s%s\n", r.sys.name.c_str(),
                to_string(r.op).c_str(), size_name(r.bytes).c_str(), r.n, mode_name(r.mode), chosen.c_str(), pred,
                r.published_GBps, 100 * err, r.source, ok ? "" : (r.known_miss ? "  [KNOWN MISS]" : "  [MISS]"));
    if (!ok) ++misses;
    EXPECT_EQ(ok, !r.known_miss) << r.sys.name << " " << to_string(r.op) << " " << size_name(r.bytes) << " n=" << r.n
                                 << ": predicted " << pred << " GB/s vs published " << r.published_GBps << " ("
                                 << r.source << ")";
  }
  std::printf("%d of %zu rows outside 15%%\n", misses, rows.size());
}

// Rows outside the brief's table: other GPU counts, mid sizes, all-to-all, several nodes, and our 2 x H200.
// Held to the same 15% with the misses listed, as above: a listed miss that starts passing, or a new miss,
// fails. Why they miss: the mid-size NVLS points approach NVLS's asymptote more slowly than NCCL's 25 us
// latency implies; all-to-all on Hopper and at 1-16 MiB (collectives.cpp header); multi-node results depend on
// fabrics, SHARP and tuner plugins the model does not see (20 racks); ours, 2 x H200 over NVLink, NVLS off
// (calibration/data/h200x2-2026-11-29-mechanisms/nccl/default.json): all-gather and reduce-scatter run
// 13-20% below the all-reduce ring on the same 24 channels, which NCCL's tuning model (and so this one) does
// not have; the README there shows the per-channel cause.
TEST(CollectiveAccuracy, OtherPublishedRowsWithin15PercentOrListed) {
  struct Info {
    SystemSpec sys;
    CollectiveOp op;
    double bytes;
    GroupPlacement g;
    bool nvls;
    double published;
    const char* source;
    bool known_miss = false;
  };
  const auto h100 = h100_sxm(), h200 = h200_sxm(), b2 = b200(), gb = gb200_nvl72(), gb3 = preset("gb300-nvl72");
  using O = CollectiveOp;
  const std::vector<Info> rows = {
      {h200, O::all_reduce, 8 * GiB, {5, 5, 1}, true, 414.2, "B4.2 8xH200 n=5 NVLS"},
      {h200, O::all_reduce, 8 * GiB, {6, 6, 1}, true, 435.6, "B4.2 8xH200 n=6 NVLS"},
      {h200, O::all_reduce, 8 * GiB, {7, 7, 1}, true, 460.0, "B4.2 8xH200 n=7 NVLS"},
      {b2, O::all_reduce, 8 * GiB, {7, 7, 1}, true, 811.2, "B4.2 8xB200 n=7 NVLS"},
      {h100, O::all_reduce, 16 * MiB, {8, 8, 1}, true, 241.0, "B4.1 8xH100 AllReduce @16 MiB", true},
      {h100, O::all_reduce, 64 * MiB, {8, 8, 1}, true, 362.0, "B4.1 8xH100 AllReduce @64 MiB", true},
      {b2, O::all_reduce, 16 * MiB, {8, 8, 1}, true, 296.0, "B4.1 8xB200 AllReduce @16 MiB"},
      {b2, O::all_reduce, 64 * MiB, {8, 8, 1}, true, 422.0, "B4.1 8xB200 AllReduce @64 MiB", true},
      // All-to-all (B4.1, NCCL 2.29.2), every size and system; misses: see collectives.cpp's header.
      {h100, O::all_to_all, MiB, {8, 8, 1}, true, 59.0, "B4.1 8xH100 AlltoAll @1 MiB"},
      {h100, O::all_to_all, 16 * MiB, {8, 8, 1}, true, 194.0, "B4.1 8xH100 AlltoAll @16 MiB", true},
      {h100, O::all_to_all, 64 * MiB, {8, 8, 1}, true, 265.0, "B4.1 8xH100 AlltoAll @64 MiB", true},
      {h100, O::all_to_all, 256 * MiB, {8, 8, 1}, true, 307.0, "B4.1 8xH100 AlltoAll @256 MiB", true},
      {h100, O::all_to_all, 512 * MiB, {8, 8, 1}, true, 315.0, "B4.1 8xH100 AlltoAll @512 MiB", true},
      {h200, O::all_to_all, MiB, {8, 8, 1}, true, 57.0, "B4.1 8xH200 AlltoAll @1 MiB"},
      {h200, O::all_to_all, 16 * MiB, {8, 8, 1}, true, 200.0, "B4.1 8xH200 AlltoAll @16 MiB", true},
      {h200, O::all_to_all, 64 * MiB, {8, 8, 1}, true, 268.0, "B4.1 8xH200 AlltoAll @64 MiB", true},
      {h200, O::all_to_all, 256 * MiB, {8, 8, 1}, true, 305.0, "B4.1 8xH200 AlltoAll @256 MiB", true},
      {h200, O::all_to_all, 512 * MiB, {8, 8, 1}, true, 311.0, "B4.1 8xH200 AlltoAll @512 MiB", true},
      {b2, O::all_to_all, MiB, {8, 8, 1}, true, 49.0, "B4.1 8xB200 AlltoAll @1 MiB", true},
      {b2, O::all_to_all, 16 * MiB, {8, 8, 1}, true, 293.0, "B4.1 8xB200 AlltoAll @16 MiB", true},
      {b2, O::all_to_all, 64 * MiB, {8, 8, 1}, true, 423.0, "B4.1 8xB200 AlltoAll @64 MiB"},
      {b2, O::all_to_all, 256 * MiB, {8, 8, 1}, true, 537.0, "B4.1 8xB200 AlltoAll @256 MiB"},
      {b2, O::all_to_all, 512 * MiB, {8, 8, 1}, true, 563.0, "B4.1 8xB200 AlltoAll @512 MiB"},
      {gb, O::all_to_all, MiB, {4, 4, 1}, true, 44.0, "B4.1 GB200 tray AlltoAll @1 MiB", true},
      {gb, O::all_to_all, 16 * MiB, {4, 4, 1}, true, 270.0, "B4.1 GB200 tray AlltoAll @16 MiB", true},
      {gb, O::all_to_all, 64 * MiB, {4, 4, 1}, true, 403.0, "B4.1 GB200 tray AlltoAll @64 MiB"},
      {gb, O::all_to_all, 256 * MiB, {4, 4, 1}, true, 470.0, "B4.1 GB200 tray AlltoAll @256 MiB"},
      {gb, O::all_to_all, 512 * MiB, {4, 4, 1}, true, 488.0, "B4.1 GB200 tray AlltoAll @512 MiB"},
      {gb3, O::all_to_all, MiB, {4, 4, 1}, true, 46.0, "B4.1 GB300 tray AlltoAll @1 MiB", true},
      {gb3, O::all_to_all, 16 * MiB, {4, 4, 1}, true, 273.0, "B4.1 GB300 tray AlltoAll @16 MiB", true},
      {gb3, O::all_to_all, 64 * MiB, {4, 4, 1}, true, 418.0, "B4.1 GB300 tray AlltoAll @64 MiB"},
      {gb3, O::all_to_all, 256 * MiB, {4, 4, 1}, true, 494.0, "B4.1 GB300 tray AlltoAll @256 MiB"},
      {gb3, O::all_to_all, 512 * MiB, {4, 4, 1}, true, 512.0, "B4.1 GB300 tray AlltoAll @512 MiB"},
      // Ours, 2 x H200 NV18, default NCCL settings (calibration/data/h200x2-2026-11-29-mechanisms/nccl/default.json;
      // the per-channel rate the model uses comes from the ch2/ch4/ch8 runs of the same folder, not these).
      {h200, O::all_to_all, MiB, {2, 2, 1}, false, 20.0, "ours 2xH200 all_to_all 1 MiB", true},
      {h200, O::all_to_all, 16 * MiB, {2, 2, 1}, false, 159.6, "ours 2xH200 all_to_all 16 MiB"},
      {h200, O::all_to_all, 64 * MiB, {2, 2, 1}, false, 240.8, "ours 2xH200 all_to_all 64 MiB"},
      {h200, O::all_to_all, 256 * MiB, {2, 2, 1}, false, 279.3, "ours 2xH200 all_to_all 256 MiB"},
      {h200, O::all_to_all, GiB, {2, 2, 1}, false, 329.7, "ours 2xH200 all_to_all 1 GiB"},
      {h200, O::send_recv, MiB, {2, 2, 1}, false, 42.4, "ours 2xH200 send_recv 1 MiB", true},
      {h200, O::send_recv, 16 * MiB, {2, 2, 1}, false, 203.3, "ours 2xH200 send_recv 16 MiB"},
      {h200, O::send_recv, 64 * MiB, {2, 2, 1}, false, 271.2, "ours 2xH200 send_recv 64 MiB"},
      {h200, O::send_recv, 256 * MiB, {2, 2, 1}, false, 306.4, "ours 2xH200 send_recv 256 MiB"},
      {h200, O::send_recv, GiB, {2, 2, 1}, false, 358.3, "ours 2xH200 send_recv 1 GiB"},
      {h100, O::all_reduce, 8 * GiB, {16, 8, 1}, true, 430.0, "B4.3 2 H100 nodes, NVLS on (RoCE, NCCL 2.19.3)"},
      {h100, O::all_reduce, 8 * GiB, {16, 8, 1}, false, 330.0, "B4.3 2 H100 nodes, NVLS off"},
      {h100, O::all_reduce, 8 * GiB, {32, 8, 1}, true, 320.0, "B4.3 >=4 H100 nodes"},
      {h100, O::all_reduce, 8 * GiB, {64, 8, 1}, true, 386.56, "B4.3 8 H100 nodes IB+SHARP CollNetChain (not modelled)"},
      {b2, O::all_reduce, 4 * GiB, {32, 8, 1}, true, 377.3, "B4.3 4 x P6-B200 EFA (PyTorch bench)"},
      {gb, O::all_reduce, 16 * GiB, {144, 72, 1}, true, 810.41, "B4.3 2 NVL72 racks, IB+SHARP"},
      {gb, O::all_reduce, 16 * GiB, {1440, 72, 1}, true, 405.74, "B4.3 20 NVL72 racks", true},
      {gb, O::all_reduce, 16 * GiB, {24, 8, 1}, false, 393.66, "PM9 nccl#1801 GB200 3 NVL8 partitions, ring"},
      {h200, O::all_reduce, GiB, {2, 2, 1}, false, 332.6, "ours 2xH200 all_reduce 1 GiB (NCCL 2.28.3)"},
      {h200, O::all_reduce, 4 * GiB, {2, 2, 1}, false, 350.2, "ours 2xH200 all_reduce 4 GiB"},
      {h200, O::all_gather, GiB, {2, 2, 1}, false, 273.2, "ours 2xH200 all_gather 1 GiB", true},
      {h200, O::all_gather, 4 * GiB, {2, 2, 1}, false, 305.6, "ours 2xH200 all_gather 4 GiB", true},
      {h200, O::reduce_scatter, GiB, {2, 2, 1}, false, 268.7, "ours 2xH200 reduce_scatter 1 GiB", true},
      {h200, O::reduce_scatter, 4 * GiB, {2, 2, 1}, false, 296.6, "ours 2xH200 reduce_scatter 4 GiB", true},
  };
  std::printf("\n%-12s %-14s %-8s %5s %4s %-20s %10s %10s %8s  %s\n", "system", "op", "size", "n", "ppn", "chosen",
              "pred GB/s", "pub GB/s", "err %", "source");
  int misses = 0;
  for (const auto& r : rows) {
    CollectiveOptions o;
    o.nvls_enabled = r.nvls;
    const auto c = estimate_collective(r.sys, r.op, r.bytes, r.g, o);
    const double pred = c.busbw_Bps / 1e9;
    const double err = (pred - r.published) / r.published;
    const bool ok = std::fabs(err) <= 0.15;
    std::string chosen = to_string(c.algorithm) + "/" + c.protocol;
    std::printf("%-12s %-14s %-8s %5d %4d %-20s %10.1f %10.1f %+7.1f%%  %s%s\n", r.sys.name.c_str(),
                to_string(r.op).c_str(), size_name(r.bytes).c_str(), r.g.ranks, r.g.ranks_per_domain, chosen.c_str(),
                pred, r.published, 100 * err, r.source, ok ? "" : (r.known_miss ? "  [KNOWN MISS]" : "  [MISS]"));
    if (!ok) ++misses;
    EXPECT_GT(pred, 0) << r.source;
    EXPECT_EQ(ok, !r.known_miss) << r.sys.name << " " << to_string(r.op) << " " << size_name(r.bytes) << " n="
                                 << r.g.ranks << ": predicted " << pred << " GB/s vs published " << r.published << " ("
                                 << r.source << ")";
  }
  std::printf("%d of %zu rows outside 15%%\n", misses, rows.size());
}

// GPUDirect-TCPX on Google's A3 High (a3-highgpu-8g: 8 x H100, 4 x 200 Gb/s NICs), as the MaxText at-scale rows
// describe it (their system block: 100 Gb/s per GPU, scale_out.nic_efficiency). Public nccl-tests runs over 2 VMs
// (16 ranks, NCCL_ALGO=Ring, NCCL_PROTO=Simple):
//   all_reduce: skypilot-org/skypilot@9a3aa4d9 examples/gcp_gpu_direct_tcpx/README.md (TCPX plugin 3.1.8)
//   all_gather: dstackai/dstack@6f6b421b examples/clusters/a3high/README.md (NCCL_BUFFSIZE 4 MiB, COS image)
// The all-reduce rows set the efficiency (their mean busbw / the VMs' 100 GB/s of NICs): they must stay within 5%.
// At line rate, as racksim ran TCPX before, the ring's busbw is NCCL's 8 channels x 12 GB/s = 96 GB/s, +42..+46%.
// The all-gather runs at 0.50 of line rate where the all-reduce runs at 0.67; its settings differ (half the NCCL
// buffer, another image) and no run pairs the two collectives on one setup, so it is a known miss, pinned.
TEST(CollectiveAccuracy, GpuDirectTcpxOnA3HighMatchesNcclTests) {
  const auto scenario = sim::load_scenario(std::string(RACKSIM_SOURCE_DIR) +
                                           "/scenarios/validation/at_scale/maxtext-llama2-7b-16xh100.yaml");
  const SystemSpec& a3 = scenario.system.spec;
  ASSERT_LT(a3.scale_out.nic_efficiency, 1.0);
  struct TcpxRow {
    CollectiveOp op;
    double bytes;
    double published_GBps;  // busbw
    double lo, hi;          // predicted / published must lie in [lo, hi]
  };
  const std::vector<TcpxRow> rows = {
      {CollectiveOp::all_reduce, 256 * MiB, 67.82, 0.95, 1.05},
      {CollectiveOp::all_reduce, 512 * MiB, 67.09, 0.95, 1.05},
      {CollectiveOp::all_reduce, GiB, 66.20, 0.95, 1.05},
      {CollectiveOp::all_reduce, 2 * GiB, 65.72, 0.95, 1.05},
      {CollectiveOp::all_gather, GiB, 49.27, 1.25, 1.40},      // known miss (see above)
      {CollectiveOp::all_gather, 8 * GiB, 50.17, 1.25, 1.40},  // known miss
  };
  CollectiveOptions ring;
  ring.algorithm = CollectiveAlgorithm::ring;
  ring.protocol = CollectiveProtocol::simple;
  for (const auto& r : rows) {
    const auto c = estimate_collective(a3, r.op, r.bytes, {16, 8, 1}, ring);
    const double ratio = c.busbw_Bps / 1e9 / r.published_GBps;
    EXPECT_GE(ratio, r.lo) << to_string(r.op) << " " << size_name(r.bytes) << ": " << c.busbw_Bps / 1e9 << " GB/s";
    EXPECT_LE(ratio, r.hi) << to_string(r.op) << " " << size_name(r.bytes) << ": " << c.busbw_Bps / 1e9 << " GB/s";
  }
  // The transport's rate bounds the data, not NCCL's plan: the same ring on InfiniBand-like NICs of this line rate
  // (efficiency 1) is NCCL's 96 GB/s, and a 2-rank replica all-reduce (one GPU per VM) moves 0.667 x 12.5 GB/s.
  SystemSpec line = a3;
  line.scale_out.nic_efficiency = 1.0;
  EXPECT_NEAR(estimate_collective(line, CollectiveOp::all_reduce, GiB, {16, 8, 1}, ring).busbw_Bps / 1e9, 96.0, 3.0);
  const auto pair = estimate_collective(a3, CollectiveOp::all_reduce, 101e6, {2, 1, 1});
  EXPECT_NEAR(pair.busbw_Bps / 1e9, 0.667 * 12.5, 0.3) << to_string(pair.algorithm);
}

}  // namespace
}  // namespace racksim::hw
