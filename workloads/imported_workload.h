// What an importer hands the run layer: a graph someone else scheduled (an XLA module; later a
// trace), with what a report says about it that the graph alone does not. The run layer joins it
// with a Job (sim::load_job) and simulates it (sim::simulate); docs/architecture.md, "How to add an
// importer".
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "core/dtype.h"
#include "workloads/op_graph.h"

namespace racksim::workloads {

struct ImportedWorkload {
  // One rank role's step, with tokens_per_step and model_flops_per_step of the whole job, and the
  // importer's notes (the report's warnings).
  OpGraph graph;
  int gpus = 1;                            // the job's GPUs (as asked, or what the program was made for)
  int tp = 1;                              // size of the tensor-parallel groups its collectives use
  sim::Dtype precision = sim::Dtype::bf16;   // its matmul precision (the report's MFU peak)
  std::string name;                        // the report's scenario.name
  std::string file;                        // where it came from (messages)
  nlohmann::json model;                    // the report's scenario.model: what was imported
  nlohmann::json training = nlohmann::json::object();  // extra keys of scenario.training (e.g. framework)
  std::string section;                     // the report's section about the import ("hlo"), or ""
  nlohmann::json section_json;
};

}  // namespace racksim::workloads
