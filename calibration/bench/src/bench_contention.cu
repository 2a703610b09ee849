// Contention: a large bf16 GEMM alone, then while a background transfer runs on another stream
// (a 1 GiB pinned H2D copy; device-to-device copies; an NCCL all-reduce when >= 2 GPUs).
#include <cmath>
#include <cstring>
#include <memory>

#include "gemm.h"
#include "nccl_world.h"

namespace rb {
namespace {

struct Background {
  std::string name;
  std::string what;
  std::function<void(cudaStream_t)> enqueue;  // the whole background job
  cudaStream_t stream = nullptr;              // where it runs (device 0)
};

// Runs the GEMM back-to-back on s_gemm while `bg` runs on its own stream, starting together.
// Returns the median duration of the GEMMs that ran entirely inside the background's window,
// the background's duration, and how many GEMMs fell inside.
struct Overlap {
  double gemm_during_s = 0;
  int gemm_inside = 0;
  double bg_during_s = 0;
};

Overlap run_overlap(const Gemm& g, cudaStream_t s_gemm, const Background& bg, int ngemm) {
  std::vector<cudaEvent_t> ev(ngemm + 1);
  for (auto& e : ev) RB_CUDA(cudaEventCreate(&e));
  cudaEvent_t start, b0, b1;
  RB_CUDA(cudaEventCreate(&start));
  RB_CUDA(cudaEventCreate(&b0));
  RB_CUDA(cudaEventCreate(&b1));
  RB_CUDA(cudaDeviceSynchronize());
  RB_CUDA(cudaEventRecord(start, s_gemm));
  RB_CUDA(cudaStreamWaitEvent(bg.stream, start, 0));
  RB_CUDA(cudaEventRecord(b0, bg.stream));
  bg.enqueue(bg.stream);
  RB_CUDA(cudaEventRecord(b1, bg.stream));
  RB_CUDA(cudaEventRecord(ev[0], s_gemm));
  for (int i = 0; i < ngemm; ++i) {
    g.enqueue(s_gemm, 0);
    RB_CUDA(cudaEventRecord(ev[i + 1], s_gemm));
  }
  RB_CUDA(cudaDeviceSynchronize());
  Overlap o;
  double bs = event_seconds(start, b0), be = event_seconds(start, b1);
  o.bg_during_s = be - bs;
  std::vector<double> inside;
  for (int i = 0; i < ngemm; ++i) {
    double gs = event_seconds(start, ev[i]), ge = event_seconds(start, ev[i + 1]);
    if (gs >= bs && ge <= be) inside.push_back(ge - gs);
  }
  o.gemm_inside = static_cast<int>(inside.size());
  o.gemm_during_s = summarize(inside).median;
  for (auto& e : ev) cudaEventDestroy(e);
  cudaEventDestroy(start);
  cudaEventDestroy(b0);
  cudaEventDestroy(b1);
  return o;
}

}  // namespace

Json bench_contention(Context& ctx) {
  Json out = Json::object();
  const long long n = ctx.opt.quick ? 4096 : 8192;
  out["gemm"] = "bf16 cuBLASLt " + std::to_string(n) + "^3 (TN), back-to-back on one stream";
  out["method"] =
      "The background job and a run of GEMMs start together (one event, the background stream waits on it); "
      "gemm_during_s = median duration of the GEMMs that started and ended inside the background's window; "
      "bg_during_s = the background job's duration with the GEMMs beside it. Alone figures: each measured by itself. "
      "Repeated reps times; medians reported.";
  cublasLtHandle_t h = nullptr;
  if (cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS) throw_error("cublasLtCreate failed", __FILE__, __LINE__);
  void* ws = nullptr;
  RB_CUDA(cudaMalloc(&ws, 32 * MiB));
  cudaStream_t sg, sb;
  RB_CUDA(cudaStreamCreateWithFlags(&sg, cudaStreamNonBlocking));
  RB_CUDA(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
  Json res = Json::array();
  const size_t xfer = ctx.opt.quick ? 256 * MiB : GiB;
  char *h_buf = nullptr, *d_x = nullptr, *d_y = nullptr;
  try {
    Gemm g(h, GemmType::BF16, n, n, n, ws, 32 * MiB, 1, sg);
    Enqueue gop = [&g](cudaStream_t st, int i) { g.enqueue(st, i); };
    Stats galone = time_isolated(sg, 3, ctx.opt.reps, gop);
    Stats gbatch = time_graph_batch(sg, 4, ctx.opt.reps, gop);
    out["gemm_alone_s"] = stats_json(galone);
    out["gemm_alone_back_to_back_s"] = stats_json(gbatch);
    const double t_gemm = gbatch.median;

    RB_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&h_buf), xfer, cudaHostAllocDefault));
    std::memset(h_buf, 0x3C, xfer);
    RB_CUDA(cudaMalloc(&d_x, xfer));
    RB_CUDA(cudaMalloc(&d_y, xfer));
    fill_bytes(d_x, xfer, 5, sb);
    RB_CUDA(cudaStreamSynchronize(sb));

    std::vector<Background> bgs;
    bgs.push_back({"h2d_pinned", "one " + fmt_bytes(xfer) + " pinned host-to-device cudaMemcpyAsync",
                   [&](cudaStream_t st) { RB_CUDA(cudaMemcpyAsync(d_y, h_buf, xfer, cudaMemcpyHostToDevice, st)); }, sb});
    bgs.push_back({"d2h_pinned", "one " + fmt_bytes(xfer) + " pinned device-to-host cudaMemcpyAsync",
                   [&](cudaStream_t st) { RB_CUDA(cudaMemcpyAsync(h_buf, d_x, xfer, cudaMemcpyDeviceToHost, st)); }, sb});
    const int nd2d = ctx.opt.quick ? 8 : 24;
    bgs.push_back({"d2d_memcpy", std::to_string(nd2d) + " back-to-back " + fmt_bytes(xfer) + " device-to-device cudaMemcpyAsync",
                   [&, nd2d](cudaStream_t st) {
                     for (int i = 0; i < nd2d; ++i)
                       RB_CUDA(cudaMemcpyAsync(d_y, d_x, xfer, cudaMemcpyDeviceToDevice, st));
                   },
                   sb});
#ifdef RACKSIM_HAVE_NCCL
    std::unique_ptr<NcclWorld> world;
    if (ctx.ngpus >= 2) {
      world = std::make_unique<NcclWorld>(ctx.ngpus, xfer);
      NcclWorld* w = world.get();
      const int nar = 4;
      bgs.push_back({"nccl_all_reduce",
                     std::to_string(nar) + " back-to-back " + fmt_bytes(xfer) + " bf16 all_reduce over " +
                         std::to_string(ctx.ngpus) + " GPUs (GEMM on GPU 0)",
                     [w, nar, xfer](cudaStream_t) {
                       for (int i = 0; i < nar; ++i) w->enqueue(Coll::AllReduce, xfer / 2, ncclBfloat16);
                     },
                     world->streams[0]});
    } else {
      out["nccl_all_reduce"] = "skipped: needs >= 2 GPUs";
    }
#else
    out["nccl_all_reduce"] = "skipped: built without NCCL";
#endif

    for (const Background& bg : bgs) {
      Json r = Json::object();
      r["background"] = bg.name;
      r["description"] = bg.what;
      try {
        // Background alone.
        std::vector<double> alone;
        for (int rep = -1; rep < std::max(3, ctx.opt.reps / 2); ++rep) {
          EventPair ev;
          RB_CUDA(cudaDeviceSynchronize());
          RB_CUDA(cudaEventRecord(ev.a, bg.stream));
          bg.enqueue(bg.stream);
          RB_CUDA(cudaEventRecord(ev.b, bg.stream));
          RB_CUDA(cudaDeviceSynchronize());
          if (rep >= 0) alone.push_back(ev.seconds());
        }
        Stats bal = summarize(alone);
        int ngemm = static_cast<int>(std::ceil(bal.median * 1.5 / t_gemm)) + 3;
        if (ngemm > 2000) ngemm = 2000;
        std::vector<double> gd, bd;
        int inside_min = 1 << 30;
        for (int rep = -1; rep < std::max(3, ctx.opt.reps / 2); ++rep) {
          Overlap o = run_overlap(g, sg, bg, ngemm);
          if (rep < 0) continue;
          if (o.gemm_inside > 0) gd.push_back(o.gemm_during_s);
          bd.push_back(o.bg_during_s);
          inside_min = std::min(inside_min, o.gemm_inside);
        }
        Stats sgd = summarize(gd), sbd = summarize(bd);
        r["bg_alone_s"] = stats_json(bal);
        r["bg_during_s"] = stats_json(sbd);
        r["gemm_alone_s_median"] = t_gemm;
        r["gemm_during_s"] = stats_json(sgd);
        r["gemms_inside_window_min"] = inside_min;
        r["gemm_slowdown"] = sgd.n ? sgd.median / t_gemm : 0.0;
        r["bg_slowdown"] = sbd.median / bal.median;
        std::printf("contention %-16s gemm %8.3f -> %8.3f ms (x%.3f), bg %8.3f -> %8.3f ms (x%.3f)\n", bg.name.c_str(),
                    t_gemm * 1e3, sgd.median * 1e3, sgd.n ? sgd.median / t_gemm : 0.0, bal.median * 1e3,
                    sbd.median * 1e3, sbd.median / bal.median);
        std::fflush(stdout);
      } catch (const std::exception& e) {
        r["error"] = e.what();
        cudaGetLastError();
      }
      res.push(r);
    }
  } catch (...) {
    if (h_buf) cudaFreeHost(h_buf);
    cudaFree(d_x);
    cudaFree(d_y);
    cudaFree(ws);
    cublasLtDestroy(h);
    throw;
  }
  out["results"] = res;
  cudaFreeHost(h_buf);
  cudaFree(d_x);
  cudaFree(d_y);
  cudaStreamDestroy(sg);
  cudaStreamDestroy(sb);
  cudaFree(ws);
  cublasLtDestroy(h);
  return out;
}

}  // namespace rb
