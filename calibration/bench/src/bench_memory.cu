// HBM bandwidth (device-to-device cudaMemcpy and a copy kernel) and pinned host<->device
// bandwidth (each direction alone, and both at once on two streams).
#include <cstring>

#include "common.h"

namespace rb {
namespace {

std::vector<size_t> pow2_sizes(size_t lo, size_t hi, size_t factor) {
  std::vector<size_t> v;
  for (size_t s = lo; s <= hi; s *= factor) v.push_back(s);
  if (v.empty() || v.back() != hi) v.push_back(hi);
  return v;
}

Json copy_result(const Stats& bat, const Stats& iso, size_t bytes_moved, int inner) {
  Json j = Json::object();
  j["s"] = stats_json(bat);
  j["GBps"] = rate_json(bat, static_cast<double>(bytes_moved), 1e9);
  j["isolated_s"] = stats_json(iso);
  j["isolated_GBps_median"] = iso.median > 0 ? bytes_moved / iso.median / 1e9 : 0.0;
  j["inner"] = inner;
  return j;
}

}  // namespace

Json bench_hbm(Context& ctx) {
  Json out = Json::object();
  size_t max = ctx.opt.quick ? std::min<size_t>(ctx.opt.hbm_max_bytes, 256 * MiB) : ctx.opt.hbm_max_bytes;
  size_t free_b = 0, total_b = 0;
  RB_CUDA(cudaMemGetInfo(&free_b, &total_b));
  while (max > MiB && 2 * std::max(max, 512 * MiB) + GiB > free_b) max /= 2;
  const size_t pool = std::max(max, 512 * MiB);
  out["bytes_counted"] = "read + write: GBps = 2 * size / s";
  out["timing"] =
      "s: inner copies in one CUDA graph replay / inner (back-to-back); isolated_s: one copy between events after a "
      "stream synchronize. Copies rotate over a pool of " + fmt_bytes(pool) +
      " per side so that small sizes are not served from L2.";
  out["kernel"] = "grid-stride 16-byte loads/stores, 4 loads in flight per thread, 512 threads, 4 blocks per SM";
  char *src = nullptr, *dst = nullptr;
  RB_CUDA(cudaMalloc(&src, pool));
  RB_CUDA(cudaMalloc(&dst, pool));
  cudaStream_t s;
  RB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  fill_bytes(src, pool, 99, s);
  RB_CUDA(cudaMemsetAsync(dst, 0, pool, s));
  RB_CUDA(cudaStreamSynchronize(s));

  // Correctness of the copy kernel, including a ragged tail.
  {
    const size_t n = MiB + 5;
    copy_kernel(src, dst, n, ctx.prop.multiProcessorCount, s);
    RB_CUDA(cudaStreamSynchronize(s));
    std::vector<char> a(n), b(n);
    RB_CUDA(cudaMemcpy(a.data(), src, n, cudaMemcpyDeviceToHost));
    RB_CUDA(cudaMemcpy(b.data(), dst, n, cudaMemcpyDeviceToHost));
    bool ok = std::memcmp(a.data(), b.data(), n) == 0;
    out["kernel_check"] = ok ? "pass" : "FAIL";
    if (!ok) ctx.warn("hbm copy kernel produced a wrong copy");
  }

  const int reps = ctx.opt.reps;
  const double target = ctx.opt.quick ? 0.5e-3 : 2e-3;
  Json res = Json::array();
  for (size_t size : pow2_sizes(MiB, max, ctx.opt.quick ? 4 : 2)) {
    const int nslots = static_cast<int>(std::min<size_t>(pool / size, 256));
    Json r = Json::object();
    r["bytes"] = static_cast<long long>(size);
    r["slots"] = nslots;
    try {
      Enqueue mc = [&](cudaStream_t st, int i) {
        size_t off = static_cast<size_t>(i % nslots) * size;
        RB_CUDA(cudaMemcpyAsync(dst + off, src + off, size, cudaMemcpyDeviceToDevice, st));
      };
      Enqueue kc = [&](cudaStream_t st, int i) {
        size_t off = static_cast<size_t>(i % nslots) * size;
        copy_kernel(src + off, dst + off, size, ctx.prop.multiProcessorCount, st);
      };
      for (int which = 0; which < 2; ++which) {
        const Enqueue& op = which == 0 ? mc : kc;
        Stats iso = time_isolated(s, 2, reps, op);
        int inner = pick_inner(iso.median, target, 512);
        Stats bat = time_graph_batch(s, inner, reps, op);
        r[which == 0 ? "memcpy" : "kernel"] = copy_result(bat, iso, 2 * size, inner);
        ctx.check_ceiling(std::string("hbm ") + (which == 0 ? "memcpy " : "kernel ") + fmt_bytes(size) + " max",
                          bat.min > 0 ? 2.0 * size / bat.min : 0, ctx.ceil.hbm_Bps * 1.0, "B/s");
        std::printf("hbm %-6s %8s  %9.2f us  %7.1f GB/s (r+w)  iso %9.2f us\n", which == 0 ? "memcpy" : "kernel",
                    fmt_bytes(size).c_str(), bat.median * 1e6, 2.0 * size / bat.median / 1e9, iso.median * 1e6);
      }
    } catch (const std::exception& e) {
      r["error"] = e.what();
      cudaGetLastError();
    }
    res.push(r);
  }
  std::fflush(stdout);
  out["results"] = res;
  cudaStreamDestroy(s);
  cudaFree(src);
  cudaFree(dst);
  return out;
}

Json bench_host(Context& ctx) {
  Json out = Json::object();
  size_t max = ctx.opt.quick ? std::min<size_t>(ctx.opt.host_max_bytes, 64 * MiB) : ctx.opt.host_max_bytes;
  size_t free_b = 0, total_b = 0;
  RB_CUDA(cudaMemGetInfo(&free_b, &total_b));
  while (max > MiB && 2 * max + GiB > free_b) max /= 2;
  out["memory"] = "pinned host buffers (cudaHostAlloc), one for H2D sources and one for D2H destinations";
  out["bytes_counted"] = "one direction: GBps = size / s; bidirectional total = 2 * size / span";
  out["timing"] =
      "h2d/d2h s: inner copies in one CUDA graph replay / inner; isolated_s: one copy between events after a "
      "synchronize. bidir: inner H2D copies on one stream and inner D2H copies on another, started together; each "
      "direction's time = its stream's finish - common start, divided by inner; total over the whole span.";
  char *h_src = nullptr, *h_dst = nullptr, *d_a = nullptr, *d_b = nullptr;
  double t0 = now_s();
  RB_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&h_src), max, cudaHostAllocDefault));
  RB_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&h_dst), max, cudaHostAllocDefault));
  out["pinned_alloc_s"] = now_s() - t0;
  std::memset(h_src, 0x5A, max);
  std::memset(h_dst, 0, max);
  RB_CUDA(cudaMalloc(&d_a, max));
  RB_CUDA(cudaMalloc(&d_b, max));
  cudaStream_t s1, s2;
  RB_CUDA(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  RB_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  fill_bytes(d_b, max, 7, s1);
  RB_CUDA(cudaStreamSynchronize(s1));

  const int reps = ctx.opt.reps;
  const double target = ctx.opt.quick ? 0.5e-3 : 2e-3;
  Json res = Json::array();
  double best_h2d = 0, best_d2h = 0, best_bidir = 0;
  for (size_t size : pow2_sizes(4 * KiB, max, 4)) {
    Json r = Json::object();
    r["bytes"] = static_cast<long long>(size);
    try {
      Enqueue h2d = [&](cudaStream_t st, int) { RB_CUDA(cudaMemcpyAsync(d_a, h_src, size, cudaMemcpyHostToDevice, st)); };
      Enqueue d2h = [&](cudaStream_t st, int) { RB_CUDA(cudaMemcpyAsync(h_dst, d_b, size, cudaMemcpyDeviceToHost, st)); };
      int inner_h2d = 1;
      double alone_gbps[2] = {0, 0};
      for (int which = 0; which < 2; ++which) {
        const Enqueue& op = which == 0 ? h2d : d2h;
        int r_reps = size >= GiB ? std::max(3, reps / 2) : reps;
        Stats iso = time_isolated(s1, 1, r_reps, op);
        int inner = pick_inner(iso.median, target, 256);
        if (which == 0) inner_h2d = inner;
        Stats bat = time_graph_batch(s1, inner, r_reps, op);
        r[which == 0 ? "h2d" : "d2h"] = copy_result(bat, iso, size, inner);
        double best = bat.min > 0 ? size / bat.min : 0;
        double med = bat.median > 0 ? size / bat.median : 0;
        alone_gbps[which] = med / 1e9;
        double& best_dir = which == 0 ? best_h2d : best_d2h;
        best_dir = std::max(best_dir, med);
        ctx.check_ceiling(std::string(which == 0 ? "pinned h2d " : "pinned d2h ") + fmt_bytes(size) + " max", best,
                          ctx.ceil.pcie_Bps_per_dir, "B/s");
      }
      // Both directions at once.
      {
        int inner = inner_h2d;
        int r_reps = size >= GiB ? std::max(3, reps / 2) : reps;
        cudaEvent_t e0, e1, e2;
        RB_CUDA(cudaEventCreate(&e0));
        RB_CUDA(cudaEventCreate(&e1));
        RB_CUDA(cudaEventCreate(&e2));
        std::vector<double> th, td, tt;
        for (int rep = -1; rep < r_reps; ++rep) {  // rep -1: warm-up
          RB_CUDA(cudaDeviceSynchronize());
          RB_CUDA(cudaEventRecord(e0, s1));
          RB_CUDA(cudaStreamWaitEvent(s2, e0, 0));
          for (int i = 0; i < inner; ++i) {
            RB_CUDA(cudaMemcpyAsync(d_a, h_src, size, cudaMemcpyHostToDevice, s1));
            RB_CUDA(cudaMemcpyAsync(h_dst, d_b, size, cudaMemcpyDeviceToHost, s2));
          }
          RB_CUDA(cudaEventRecord(e1, s1));
          RB_CUDA(cudaEventRecord(e2, s2));
          RB_CUDA(cudaEventSynchronize(e1));
          RB_CUDA(cudaEventSynchronize(e2));
          if (rep < 0) continue;
          double a = event_seconds(e0, e1), b = event_seconds(e0, e2);
          th.push_back(a / inner);
          td.push_back(b / inner);
          tt.push_back(std::max(a, b) / inner);
        }
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        cudaEventDestroy(e2);
        Stats sh = summarize(th), sd = summarize(td), st = summarize(tt);
        Json b = Json::object();
        b["h2d_s"] = stats_json(sh);
        b["d2h_s"] = stats_json(sd);
        b["span_s"] = stats_json(st);
        b["h2d_GBps_median"] = size / sh.median / 1e9;
        b["d2h_GBps_median"] = size / sd.median / 1e9;
        b["total_GBps"] = rate_json(st, 2.0 * size, 1e9);
        b["inner"] = inner;
        r["bidir"] = b;
        best_bidir = std::max(best_bidir, 2.0 * size / st.median);
        ctx.check_ceiling("pinned bidir total " + fmt_bytes(size) + " max", 2.0 * size / st.min,
                          2 * ctx.ceil.pcie_Bps_per_dir, "B/s");
        std::printf("host %8s  h2d %6.2f GB/s  d2h %6.2f GB/s  bidir %6.2f + %6.2f = %6.2f GB/s\n",
                    fmt_bytes(size).c_str(), alone_gbps[0], alone_gbps[1], size / sh.median / 1e9,
                    size / sd.median / 1e9, 2.0 * size / st.median / 1e9);
      }
    } catch (const std::exception& e) {
      r["error"] = e.what();
      cudaGetLastError();
    }
    std::fflush(stdout);
    res.push(r);
  }
  out["results"] = res;
  out["best_median_GBps"] = Json::object();
  out["best_median_GBps"]["h2d"] = best_h2d / 1e9;
  out["best_median_GBps"]["d2h"] = best_d2h / 1e9;
  out["best_median_GBps"]["bidir_total"] = best_bidir / 1e9;
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
  cudaFree(d_a);
  cudaFree(d_b);
  cudaFreeHost(h_src);
  cudaFreeHost(h_dst);
  return out;
}

}  // namespace rb
