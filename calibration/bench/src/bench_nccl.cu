// NCCL collectives by size and GPU count, single process (ncclCommInitAll), out-of-place,
// with nccl-tests' size, algbw and busbw definitions.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "nccl_world.h"

extern char** environ;

namespace rb {

#ifndef RACKSIM_HAVE_NCCL

Json nccl_identity() {
  Json j = Json::object();
  j["compiled"] = false;
  return j;
}

Json bench_nccl(Context& ctx) {
  Json j = Json::object();
  j["skipped"] = "racksim-bench was built without NCCL (nccl.h / libnccl not found at configure time)";
  j["gpu_count"] = ctx.ngpus;
  return j;
}

#else

Json nccl_identity() {
  Json j = Json::object();
  j["compiled"] = true;
  j["header_version_code"] = NCCL_VERSION_CODE;
  int v = 0;
  if (ncclGetVersion(&v) == ncclSuccess) {
    j["library_version_code"] = v;
    int major = v / 10000, minor = (v % 10000) / 100, patch = v % 100;
    j["library_version"] = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  }
  Json env = Json::object();
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "NCCL_", 5) == 0) {
      const char* eq = std::strchr(*e, '=');
      if (eq) env[std::string(*e, static_cast<size_t>(eq - *e))] = std::string(eq + 1);
    }
  j["env"] = env;
  return j;
}

NcclWorld::NcclWorld(int ngpus, size_t bytes) : n(ngpus), buf_bytes(bytes) {
  std::vector<int> devs(n);
  for (int i = 0; i < n; ++i) devs[i] = i;
  comms.assign(n, nullptr);
  streams.assign(n, nullptr);
  send.assign(n, nullptr);
  recv.assign(n, nullptr);
  int prev = 0;
  RB_CUDA(cudaGetDevice(&prev));
  try {
    RB_NCCL(ncclCommInitAll(comms.data(), n, devs.data()));
    for (int r = 0; r < n; ++r) {
      RB_CUDA(cudaSetDevice(r));
      RB_CUDA(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
      RB_CUDA(cudaMalloc(&send[r], bytes));
      RB_CUDA(cudaMalloc(&recv[r], bytes));
      fill_bf16(send[r], bytes / 2, 100 + r, 1.0f, streams[r]);
      RB_CUDA(cudaMemsetAsync(recv[r], 0, bytes, streams[r]));
    }
    sync();
  } catch (...) {
    cudaSetDevice(prev);
    throw;
  }
  RB_CUDA(cudaSetDevice(prev));
}

NcclWorld::~NcclWorld() {
  int prev = 0;
  cudaGetDevice(&prev);
  for (int r = 0; r < n; ++r) {
    cudaSetDevice(r);
    if (streams[r]) cudaStreamSynchronize(streams[r]);
    if (comms[r]) ncclCommDestroy(comms[r]);
    if (streams[r]) cudaStreamDestroy(streams[r]);
    if (send[r]) cudaFree(send[r]);
    if (recv[r]) cudaFree(recv[r]);
  }
  cudaSetDevice(prev);
}

void NcclWorld::sync() {
  int prev = 0;
  RB_CUDA(cudaGetDevice(&prev));
  for (int r = 0; r < n; ++r) {
    RB_CUDA(cudaSetDevice(r));
    RB_CUDA(cudaStreamSynchronize(streams[r]));
  }
  RB_CUDA(cudaSetDevice(prev));
}

namespace {

size_t type_size(ncclDataType_t dt) { return dt == ncclFloat32 ? 4 : 2; }

const char* coll_name(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "all_reduce";
    case Coll::AllGather: return "all_gather";
    case Coll::ReduceScatter: return "reduce_scatter";
    case Coll::AllToAll: return "all_to_all";
    case Coll::SendRecv: return "send_recv";
  }
  return "?";
}

// nccl-tests busbw factor.
double bus_factor(Coll c, int n) {
  switch (c) {
    case Coll::AllReduce: return 2.0 * (n - 1) / n;
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AllToAll: return static_cast<double>(n - 1) / n;
    case Coll::SendRecv: return 1.0;
  }
  return 1.0;
}

}  // namespace

void NcclWorld::enqueue(Coll c, size_t count, ncclDataType_t dt) {
  const size_t ts = type_size(dt);
  RB_NCCL(ncclGroupStart());
  for (int r = 0; r < n; ++r) {
    char* sb = static_cast<char*>(send[r]);
    char* rb = static_cast<char*>(recv[r]);
    switch (c) {
      case Coll::AllReduce: RB_NCCL(ncclAllReduce(sb, rb, count, dt, ncclSum, comms[r], streams[r])); break;
      case Coll::AllGather: RB_NCCL(ncclAllGather(sb, rb, count, dt, comms[r], streams[r])); break;
      case Coll::ReduceScatter: RB_NCCL(ncclReduceScatter(sb, rb, count, dt, ncclSum, comms[r], streams[r])); break;
      case Coll::AllToAll:
        for (int p = 0; p < n; ++p) {
          RB_NCCL(ncclSend(sb + p * count * ts, count, dt, p, comms[r], streams[r]));
          RB_NCCL(ncclRecv(rb + p * count * ts, count, dt, p, comms[r], streams[r]));
        }
        break;
      case Coll::SendRecv:
        RB_NCCL(ncclSend(sb, count, dt, (r + 1) % n, comms[r], streams[r]));
        RB_NCCL(ncclRecv(rb, count, dt, (r - 1 + n) % n, comms[r], streams[r]));
        break;
    }
  }
  RB_NCCL(ncclGroupEnd());
}

namespace {

// all_reduce of bf16 ones on every rank must give n everywhere.
bool check_all_reduce(NcclWorld& w) {
  const size_t count = 4096;
  std::vector<uint16_t> ones(count, 0x3F80);  // bf16 1.0
  for (int r = 0; r < w.n; ++r) {
    RB_CUDA(cudaSetDevice(r));
    RB_CUDA(cudaMemcpy(w.send[r], ones.data(), count * 2, cudaMemcpyHostToDevice));
  }
  RB_CUDA(cudaSetDevice(0));
  w.enqueue(Coll::AllReduce, count, ncclBfloat16);
  w.sync();
  bool ok = true;
  for (int r = 0; r < w.n; ++r) {
    std::vector<uint16_t> h(count);
    RB_CUDA(cudaSetDevice(r));
    RB_CUDA(cudaMemcpy(h.data(), w.recv[r], count * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) {
      uint32_t u = static_cast<uint32_t>(h[i]) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      if (f != static_cast<float>(w.n)) ok = false;
    }
    fill_bf16(w.send[r], w.buf_bytes / 2, 100 + r, 1.0f, w.streams[r]);
  }
  w.sync();
  RB_CUDA(cudaSetDevice(0));
  return ok;
}

}  // namespace

Json bench_nccl(Context& ctx) {
  Json out = Json::object();
  out["gpu_count"] = ctx.ngpus;
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  out["NCCL_NVLS_ENABLE"] = nvls ? nvls : "(unset)";
  if (ctx.ngpus < std::max(2, ctx.opt.nccl_min_gpus) && !(ctx.opt.nccl_min_gpus <= 1 && ctx.ngpus >= 1)) {
    out["skipped"] = std::to_string(ctx.ngpus) +
                     " GPU(s) visible: the multi-GPU collectives need at least 2 and were not run (nothing measured)";
    return out;
  }
  out["definitions"] =
      "nccl-tests: bytes = all_reduce: count*size(type); all_gather: total output; reduce_scatter: total input; "
      "all_to_all: total per-rank send buffer (grouped ncclSend/ncclRecv to every peer); send_recv: bytes sent by each "
      "rank to rank+1 (ring; between 2 ranks it is a bidirectional exchange). algbw = bytes / s; busbw = algbw * "
      "factor (all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; send_recv 1). s = max over ranks "
      "of the event span of `iters` back-to-back operations / iters; stats over reps such batches.";
  std::vector<int> counts;
  for (int k = 2; k <= ctx.ngpus; k *= 2) counts.push_back(k);
  if (ctx.ngpus >= 2 && (counts.empty() || counts.back() != ctx.ngpus)) counts.push_back(ctx.ngpus);
  if (ctx.opt.nccl_min_gpus <= 1 && ctx.ngpus == 1) {
    counts = {1};
    out["note"] = "single-rank run requested with --nccl-min-gpus 1: a code-path check, not a collective measurement";
  }
  const size_t max_bytes = ctx.opt.quick ? std::min<size_t>(ctx.opt.nccl_max_bytes, 16 * MiB) : ctx.opt.nccl_max_bytes;
  const int reps = ctx.opt.quick ? 2 : std::max(3, ctx.opt.reps / 2);
  struct Case {
    Coll c;
    ncclDataType_t dt;
    const char* dtn;
  };
  const std::vector<Case> cases = {{Coll::AllReduce, ncclBfloat16, "bf16"},   {Coll::AllReduce, ncclFloat32, "float"},
                                   {Coll::AllGather, ncclBfloat16, "bf16"},   {Coll::ReduceScatter, ncclBfloat16, "bf16"},
                                   {Coll::AllToAll, ncclBfloat16, "bf16"},    {Coll::SendRecv, ncclBfloat16, "bf16"}};
  Json runs = Json::array();
  for (int k : counts) {
    Json run = Json::object();
    run["gpus"] = k;
    try {
      NcclWorld w(k, max_bytes);
      bool ok = check_all_reduce(w);
      run["all_reduce_check"] = ok ? "pass" : "FAIL";
      if (!ok) ctx.warn("nccl all_reduce check failed on " + std::to_string(k) + " GPUs");
      std::vector<cudaEvent_t> e0(k), e1(k);
      for (int r = 0; r < k; ++r) {
        RB_CUDA(cudaSetDevice(r));
        RB_CUDA(cudaEventCreate(&e0[r]));
        RB_CUDA(cudaEventCreate(&e1[r]));
      }
      RB_CUDA(cudaSetDevice(0));
      Json res = Json::array();
      for (const Case& cs : cases) {
        const size_t ts = type_size(cs.dt);
        for (size_t bytes = KiB; bytes <= max_bytes; bytes *= (ctx.opt.quick ? 16 : 2)) {
          size_t elems = bytes / ts;
          size_t count = elems;  // per-op argument
          size_t actual = bytes;
          if (cs.c == Coll::AllGather || cs.c == Coll::ReduceScatter || cs.c == Coll::AllToAll) {
            count = elems / k;
            actual = count * k * ts;
          }
          if (count == 0) continue;
          const int iters = bytes <= MiB ? 40 : bytes <= 64 * MiB ? 10 : 4;
          Json r = Json::object();
          r["collective"] = coll_name(cs.c);
          r["dtype"] = cs.dtn;
          r["bytes"] = static_cast<long long>(actual);
          r["count"] = static_cast<long long>(count);
          try {
            for (int i = 0; i < 3; ++i) w.enqueue(cs.c, count, cs.dt);  // warm-up
            w.sync();
            std::vector<double> t;
            for (int rep = 0; rep < reps; ++rep) {
              for (int q = 0; q < k; ++q) {
                RB_CUDA(cudaSetDevice(q));
                RB_CUDA(cudaEventRecord(e0[q], w.streams[q]));
              }
              for (int i = 0; i < iters; ++i) w.enqueue(cs.c, count, cs.dt);
              for (int q = 0; q < k; ++q) {
                RB_CUDA(cudaSetDevice(q));
                RB_CUDA(cudaEventRecord(e1[q], w.streams[q]));
              }
              w.sync();
              double span = 0;
              for (int q = 0; q < k; ++q) span = std::max(span, event_seconds(e0[q], e1[q]));
              t.push_back(span / iters);
            }
            RB_CUDA(cudaSetDevice(0));
            Stats st = summarize(t);
            r["iters"] = iters;
            r["s"] = stats_json(st);
            double alg = actual / st.median / 1e9;
            r["algbw_GBps"] = alg;
            r["busbw_GBps"] = alg * bus_factor(cs.c, k);
            r["busbw_GBps_max"] = actual / st.min / 1e9 * bus_factor(cs.c, k);
            if (k >= 2)
              ctx.check_ceiling(std::string("nccl ") + coll_name(cs.c) + " " + fmt_bytes(actual) + " on " +
                                    std::to_string(k) + " GPUs busbw max",
                                actual / st.min * bus_factor(cs.c, k), ctx.ceil.nvlink_Bps_per_dir, "B/s");
          } catch (const std::exception& e) {
            r["error"] = e.what();
            cudaGetLastError();
          }
          res.push(r);
        }
        std::printf("nccl %d GPUs %-14s %-5s done\n", k, coll_name(cs.c), cs.dtn);
        std::fflush(stdout);
      }
      for (int r = 0; r < k; ++r) {
        cudaSetDevice(r);
        cudaEventDestroy(e0[r]);
        cudaEventDestroy(e1[r]);
      }
      cudaSetDevice(0);
      run["results"] = res;
    } catch (const std::exception& e) {
      run["error"] = e.what();
      cudaGetLastError();
    }
    runs.push(run);
  }
  out["runs"] = runs;
  return out;
}

#endif

}  // namespace rb
