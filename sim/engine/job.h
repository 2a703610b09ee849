// A job: the system a workload runs on and how it is launched -- everything the engine needs
// besides the OpGraph. A scenario file gives one (sim::job_of); a workload that brings its own
// graph (an imported XLA module) gets one from a preset, a GPU count and --set (sim::load_job).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "hardware_models/system_spec.h"
#include "workloads/training_config.h"

namespace racksim::sim {

// The system section of a scenario, resolved.
struct SystemConfig {
  std::string preset;
  int gpus = 1;
  std::optional<std::string> calibration;  // name under hardware_models/calibrated/, or a path; the one applied
  // Where `calibration` came from: "scenario" (system.calibration), "default" (none named: the
  // calibration fitted against the preset, hw::default_calibration_for), "none" (system.calibration:
  // none), "unavailable" (none named and none fitted against the preset).
  std::string calibration_source = "unavailable";
  hw::SystemSpec spec;                     // preset with overrides applied (and calibration, later)
  nlohmann::json overrides = nlohmann::json::object();  // as given, for the report
};

struct Job {
  SystemConfig system;
  // The communicators' sizes and strides (sim/engine/replay.cpp, group_shape) follow Megatron's rank
  // grids over these; an imported program has tp from its collectives and dp over the rest.
  workloads::Parallelism parallelism;
  sim::Dtype precision = sim::Dtype::bf16;  // matmul precision: the dense peak the report's MFU divides by
  bool cuda_graphs = true;                // kernels launched from CUDA graphs (else eagerly)
  bool nvls = true;                       // NVLink SHARP collectives where the system has them
  // CUDA_DEVICE_MAX_CONNECTIONS (workloads/training_config.h): above 1 a collective reaches the GPU behind the
  // compute kernels resident when it became ready. A scenario's builder reads the training config; an HLO replay
  // reads this (XLA's default 8; `replay --set training.cuda_device_max_connections=1` dispatches in launch order).
  int cuda_device_max_connections = 8;
  // The framework allocator's share of the card's memory (JAX's XLA_PYTHON_CLIENT_MEM_FRACTION), 0: none beyond the
  // card's capacity less the preset's reserved bytes. The report's capacity, and so `fits`, is the smaller.
  double allocator_fraction = 0;
  // The model's routed experts (0: a dense model, or unknown): a token's top-k experts are distinct, so the
  // expert exchanges count the GPUs and domains they reach by drawing without replacement.
  int moe_experts = 0;
  // Its group-limited routing (model.moe.router_groups / router_group_top_k; 1: none): the GPUs and domains a token
  // reaches are counted within the groups it may pick.
  int moe_router_groups = 1;
  int moe_router_group_top_k = 1;
};

}  // namespace racksim::sim
