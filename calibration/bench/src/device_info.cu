// Device and driver identity; clocks through NVML when libnvidia-ml is loadable (dlopen, no
// build-time dependency), otherwise through cudaDeviceGetAttribute alone.
#include <cublasLt.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <ctime>

#include "common.h"

namespace rb {
namespace {

// The few NVML entry points used, declared by hand (stable C ABI of libnvidia-ml.so.1).
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
using nvmlReturn_t = int;
enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };

struct Nvml {
  void* lib = nullptr;
  bool ok = false;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*nvml_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*by_pci)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*max_clock)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*pcie_gen)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*pcie_width)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*pcie_max_gen)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*pcie_max_width)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*power_usage)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*pstate)(nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long*) = nullptr;

  template <class F>
  void sym(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib, name));
  }
  Nvml() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    sym(init, "nvmlInit_v2");
    sym(driver_version, "nvmlSystemGetDriverVersion");
    sym(nvml_version, "nvmlSystemGetNVMLVersion");
    sym(by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    sym(clock, "nvmlDeviceGetClockInfo");
    sym(max_clock, "nvmlDeviceGetMaxClockInfo");
    sym(pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration");
    sym(pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
    sym(pcie_max_gen, "nvmlDeviceGetMaxPcieLinkGeneration");
    sym(pcie_max_width, "nvmlDeviceGetMaxPcieLinkWidth");
    sym(power_limit, "nvmlDeviceGetPowerManagementLimit");
    sym(power_usage, "nvmlDeviceGetPowerUsage");
    sym(temperature, "nvmlDeviceGetTemperature");
    sym(pstate, "nvmlDeviceGetPerformanceState");
    sym(reasons, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!reasons) sym(reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
    ok = init && by_pci && init() == 0;
  }
  nvmlDevice_t handle(int cuda_dev) const {
    if (!ok) return nullptr;
    char bus[64] = {0};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_dev) != cudaSuccess) return nullptr;
    nvmlDevice_t h = nullptr;
    if (by_pci(bus, &h) != 0) return nullptr;
    return h;
  }
};

Nvml& nvml() {
  static Nvml n;
  return n;
}

int attr(cudaDeviceAttr a, int dev) {
  int v = -1;
  if (cudaDeviceGetAttribute(&v, a, dev) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return v;
}

template <class F, class... A>
void nvml_uint(Json& j, const char* key, F f, A... args) {
  unsigned v = 0;
  if (f && f(args..., &v) == 0) j[key] = v;
}

Json clocks_of(int dev) {
  Json j = Json::object();
  Nvml& n = nvml();
  nvmlDevice_t h = n.handle(dev);
  j["source"] = h ? "nvml" : "cudaDeviceGetAttribute (max only)";
  if (h) {
    nvml_uint(j, "sm_mhz", n.clock, h, NVML_CLOCK_SM);
    nvml_uint(j, "mem_mhz", n.clock, h, NVML_CLOCK_MEM);
    nvml_uint(j, "graphics_mhz", n.clock, h, NVML_CLOCK_GRAPHICS);
    nvml_uint(j, "sm_max_mhz", n.max_clock, h, NVML_CLOCK_SM);
    nvml_uint(j, "mem_max_mhz", n.max_clock, h, NVML_CLOCK_MEM);
    nvml_uint(j, "power_mw", n.power_usage, h);
    nvml_uint(j, "temperature_c", n.temperature, h, 0);
    int ps = -1;
    if (n.pstate && n.pstate(h, &ps) == 0) j["pstate"] = ps;
    unsigned long long r = 0;
    if (n.reasons && n.reasons(h, &r) == 0) j["clock_event_reasons_mask"] = static_cast<long long>(r);
  } else {
    int c = attr(cudaDevAttrClockRate, dev);
    int m = attr(cudaDevAttrMemoryClockRate, dev);
    if (c > 0) j["sm_max_mhz"] = c / 1000;
    if (m > 0) j["mem_max_mhz"] = m / 1000;
  }
  return j;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Json one_device(int dev) {
  cudaDeviceProp p{};
  RB_CUDA(cudaGetDeviceProperties(&p, dev));
  Json j = Json::object();
  j["index"] = dev;
  j["name"] = p.name;
  char uuid[64];
  const unsigned char* u = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
  std::snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  j["uuid"] = uuid;
  char bus[64] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, dev) == cudaSuccess) j["pci_bus_id"] = bus;
  j["compute_capability"] = std::to_string(p.major) + "." + std::to_string(p.minor);
  j["sm_count"] = p.multiProcessorCount;
  j["total_mem_bytes"] = static_cast<long long>(p.totalGlobalMem);
  size_t free_b = 0, total_b = 0;
  int prev = 0;
  cudaGetDevice(&prev);
  if (cudaSetDevice(dev) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
    j["free_mem_bytes_at_start"] = static_cast<long long>(free_b);
  cudaSetDevice(prev);
  j["l2_cache_bytes"] = p.l2CacheSize;
  j["shared_mem_per_sm_bytes"] = static_cast<long long>(p.sharedMemPerMultiprocessor);
  j["shared_mem_per_block_optin_bytes"] = static_cast<long long>(p.sharedMemPerBlockOptin);
  j["regs_per_sm"] = p.regsPerMultiprocessor;
  j["max_threads_per_sm"] = p.maxThreadsPerMultiProcessor;
  j["memory_bus_width_bits"] = p.memoryBusWidth;
  j["async_engine_count"] = p.asyncEngineCount;
  j["ecc_enabled"] = p.ECCEnabled != 0;
  int clk = attr(cudaDevAttrClockRate, dev), mclk = attr(cudaDevAttrMemoryClockRate, dev);
  if (clk > 0) j["attr_sm_clock_max_khz"] = clk;
  if (mclk > 0) {
    j["attr_mem_clock_max_khz"] = mclk;
    // DDR: two transfers per clock.
    j["theoretical_mem_Bps_from_attrs"] = 2.0 * mclk * 1e3 * p.memoryBusWidth / 8.0;
  }
  Nvml& n = nvml();
  nvmlDevice_t h = n.handle(dev);
  if (h) {
    Json pcie = Json::object();
    nvml_uint(pcie, "gen", n.pcie_gen, h);
    nvml_uint(pcie, "width", n.pcie_width, h);
    nvml_uint(pcie, "max_gen", n.pcie_max_gen, h);
    nvml_uint(pcie, "max_width", n.pcie_max_width, h);
    j["pcie"] = pcie;
    nvml_uint(j, "power_limit_mw", n.power_limit, h);
  }
  j["clocks_at_start"] = clocks_of(dev);
  return j;
}

// PCIe payload bandwidth per direction for a generation and width (128b/130b from Gen3 on).
double pcie_Bps(unsigned gen, unsigned width) {
  double gts = 0;
  switch (gen) {
    case 1: gts = 2.5 * 0.8; break;
    case 2: gts = 5.0 * 0.8; break;
    case 3: gts = 8.0 * 128 / 130; break;
    case 4: gts = 16.0 * 128 / 130; break;
    case 5: gts = 32.0 * 128 / 130; break;
    case 6: gts = 64.0 * 242 / 256; break;
    default: return 0;
  }
  return gts * 1e9 * width / 8;
}

}  // namespace

Json clocks_snapshot(Context& ctx) { return clocks_of(ctx.device); }

Json device_identity(Context& ctx, bool full) {
  Json j = Json::object();
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  j["hostname"] = host;
  j["date_utc"] = utc_now();
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  j["cuda_driver_api_version"] = drv;
  j["cuda_runtime_version"] = rt;
  j["cublaslt_version"] = static_cast<long long>(cublasLtGetVersion());
  j["cublaslt_cudart_version"] = static_cast<long long>(cublasLtGetCudartVersion());
  Nvml& n = nvml();
  j["nvml_loaded"] = n.ok;
  if (n.ok) {
    char buf[96] = {0};
    if (n.driver_version && n.driver_version(buf, sizeof buf) == 0) j["driver_version"] = buf;
    if (n.nvml_version && n.nvml_version(buf, sizeof buf) == 0) j["nvml_version"] = buf;
  }
  j["nccl"] = nccl_identity();
  j["gpu_count"] = ctx.ngpus;
  j["device_index"] = ctx.device;
  Json devs = Json::array();
  for (int d = 0; d < ctx.ngpus; ++d)
    if (full || d == ctx.device) devs.push(one_device(d));
  j["gpus"] = devs;
  if (ctx.ngpus > 1) {
    // Peer access and the driver's relative performance rank of each pair.
    Json p2p = Json::array();
    for (int a = 0; a < ctx.ngpus; ++a)
      for (int b = 0; b < ctx.ngpus; ++b) {
        if (a == b) continue;
        int can = 0, rank = -1, atomics = 0;
        cudaDeviceCanAccessPeer(&can, a, b);
        cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, a, b);
        cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, a, b);
        cudaGetLastError();
        Json e = Json::object();
        e["src"] = a;
        e["dst"] = b;
        e["can_access_peer"] = can != 0;
        e["performance_rank"] = rank;
        e["native_atomics"] = atomics != 0;
        p2p.push(e);
      }
    j["p2p"] = p2p;
  }
  return j;
}

// Ceilings: dense datasheet peaks for the GPUs racksim models, link ceilings from NVML.
Ceilings ceilings_for(const cudaDeviceProp& p, int dev) {
  Ceilings c;
  std::string name = p.name;
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("H200")) {
    c.bf16_tflops = 989.4;
    c.fp8_tflops = 1978.9;
    c.hbm_Bps = 4.8e12;
    c.nvlink_Bps_per_dir = 450e9;
    c.source = "H200 SXM datasheet: dense bf16 989.4, fp8 1979 TFLOP/s, HBM3e 4.8 TB/s, NVLink 450 GB/s/dir";
  } else if (has("H100")) {
    c.bf16_tflops = 989.4;
    c.fp8_tflops = 1978.9;
    c.hbm_Bps = p.totalGlobalMem > 90ull * GiB ? 3.9e12 : 3.35e12;
    c.nvlink_Bps_per_dir = 450e9;
    c.source = "H100 SXM datasheet: dense bf16 989.4, fp8 1979 TFLOP/s, HBM3 3.35 TB/s (NVL 3.9), NVLink 450 GB/s/dir";
  } else if (has("B200") || has("B300") || has("GB200") || has("GB300")) {
    c.bf16_tflops = 2500;
    c.fp8_tflops = 5000;
    c.fp4_tflops = has("B300") ? 15000 : 10000;
    c.hbm_Bps = 8.0e12;
    c.nvlink_Bps_per_dir = 900e9;
    c.source = "Blackwell datasheet upper bounds: dense bf16 2.5, fp8 5, fp4 10 (B300: 15) PFLOP/s, HBM3e 8 TB/s";
  } else {
    c.source = "unknown GPU: only memory and PCIe ceilings from attributes";
  }
  if (c.hbm_Bps == 0) {
    int mclk = 0;
    if (cudaDeviceGetAttribute(&mclk, cudaDevAttrMemoryClockRate, dev) == cudaSuccess && mclk > 0)
      c.hbm_Bps = 2.0 * mclk * 1e3 * p.memoryBusWidth / 8.0;
    cudaGetLastError();
  }
  Nvml& n = nvml();
  nvmlDevice_t h = n.handle(dev);
  unsigned gen = 0, width = 0;
  if (h && n.pcie_max_gen && n.pcie_max_width && n.pcie_max_gen(h, &gen) == 0 && n.pcie_max_width(h, &width) == 0 &&
      gen > 0 && width > 0) {
    c.pcie_Bps_per_dir = pcie_Bps(gen, width);
  } else {
    c.pcie_Bps_per_dir = pcie_Bps(5, 16);  // assume Gen5 x16 when NVML is missing
  }
  return c;
}

Json ceilings_json(const Ceilings& c) {
  Json j = Json::object();
  j["bf16_dense_tflops"] = c.bf16_tflops;
  j["fp8_dense_tflops"] = c.fp8_tflops;
  j["fp4_dense_tflops"] = c.fp4_tflops;
  j["hbm_Bps"] = c.hbm_Bps;
  j["pcie_Bps_per_direction"] = c.pcie_Bps_per_dir;
  j["nvlink_Bps_per_direction"] = c.nvlink_Bps_per_dir;
  j["source"] = c.source;
  return j;
}

}  // namespace rb
