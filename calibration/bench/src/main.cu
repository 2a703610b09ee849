// racksim-bench: raw calibration measurements for racksim, written as one JSON file.
//
//   racksim-bench [--out FILE.json] [--quick] [--only gemm,hbm,host,launch,contention,nccl,wgrad]
//                 [--device N] [--reps N] [--hbm-max-bytes B] [--host-max-bytes B]
//                 [--nccl-max-bytes B] [--nccl-min-gpus N] [--allow-nvls]
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include "common.h"

namespace rb {
Ceilings ceilings_for(const cudaDeviceProp& p, int dev);
Json ceilings_json(const Ceilings& c);
}  // namespace rb

namespace {

const char* kSections[] = {"gemm", "hbm", "host", "launch", "contention", "nccl", "wgrad"};

void usage() {
  std::printf(
      "usage: racksim-bench [options]\n"
      "  --out FILE         JSON output (default racksim-bench.json)\n"
      "  --quick            tiny grid (smoke test)\n"
      "  --only LIST        comma-separated sections: gemm,hbm,host,launch,contention,nccl;\n"
      "                     wgrad (weight gradients as Transformer Engine runs them) runs only when named\n"
      "  --device N         GPU for the single-GPU sections (default 0)\n"
      "  --reps N           timed repetitions per point (default 10, --quick 3)\n"
      "  --hbm-max-bytes B  largest device copy (default 4 GiB)\n"
      "  --host-max-bytes B largest host<->device copy (default 4 GiB)\n"
      "  --nccl-max-bytes B largest collective (default 1 GiB)\n"
      "  --nccl-min-gpus N  run the NCCL section with at least N GPUs (default 2; 1 = single-rank code check)\n"
      "  --allow-nvls       do not set NCCL_NVLS_ENABLE=0 when it is unset\n");
}

size_t parse_bytes(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string suf = end ? end : "";
  double mul = 1;
  if (suf == "K" || suf == "KiB") mul = 1024.0;
  else if (suf == "M" || suf == "MiB") mul = 1024.0 * 1024;
  else if (suf == "G" || suf == "GiB") mul = 1024.0 * 1024 * 1024;
  else if (!suf.empty()) throw std::runtime_error("bad byte size: " + s);
  return static_cast<size_t>(v * mul);
}

bool write_file(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return false;
    f << text;
    if (!f) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rb;
  Context ctx;
  Options& o = ctx.opt;
  bool reps_given = false;
  try {
    for (int i = 0; i < argc; ++i) o.argv.push_back(argv[i]);
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
        return argv[++i];
      };
      if (a == "--out") o.out = next();
      else if (a == "--quick") o.quick = true;
      else if (a == "--only") {
        std::string list = next();
        size_t p = 0;
        while (p <= list.size()) {
          size_t q = list.find(',', p);
          if (q == std::string::npos) q = list.size();
          std::string sec = list.substr(p, q - p);
          if (!sec.empty()) {
            bool known = false;
            for (const char* k : kSections) known |= sec == k;
            if (!known) throw std::runtime_error("unknown section in --only: " + sec);
            o.only.insert(sec);
          }
          p = q + 1;
        }
      } else if (a == "--device") o.device = std::atoi(next().c_str());
      else if (a == "--reps") {
        o.reps = std::max(1, std::atoi(next().c_str()));
        reps_given = true;
      } else if (a == "--hbm-max-bytes") o.hbm_max_bytes = parse_bytes(next());
      else if (a == "--host-max-bytes") o.host_max_bytes = parse_bytes(next());
      else if (a == "--nccl-max-bytes") o.nccl_max_bytes = parse_bytes(next());
      else if (a == "--nccl-min-gpus") o.nccl_min_gpus = std::atoi(next().c_str());
      else if (a == "--allow-nvls") o.allow_nvls = true;
      else if (a == "-h" || a == "--help") {
        usage();
        return 0;
      } else
        throw std::runtime_error("unknown argument: " + a);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "racksim-bench: %s\n", e.what());
    usage();
    return 2;
  }
  if (o.quick && !reps_given) o.reps = 3;
  // NVLink SHARP (NVLS) stays off unless asked for: multicast objects can wedge shared hosts.
  if (!o.allow_nvls) setenv("NCCL_NVLS_ENABLE", "0", 0);

  Json doc = Json::object();
  doc["schema"] = "racksim-bench/1";
  Json tool = Json::object();
  tool["name"] = "racksim-bench";
  tool["version"] = "0.1.0";
#ifdef RACKSIM_BENCH_GIT
  tool["source_commit"] = RACKSIM_BENCH_GIT;
#endif
  Json av = Json::array();
  std::string cmdline;
  for (auto& s : o.argv) {
    av.push(s);
    cmdline += (cmdline.empty() ? "" : " ") + s;
  }
  tool["argv"] = av;
  tool["command_line"] = cmdline;
  tool["quick"] = o.quick;
  tool["reps"] = o.reps;
  doc["tool"] = tool;

  const double t_start = now_s();
  try {
    RB_CUDA(cudaGetDeviceCount(&ctx.ngpus));
    if (ctx.ngpus < 1) throw std::runtime_error("no CUDA device");
    if (o.device < 0 || o.device >= ctx.ngpus) throw std::runtime_error("--device out of range");
    ctx.device = o.device;
    RB_CUDA(cudaSetDevice(ctx.device));
    RB_CUDA(cudaFree(nullptr));  // create the context
    RB_CUDA(cudaGetDeviceProperties(&ctx.prop, ctx.device));
    ctx.ceil = ceilings_for(ctx.prop, ctx.device);
    doc["identity"] = device_identity(ctx, true);
    doc["ceilings"] = ceilings_json(ctx.ceil);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "racksim-bench: %s\n", e.what());
    doc["fatal"] = e.what();
    write_file(o.out, doc.dump());
    return 1;
  }
  std::printf("racksim-bench: %s, %d SMs, cc %d.%d, %d GPU(s); writing %s\n", ctx.prop.name,
              ctx.prop.multiProcessorCount, ctx.prop.major, ctx.prop.minor, ctx.ngpus, o.out.c_str());
  std::fflush(stdout);

  struct Section {
    const char* name;
    Json (*fn)(Context&);
    bool opt_in = false;  // runs only when --only names it
  };
  const Section sections[] = {{"launch", bench_launch}, {"hbm", bench_hbm},
                              {"host", bench_host},     {"gemm", bench_gemm},
                              {"contention", bench_contention}, {"nccl", bench_nccl},
                              {"wgrad", bench_wgrad, true}};
  int failed = 0;
  for (const Section& s : sections) {
    if (s.opt_in ? !o.named(s.name) : !o.want(s.name)) continue;
    double t0 = now_s();
    std::printf("== %s\n", s.name);
    std::fflush(stdout);
    Json j;
    try {
      RB_CUDA(cudaSetDevice(ctx.device));
      j = s.fn(ctx);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "racksim-bench: section %s failed: %s\n", s.name, e.what());
      j = Json::object();
      j["error"] = e.what();
      ++failed;
      cudaGetLastError();
    }
    cudaSetDevice(ctx.device);
    j["section_wall_s"] = now_s() - t0;
    doc[s.name] = j;
    doc["warnings"] = ctx.warnings;
    doc["clocks_at_end"] = clocks_snapshot(ctx);
    doc["elapsed_s"] = now_s() - t_start;
    if (!write_file(o.out, doc.dump())) {  // after every section: partial results survive a crash
      std::fprintf(stderr, "racksim-bench: cannot write %s\n", o.out.c_str());
      return 1;
    }
  }
  std::printf("racksim-bench: done in %.1f s, %zu warning(s), %d failed section(s); wrote %s\n", now_s() - t_start,
              ctx.warnings.size(), failed, o.out.c_str());
  return failed ? 3 : 0;
}
