// The training step of one rank role as a DAG of operations (DESIGN.md: "the graph is the
// workload"). Vector order is the order the host issues work; ops on one stream run in that
// order; `deps` add cross-stream dependencies. Memory is tensors allocated when an op starts
// and freed when an op ends.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/huge_page_allocator.h"
#include "core/names.h"
#include "core/small_vector.h"
#include "hardware_models/collective_op.h"

namespace racksim::workloads {

enum class OpKind : uint8_t { kernel, collective, copy_h2d, copy_d2h };
// comm: collectives on the critical path (tensor/context/expert parallel, pipeline sends);
// comm_dp, comm_grad: the data-parallel collectives, one stream per communicator (Builder::data_parallel_stream):
// with separate all-gather communicators (Megatron's --create-all-gather-group; XLA's scanned loops) comm_dp the
// parameter all-gathers and comm_grad the gradient reductions; with one communicator per group (Megatron's and
// PyTorch's default) comm_grad the dense group's gathers and reductions, comm_dp the expert group's. Apart from the
// pipeline sends (comm), so a gradient bucket never delays a pipeline send. comm_ep: MoE token
// exchanges (and their etp collectives) on a stream of their own, as Megatron-Core's EP overlap runs
// them, so a TP collective never queues behind an exchange that overlaps another micro-batch's compute.
enum class StreamKind : uint8_t { compute, comm, h2d, d2h, comm_dp, comm_grad, comm_ep };
constexpr int kStreamCount = 7;
enum class ExecUnit : uint8_t { tensor, vector };
// What moves a collective's data: an NCCL kernel (SMs shared with compute, slowed beside it), or
// Transformer Engine's userbuffers under tp_comm_overlap: copy engines (ring exchange: no SMs, not
// slowed by compute) or a kernel on SMs set aside for it (pipeline and bulk overlaps: the GEMM beside
// runs on the rest, so neither slows the other beyond the SMs it gave up).
enum class CommKernel : uint8_t { nccl, copy_engine, dedicated_sms };
enum class GraphLaunch : uint8_t { step, eager, captured };
enum class Phase : uint8_t { forward, backward, recompute, optimizer };
// Which communicator a collective runs on. dp_cp: data and context parallel ranks together
// (gradients of replicated weights); ep, etp, edp: expert parallel, expert tensor parallel and expert
// data parallel (tp·cp·dp/(ep·etp) ranks holding the same experts), Megatron's expert grid etp-ep-edp.
// Hybrid sharding (training.parallelism.dp_shard = s < dp, r = dp/s replicas): dp_shard: the dense shard group,
// dp_cp's innermost s·cp ranks; edp_shard: the expert shard group, edp/r ranks; dp_replicate: the r ranks holding
// the same shard (stride tp·cp·s, the same ranks for dense and expert parts).
// embd: Megatron-Core's embedding group, the first and the last rank of a pipeline group (parallel_state.py
// default_embedding_ranks): 2 ranks, stride (pp-1)·tp·cp·dp, over which the two copies of the word embeddings'
// gradients are all-reduced (finalize_model_grads); one rank when pp is 1.
// world: every GPU of the job (the distributed optimizer's gradient-norm reduction).
enum class CommGroup : uint8_t { dp, tp, pp, cp, ep, dp_cp, edp, etp, dp_shard, edp_shard, dp_replicate, embd, world };
enum class MemCategory : uint8_t { weights, gradients, optimizer, activations, communication_buffers, other };
constexpr int kMemCategoryCount = 6;

// The names a report, a trace and the HTML page print (core/names.h).
inline constexpr std::array<sim::EnumName<StreamKind>, kStreamCount> kStreamKindNames = {
    {{StreamKind::compute, "compute"},
     {StreamKind::comm, "communication"},
     {StreamKind::h2d, "H2D"},
     {StreamKind::d2h, "D2H"},
     {StreamKind::comm_dp, "parameter gathers"},
     {StreamKind::comm_grad, "gradient reductions"},
     {StreamKind::comm_ep, "expert exchanges"}}};
inline constexpr std::array<sim::EnumName<Phase>, 4> kPhaseNames = {
    {{Phase::forward, "forward"}, {Phase::backward, "backward"}, {Phase::recompute, "recompute"}, {Phase::optimizer, "optimizer"}}};
inline constexpr std::array<sim::EnumName<CommGroup>, 13> kCommGroupNames = {
    {{CommGroup::dp, "dp"}, {CommGroup::tp, "tp"}, {CommGroup::pp, "pp"}, {CommGroup::cp, "cp"},
     {CommGroup::ep, "ep"}, {CommGroup::dp_cp, "dp_cp"}, {CommGroup::edp, "edp"}, {CommGroup::etp, "etp"},
     {CommGroup::dp_shard, "dp_shard"}, {CommGroup::edp_shard, "edp_shard"}, {CommGroup::dp_replicate, "dp_replicate"},
     {CommGroup::embd, "embd"}, {CommGroup::world, "world"}}};
inline constexpr std::array<sim::EnumName<MemCategory>, kMemCategoryCount> kMemCategoryNames = {
    {{MemCategory::weights, "weights"},
     {MemCategory::gradients, "gradients"},
     {MemCategory::optimizer, "optimizer"},
     {MemCategory::activations, "activations"},
     {MemCategory::communication_buffers, "communication_buffers"},
     {MemCategory::other, "other"}}};

std::string to_string(StreamKind s);
std::string to_string(Phase p);
std::string to_string(CommGroup g);
std::string to_string(MemCategory c);

using OpId = uint32_t;
using TensorId = uint32_t;
inline constexpr OpId kNoOp = 0xffffffffu;

// Names of ops and tensors are built only when something asks for them (a trace, a message): a graph
// of a million ops holds no string per op. A name is an interned base ("qkv.dgrad") and a prefix of
// up to two numbers: "mb{a}.v{b}." (micro-batch, virtual stage), "mb{a}.L{b}." (micro-batch,
// layer), "rank{a}." (pipeline rank) or "cb{a}." (an XLA command-buffer segment).
enum class NamePrefix : uint8_t { none, micro_vstage, micro_layer, rank, command_buffer };
struct Name {
  uint32_t base = 0;  // OpGraph::names id (0: "")
  uint32_t a = 0, b = 0;
  NamePrefix prefix = NamePrefix::none;
  // A string literal not interned yet (an op made by hand, as tests do): OpGraph::add and
  // OpGraph::tensor intern it.
  const char* literal = nullptr;

  Name() = default;
  explicit Name(uint32_t base_id, NamePrefix p = NamePrefix::none, uint32_t a_ = 0, uint32_t b_ = 0)
      : base(base_id), a(a_), b(b_), prefix(p) {}
  Name(const char* text) : literal(text) {}  // NOLINT: a literal converts, as a std::string did
};

// Interned strings. Copies rebuild the index (its keys view the strings of their own table).
class NameTable {
 public:
  NameTable() { intern(""); }
  NameTable(const NameTable& o) { *this = o; }
  NameTable(NameTable&&) noexcept = default;
  NameTable& operator=(const NameTable& o) {
    if (this == &o) return *this;
    strings_.clear();
    views_.clear();
    hashes_.clear();
    slots_.clear();
    group_.clear();
    for (const auto& x : o.strings_) intern(x);
    return *this;
  }
  NameTable& operator=(NameTable&&) noexcept = default;

  uint32_t intern(std::string_view s);
  const std::string& str(uint32_t id) const { return strings_[id]; }
  std::size_t size() const { return strings_.size(); }
  std::string format(const Name& n) const;
  // What a name's text before its first '.' identifies, as a number: equal keys for equal text
  // (the replay opens a CUDA graph when it changes: one per micro-step chunk).
  uint64_t first_component_key(const Name& n) const;

 private:
  std::deque<std::string> strings_;  // a deque: the strings never move, so views_ stay valid
  // Per id: a view of its string and its hash. A lookup compares the hash before the text, and reads
  // neither through the deque's blocks (interning is paid for every op a builder emits).
  std::vector<std::string_view> views_;
  std::vector<uint64_t> hashes_;
  std::vector<uint32_t> slots_;      // open addressing by hash: id + 1, 0 empty
  std::vector<uint64_t> group_;      // per id: first_component_key of a name with no prefix
  uint32_t find_or_add(std::string_view s, uint64_t h);
};

// Laid out for the replay and the builder, which touch every op (docs/decisions.md, "A smaller Op"):
// the first 64 bytes hold what the replay's setup pass reads (kind, rank, stream, deps) and the
// allocations; then the counts, the frees and the sizes; the name last (read only for a trace or a
// message). 224 bytes where it was 280: no field dropped or narrowed.
struct Op {
  uint16_t rank = 0;                  // which simulated rank (pipeline stage) runs it
  OpKind kind = OpKind::kernel;
  StreamKind stream = StreamKind::compute;
  Phase phase = Phase::forward;
  // kernel
  ExecUnit unit = ExecUnit::vector;
  sim::Dtype dtype = sim::Dtype::bf16;
  uint8_t attention : 2 = 0;          // fused attention: 1 forward, 2 backward (flash efficiency)
  uint8_t attention_causal : 1 = 1;
  uint8_t attention_mla : 1 = 0;      // multi-latent attention's core (d_qk 192, d_v 128): gpu.mla_attention_*_rate
  uint8_t accumulate_fp32 : 1 = 0;    // a wgrad GEMM adding into the fp32 main gradient: gpu.wgrad_accumulate_serial_bytes
  uint8_t accumulate_16bit : 1 = 0;   // the same into a 16-bit main gradient (TrainingConfig::grads_16bit): ..._16bit
  uint8_t wgrad : 1 = 0;              // a weight-gradient GEMM (both operands activation-like: the blockwise fp8 recipe
                                      // scales both 1x128, gpu.fp8_blockwise_wgrad_rate_ratio)
  uint8_t wgrad_te_layout : 1 = 0;    // a wgrad through Transformer Engine's cuBLASLt call (bf16 in NT:
                                      // gpu.bf16_wgrad_nt_time_ratio); not XLA's dots, PyTorch's or Megatron's own
  uint8_t te_softmax : 2 = 0;         // Transformer Engine's fused causal softmax, 1 forward, 2 backward, of rows of
                                      // attention_seq scores (gpu.te_softmax_*_GBps)
  // collective
  hw::CollectiveOp coll = hw::CollectiveOp::all_reduce;  // hardware_models/collective_op.h
  CommGroup group = CommGroup::dp;
  CommKernel comm_kernel = CommKernel::nccl;
  uint8_t comm_sms = 0;               // CommKernel::dedicated_sms: how many
  // A collective on its own stream with more than one hardware queue (CUDA's default 8, XLA's; 32 under
  // Megatron-Core's EP overlap; training.cuda_device_max_connections): its CTAs get SMs only once the compute
  // kernels resident when it became ready, and those released by the same op, have drained
  // (sim/engine/replay.cpp, SmWait). Dispatched in launch order on one queue (CUDA_DEVICE_MAX_CONNECTIONS=1,
  // Megatron's usual setting) it starts at once, as do userbuffer exchanges (SMs set aside, copy engines).
  bool queues_behind_compute = false;
  // How the host launches this op: per the job's switch (training.cuda_graphs: the whole micro-step from
  // graphs or all eager), or, under training.cuda_graph_scope, from the layer's Transformer Engine graph
  // (captured; graph_start: the graph's first op, where the host pays one graph launch) or eagerly.
  GraphLaunch graph = GraphLaunch::step;
  bool graph_start = false;
  // host work of a runtime before this op can be launched (HLO replay: XLA command buffers)
  bool host_program_start = false;    // the first op of one program execution
  bool host_rerecord = false;         // the command buffer is re-recorded (its buffers moved)
  // A host-side step timed by the host memory it streams (copy_bytes), not a copy over the link: the CPU Adam step
  // of an offloaded optimizer.
  bool host_compute = false;
  hw::ExpertLibrary expert_library = hw::ExpertLibrary::nccl;  // DeepEP/HybridEP: NIC once per domain, then NVLink
  // The host stops until this op has finished before it issues this one: a device-to-host copy
  // the framework reads (Megatron-Core's MoE token counts). kNoOp: no wait.
  OpId host_waits_for = kNoOp;
  SmallVec<OpId, 3> deps;
  SmallVec<TensorId, 2> allocs;       // allocated when the op starts
  int gemm_batch = 1;
  // An MoE token exchange (dispatch or combine, all_to_all over ep): how the tokens travel
  // (hw::estimate_expert_exchange). expert_top_k = 0: a plain all-to-all of coll_bytes.
  int expert_top_k = 0;               // experts per token; coll_bytes = tokens · top_k · bytes per token
  int expert_max_domains = 0;         // node-limited routing: NVLink domains per token (0: unlimited)
  int host_commands = 0;              // commands of the command buffer this op opens (0: none)
  int host_buffer_refs = 0;           // buffers those commands name
  float loop_indices = 0;             // output indices of an XLA loop-emitter kernel (0: none); a float fills padding
  SmallVec<TensorId, 3> frees;        // freed when the op ends
  double flops = 0;
  double hbm_bytes = 0;               // bytes read + written in HBM
  double coll_bytes = 0;              // nccl-tests size: the full (gathered) buffer
  double copy_bytes = 0;              // host copy
  std::array<double, 3> gemm_mnk{};   // for GEMM efficiency by shape; zeros if not a GEMM
  double sfu_ops = 0;                 // exponentials on the special-function units (softmax)
  double thread_bytes = 0;            // operand bytes per thread of a register-tiled row kernel
  double attention_seq = 0;           // key length of the fused attention
  // A framework's own host work before it issues this op, beyond the launch (Megatron-Core eager: the
  // op's share of its layer's Python, dispatcher and autograd time), seconds. 0: the launch only.
  double host_s = 0;
  Name name;
};
static_assert(sizeof(Op) == 224, "an op's size is what the replay's passes read (docs/performance.md); a new field "
                                  "must also be compared in same_op (op_graph.cpp)");

// Every field equal (names by their ids): the builder's layer templates check that a recorded layer left
// the ops before it untouched, and tests compare graphs built two ways.
bool same_op(const Op& a, const Op& b);

struct Tensor {
  Name name;
  uint16_t rank = 0;
  MemCategory category = MemCategory::activations;
  double bytes = 0;
  bool on_host = false;               // pinned host memory (offload), not HBM
};

struct OpGraph {
  std::vector<Op, HugePageAllocator<Op>> ops;
  std::vector<Tensor> tensors;
  std::vector<TensorId> resident;     // allocated for the whole step (weights, optimizer state, ...)
  int ranks = 1;                      // simulated ranks: one per pipeline stage (each a distinct role)
  // Program order (each rank's host issue order, and each stream's order) when it is not the ops' index
  // order: a permutation of the op ids, each rank's ops still contiguous. Empty: index order. (Megatron-Core's
  // combined 1F1B schedule interleaves two chunks that the builder emits one after the other.)
  std::vector<OpId> issue_order;
  // Collectives that span simulated ranks (one op on each rank: the embedding group's all-reduce, the gradient norm's):
  // each group starts on all its ranks together, when the last member is ready, its dependencies done and launched by
  // its rank's host (NCCL's ranks meet in the kernel).
  std::vector<std::vector<OpId>> joined;
  bool xla_program = false;           // an imported XLA program: eager launches go through XLA's thunks
  std::vector<std::string> notes;     // modelling choices worth a warning in the report
  NameTable names;                    // bases of the ops' and tensors' names
  // For the report: model FLOPs (6·N·tokens + attention, no recompute) and tokens of one
  // optimizer step of the whole job (all ranks). Set by whoever builds the graph.
  double model_flops_per_step = 0;
  double tokens_per_step = 0;

  OpId add(Op&& op) {
    if (op.name.literal) op.name = Name{names.intern(op.name.literal)};
    ops.push_back(std::move(op));
    return static_cast<OpId>(ops.size() - 1);
  }
  OpId add(const Op& op) { return add(Op(op)); }
  TensorId tensor(Name name, MemCategory c, double bytes, bool on_host = false, uint16_t rank = 0) {
    if (name.literal) name = Name{names.intern(name.literal)};
    tensors.push_back({name, rank, c, bytes, on_host});
    return static_cast<TensorId>(tensors.size() - 1);
  }
  TensorId tensor(std::string_view name, MemCategory c, double bytes, bool on_host = false, uint16_t rank = 0) {
    return tensor(plain_name(name), c, bytes, on_host, rank);
  }
  TensorId tensor(const char* name, MemCategory c, double bytes, bool on_host = false, uint16_t rank = 0) {
    return tensor(plain_name(name), c, bytes, on_host, rank);
  }
  Name plain_name(std::string_view full) { return Name{names.intern(full)}; }
  std::string name(const Name& n) const { return names.format(n); }
  std::string op_name(OpId i) const { return names.format(ops[i].name); }
  std::string tensor_name(TensorId i) const { return names.format(tensors[i].name); }
};

}  // namespace racksim::workloads
