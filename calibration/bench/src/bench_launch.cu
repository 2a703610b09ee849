// Per-kernel launch cost: N empty kernels launched eagerly vs replayed from one CUDA graph.
#include "common.h"

namespace rb {

Json bench_launch(Context& ctx) {
  Json out = Json::object();
  out["kernel"] = "empty __global__ function, <<<1,1>>>, one stream";
  out["fields"] =
      "eager: host_us_per_launch = host wall time of the N launch calls / N; inclusive_us_per_kernel = wall time from "
      "the first launch until cudaStreamSynchronize returns / N; gpu_span_us_per_kernel = event span around the N "
      "launches / N. graph (N kernels captured once, instantiated once): launch_host_us = host time of one "
      "cudaGraphLaunch call; inclusive_us_per_kernel = wall time from cudaGraphLaunch until synchronize returns / N; "
      "gpu_span_us_per_kernel = event span around the replay / N.";
  cudaStream_t s;
  RB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int reps = ctx.opt.quick ? 5 : std::max(ctx.opt.reps, 20);
  EventPair ev;
  // Warm-up: load the module and settle the driver.
  for (int i = 0; i < 100; ++i) launch_empty(s);
  RB_CHECK_LAUNCH();
  RB_CUDA(cudaStreamSynchronize(s));

  Json res = Json::array();
  for (int n : {1, 10, 100, 1000}) {
    Json r = Json::object();
    r["n"] = n;
    // Eager.
    std::vector<double> host, incl, span;
    for (int rep = -2; rep < reps; ++rep) {
      RB_CUDA(cudaStreamSynchronize(s));
      double t0 = now_s();
      RB_CUDA(cudaEventRecord(ev.a, s));
      for (int i = 0; i < n; ++i) launch_empty(s);
      double t1 = now_s();
      RB_CUDA(cudaEventRecord(ev.b, s));
      RB_CUDA(cudaStreamSynchronize(s));
      double t2 = now_s();
      RB_CHECK_LAUNCH();
      if (rep < 0) continue;
      host.push_back((t1 - t0) / n);
      incl.push_back((t2 - t0) / n);
      span.push_back(ev.seconds() / n);
    }
    Json e = Json::object();
    e["host_us_per_launch"] = stats_json(summarize(host), 1e6);
    e["inclusive_us_per_kernel"] = stats_json(summarize(incl), 1e6);
    e["gpu_span_us_per_kernel"] = stats_json(summarize(span), 1e6);
    r["eager"] = e;
    double eager_incl = summarize(incl).median;
    double eager_host = summarize(host).median;

    // Graph.
    cudaGraph_t g;
    cudaGraphExec_t ge;
    RB_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < n; ++i) launch_empty(s);
    RB_CUDA(cudaStreamEndCapture(s, &g));
    double ti0 = now_s();
    RB_CUDA(cudaGraphInstantiate(&ge, g, 0));
    double inst = now_s() - ti0;
    RB_CUDA(cudaGraphUpload(ge, s));
    host.clear();
    incl.clear();
    span.clear();
    for (int rep = -2; rep < reps; ++rep) {
      RB_CUDA(cudaStreamSynchronize(s));
      double t0 = now_s();
      RB_CUDA(cudaEventRecord(ev.a, s));
      RB_CUDA(cudaGraphLaunch(ge, s));
      double t1 = now_s();
      RB_CUDA(cudaEventRecord(ev.b, s));
      RB_CUDA(cudaStreamSynchronize(s));
      double t2 = now_s();
      if (rep < 0) continue;
      host.push_back(t1 - t0);
      incl.push_back((t2 - t0) / n);
      span.push_back(ev.seconds() / n);
    }
    Json gj = Json::object();
    gj["instantiate_s"] = inst;
    gj["launch_host_us"] = stats_json(summarize(host), 1e6);
    gj["inclusive_us_per_kernel"] = stats_json(summarize(incl), 1e6);
    gj["gpu_span_us_per_kernel"] = stats_json(summarize(span), 1e6);
    r["graph"] = gj;
    RB_CUDA(cudaGraphExecDestroy(ge));
    RB_CUDA(cudaGraphDestroy(g));
    std::printf("launch n=%4d  eager host %6.2f us/launch, incl %6.2f us/kernel | graph launch %6.2f us, incl %6.3f us/kernel\n",
                n, eager_host * 1e6, eager_incl * 1e6, summarize(host).median * 1e6, summarize(incl).median * 1e6);
    res.push(r);
  }
  std::fflush(stdout);
  out["results"] = res;
  cudaStreamDestroy(s);
  return out;
}

}  // namespace rb
