#include "sim/engine/replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <stdexcept>

#include "hardware_models/collectives.h"
#include "hardware_models/compute_model.h"
#include "core/event_queue.h"
#include "core/flow_network.h"

namespace racksim::sim {

using namespace racksim::workloads;

namespace {

// Communication streams whose collectives are paced beside compute: comm, comm_dp, comm_grad, comm_ep.
constexpr std::size_t kPaceLanes = 4;

// The communicator of each group in the launcher's rank order. Megatron-Core lays dense layers out as
// tp-cp-dp-pp and expert layers as etp-ep-edp-pp over the same ranks of a stage (parallel_state.py's
// two rank generators), so an EP group is strided by etp and an expert-data-parallel group by etp·ep.
struct GroupShape {
  int size = 1;
  int stride = 1;
};
GroupShape group_shape(const Job& job, CommGroup g) {
  const auto& p = job.parallelism;
  switch (g) {
    case CommGroup::tp: return {p.tp, 1};
    case CommGroup::cp: return {p.cp, p.tp};
    case CommGroup::dp: return {p.dp, p.tp * p.cp};
    case CommGroup::ep: return {p.ep, p.expert_tp()};
    case CommGroup::etp: return {p.expert_tp(), 1};
    case CommGroup::pp: return {p.pp, p.tp * p.cp * p.dp};
    case CommGroup::dp_cp: return {p.dp * p.cp, p.tp};
    case CommGroup::edp: return {p.expert_dp(), p.expert_tp() * p.ep};
    // Hybrid sharding: the shard group is the innermost dp_shard of dp (with cp: the innermost dp_shard·cp of
    // dp·cp), the replicas stride over it; in the expert grid the same replicas split edp (scenario check).
    case CommGroup::dp_shard: return {p.dp_shard_size() * p.cp, p.tp};
    case CommGroup::edp_shard: return {p.expert_dp() / p.dp_replicas(), p.expert_tp() * p.ep};
    case CommGroup::dp_replicate: return {p.dp_replicas(), p.tp * p.cp * p.dp_shard_size()};
    // The first and the last stage of a pipeline group: its members 0 and pp-1.
    case CommGroup::embd: return {p.pp > 1 ? 2 : 1, p.pp > 1 ? (p.pp - 1) * p.tp * p.cp * p.dp : 1};
    case CommGroup::world: return {p.tp * p.cp * p.dp * p.pp, 1};
  }
  return {};
}

// What an event or a finished flow does, with the op it concerns: tag = (what << 32) | op id. The
// queue and the network call back with the tag (no std::function per event or flow).
enum class Then : uint64_t {
  finish_empty,     // queue: a copy of no bytes
  finish_no_peers,  // queue: a collective in a group of one
  update_pace,      // queue: the op id is a rank; re-pace its collectives once the instant is over
  move_data,        // queue: a collective's latency is over; its data moves
  kernel_start,     // queue: an eager kernel's boundary on its stream is over; its work starts
  kernel_done,      // flow
  h2d_done,         // flow
  d2h_done,         // flow
  host_done,        // flow: a host-side step (Op::host_compute)
  collective_done,  // flow
};
constexpr uint64_t tag(Then what, uint64_t id) { return (static_cast<uint64_t>(what) << 32) | id; }

class Replayer final : private EventQueue::Sink, private FlowNetwork::CompletionSink {
 public:
  Replayer(const OpGraph& g, const Job& job, const ReplayOptions& opt)
      : g_(g), job_(job), sys_(job.system.spec), opt_(opt), net_(q_, /*external_events=*/true) {
    q_.set_sink(this);
    net_.set_completion_sink(this);
    const auto& h = sys_.host;
    // Every rank of a role does the same, so host memory is split among the GPUs that share it -- but a job smaller
    // than a host shares it with fewer. A host link of several GPUs (a Grace superchip's NVLink-C2C) is split
    // whatever the job: each GPU has its own share of the link (nvbandwidth on a GB300 tray: 211.5 GB/s host to device
    // for one GPU alone, the 0.94 of half of 450; shared reference hardware_specs.md D, S55).
    const int link_sharers = std::max(1, h.gpus_per_link);
    const int host_sharers = h.gpus_sharing_memory(job.system.gpus);
    const double link = h.link_bandwidth_per_direction_Bps * h.copy_efficiency / link_sharers;
    // One set of resources per simulated rank (pipeline stage): they are different GPUs.
    for (int r = 0; r < std::max(1, g.ranks); ++r) {
      const std::string p = g.ranks > 1 ? fmt::format("rank{}.", r) : "";
      Res x;
      x.sm = net_.add_resource(p + "sm", 1.0);
      x.hbm = net_.add_resource(p + "hbm", sys_.gpu.hbm_bandwidth_Bps * sys_.gpu.hbm_efficiency);
      x.h2d = net_.add_resource(p + "host_link_h2d", link);
      x.d2h = net_.add_resource(p + "host_link_d2h", link);
      x.host_both = net_.add_resource(p + "host_link_both",
                                      h.link_bandwidth_both_directions_Bps * h.copy_efficiency / link_sharers);
      x.host_mem = net_.add_resource(p + "host_memory", h.memory_bandwidth_Bps / host_sharers);
      x.nvlink = net_.add_resource(p + "nvlink", sys_.scale_up.bandwidth_per_direction_Bps);
      x.nic = net_.add_resource(p + "nic", sys_.scale_out.nic_bandwidth_Bps * sys_.scale_out.nics_per_gpu *
                                               sys_.scale_out.nic_efficiency);
      for (std::size_t k = 0; k < x.pace.size(); ++k) x.pace[k] = net_.add_resource(p + fmt::format("collective_pace{}", k), 1.0);
      res_of_.push_back(x);
    }
  }

  ReplayResult run() {
    const std::size_t n = g_.ops.size();
    if (!g_.joined.empty()) join_index_.assign(n, -1);
    for (std::size_t k = 0; k < g_.joined.size(); ++k) {
      const auto& members = g_.joined[k];
      std::vector<int> ranks;
      for (OpId m : members) {
        if (m >= n || g_.ops[m].kind != OpKind::collective || join_index_[m] >= 0)
          throw std::logic_error(fmt::format("joined group {}: member {} is out of range, not a collective, or in another group", k, m));
        ranks.push_back(g_.ops[m].rank);
      }
      std::sort(ranks.begin(), ranks.end());
      if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end())
        throw std::logic_error(fmt::format("joined group {}: two members on one rank", k));
      for (OpId m : members) join_index_[m] = static_cast<int32_t>(joins_.size());
      joins_.push_back(Join{k, members.size()});
    }
    res_.ops.resize(n);
    pending_.assign(n, 0);
    done_.assign(n, 0);
    running_.assign(n, 0);
    coll_cost_.assign(n, nullptr);
    // Stream order is program order per (rank, stream); dependencies may point anywhere
    // (pipeline stages wait for later-built stages). Successors are stored flat (CSR), each op's
    // in the order they were found: its dependents by index, then its stream successor.
    std::vector<std::array<int64_t, kStreamCount>> last_on_stream(res_of_.size());
    for (auto& a : last_on_stream) a.fill(-1);
    ops_on_stream_.assign(res_of_.size(), {});
    succ_start_.assign(n + 1, 0);
    meta_.resize(n);
    // The edges (predecessor, op) in the order the successor lists are filled: each op's dependencies,
    // then its stream predecessor. Kept here so that filling them does not read every op a second time
    // (a graph of 100,000 ops does not stay in the caches between two passes).
    std::vector<std::pair<OpId, OpId>> edges;
    edges.reserve(2 * n);
    const bool reordered = !g_.issue_order.empty();
    if (reordered && g_.issue_order.size() != n) throw std::logic_error("replay: issue_order is not a permutation of the ops");
    // `order(at)`: the op at position `at` of program order. One loop per kind of order, so that the usual one
    // (index order) keeps its tight loop.
    const auto setup = [&](auto order) {
      for (std::size_t at = 0; at < n; ++at) {
        // This pass reads each op's first 64 bytes only (rank, stream, kind, phase, deps): one or two cache
        // lines (an op is 3.5 lines long, so every other op starts mid-line).
        const std::size_t i = order(at);
        if (at + kAheadFirstLine < n) {
          const char* p = reinterpret_cast<const char*>(&g_.ops[order(at + kAheadFirstLine)]);
          __builtin_prefetch(p);
          __builtin_prefetch(p + 63);
        }
        const Op& op = g_.ops[i];
        if (op.rank >= res_of_.size()) throw std::logic_error(fmt::format("op {} on rank {} of {}", g_.op_name(i), op.rank, res_of_.size()));
        meta_[i] = OpMeta{op.rank, op.stream, op.kind, op.phase};
        ++ops_on_stream_[op.rank][static_cast<int>(op.stream)];
        for (OpId d : op.deps) {
          if (d >= n || d == i) throw std::logic_error(fmt::format("op {} has a bad dependency {}", g_.op_name(i), d));
          ++succ_start_[d + 1];
          ++pending_[i];
          edges.emplace_back(d, static_cast<OpId>(i));
        }
        auto& last = last_on_stream[op.rank][static_cast<int>(op.stream)];
        if (last >= 0) {
          ++succ_start_[last + 1];
          ++pending_[i];
          edges.emplace_back(static_cast<OpId>(last), static_cast<OpId>(i));
        }
        last = static_cast<int64_t>(i);
        ++pending_[i];  // its launch on the host thread
      }
    };
    if (reordered) setup([this](std::size_t at) { return static_cast<std::size_t>(g_.issue_order[at]); });
    else setup([](std::size_t at) { return at; });
    for (std::size_t i = 0; i < n; ++i) succ_start_[i + 1] += succ_start_[i];
    succ_.assign(succ_start_[n], 0);
    {
      std::vector<uint32_t> fill(succ_start_.begin(), succ_start_.end() - 1);
      for (const auto& [from, to] : edges) succ_[fill[from]++] = to;
    }
    schedule_launches();
    run_events();
    // (The step time, the latest end, is kept as ops finish: this check reads a byte per op, not its record.)
    for (std::size_t i = 0; i < n; ++i) {
      if (!done_[i])
        throw std::logic_error(fmt::format("replay stalled: op '{}' never ran (dependency cycle?)", g_.op_name(static_cast<OpId>(i))));
    }
    compute_breakdown();
    compute_memory();
    if (opt_.rank_busy) compute_rank_busy();
    return std::move(res_);
  }

 private:
  const OpGraph& g_;
  const Job& job_;
  const hw::SystemSpec& sys_;
  const ReplayOptions opt_;
  EventQueue q_;
  FlowNetwork net_;
  struct Res {
    FlowNetwork::ResourceId sm, hbm, h2d, d2h, host_both, host_mem, nvlink, nic;
    double sm_reserved = 0;  // fraction of SMs held by collective kernels
    std::vector<OpId> running_kernels;  // compute kernels resident on the SMs now (any order)
    std::size_t running_count = 0;
    // Per communication stream: a resource whose capacity is the running collective's pace, lower
    // while compute kernels are resident (see pace_factor).
    std::array<FlowNetwork::ResourceId, kPaceLanes> pace{};
    std::array<double, kPaceLanes> pace_cap{};         // the running collective's standalone rate (0: none)
    std::array<double, kPaceLanes> pace_cap_beside{};  // its rate while compute kernels are resident
    bool paced_down = false;           // the lanes run at the slowed pace (compute was resident)
  };
  // A collective on its own stream, under CUDA's default several hardware queues, needs SMs that
  // resident compute kernels hold (a GEMM's CTAs leave no room beside them), and it loses the race
  // for them to the compute stream's next kernel released by the same op (its dependency reaches it
  // through an event wait): it waits for the kernels resident when it became ready and for those,
  // not for kernels that start later. It shows as starting when it gets its SMs.
  // Measured on 2 x H200 (calibration/data/h200x2-2026-11-29-mechanisms): XLA's gradient all-reduces
  // began in the last wave of the GEMM meant to hide them; in PyTorch with default queues an
  // all-reduce finished after the next GEMM in 20 of 20 trials, beside it with one queue.
  struct SmWait {
    int blockers = 0;  // then begin_collective
  };
  // While finish() releases an op's successors (depth > 0), the queuing collectives that become
  // ready: each also waits for the kernels among those successors.
  int releasing_depth_ = 0;
  std::vector<OpId> ready_queuing_;
  std::map<OpId, SmWait> sm_wait_;                      // collective -> what it waits for
  std::map<OpId, std::vector<OpId>> blocked_by_kernel_;  // kernel -> collectives waiting on it
  std::vector<Res> res_of_;
  ReplayResult res_;
  std::vector<int> pending_;
  std::vector<uint32_t> succ_start_;  // succ_[succ_start_[i] .. succ_start_[i + 1]) follow op i
  std::vector<OpId> succ_;
  std::vector<char> done_;     // per op
  std::vector<char> running_;  // per op: a compute kernel resident on the SMs now
  std::vector<const hw::CollectiveCost*> coll_cost_;  // per collective op: its cost (coll_cache_ entries)
  // Planned launches (see issue_launches): per op its launch end in ps (-1: not issued yet) and the sequence
  // number its queue event would have had (0 for those planned before the run, which came ahead of every queue
  // event of their instant); and the planned launches an op waits for with nothing else left, a min-heap by
  // (time, sequence, op).
  struct Planned {
    int64_t ps = -1;
    uint64_t seq = 0;
  };
  std::vector<Planned> planned_;
  struct Due {
    int64_t ps;
    uint64_t seq;
    OpId id;
  };
  std::vector<Due> due_;
  struct DueLater {
    bool operator()(const Due& a, const Due& b) const {
      return a.ps != b.ps ? a.ps > b.ps : a.seq != b.seq ? a.seq > b.seq : a.id > b.id;
    }
  };
  // The sequence number of the event being run (a planned launch's, when one is taken): a launch of this
  // instant with a lower number has had its turn (with the same number: it is the one being taken, or both
  // were planned before the run, which come first at their instant).
  uint64_t current_seq_ = 0;
  bool launch_past(const Planned& p) const {
    const int64_t now = q_.now().ps;
    return p.ps < now || (p.ps == now && p.seq <= current_seq_);
  }
  // What the passes over every op read, 6 bytes an op instead of its 280: a graph of 100,000 ops does
  // not fit in the caches, and a pass that reads one field of each op fetches a line of each.
  struct OpMeta {
    uint16_t rank;
    StreamKind stream;
    OpKind kind;
    Phase phase;
    bool host_waits = false;  // a host waits for it (host_waiters_ has it): finish() looks it up only then
  };
  std::vector<OpMeta> meta_;
  // Ops per rank and stream: the timeline passes size their lists with it (no regrowth and copy).
  std::vector<std::array<uint32_t, kStreamCount>> ops_on_stream_;
  // Ops are read ahead of use where the next ones are known (no effect on results).
  static constexpr std::size_t kAhead = 8;
  // A pass that reads one line of each op does little per op: it reads further ahead.
  static constexpr std::size_t kAheadFirstLine = 16;
  void prefetch_op(OpId id) const {
    const char* p = reinterpret_cast<const char*>(&g_.ops[id]);
    for (std::size_t off = 0; off < sizeof(Op); off += 64) __builtin_prefetch(p + off);
  }

  // The op at position `at` of program order (OpGraph::issue_order, or index order).
  std::size_t program_op(std::size_t at) const { return g_.issue_order.empty() ? at : g_.issue_order[at]; }

  std::span<const OpId> successors(OpId id) const {
    return {succ_.data() + succ_start_[id], succ_.data() + succ_start_[id + 1]};
  }

  // The event loop. Planned launches come in (time, sequence) order among the queue's and the network's
  // events: those planned before the run (every rank's up to its first host wait) ahead of the events of their
  // instant, in (time, op) order, and those issued during the run where their queue events were. Only those
  // that start an op are visited (due_): the others only count down their op's wait, which release() counts
  // when the op's last dependency finishes.
  void run_events() {
    // The flow network's completion events are kept by the network (external_events) with the
    // sequence numbers they would have had, and so are the events of the current instant (now_events_):
    // the sources merge in (time, sequence) order.
    for (;;) {
      SimTime tq = SimTime::max(), tn = SimTime::max();
      uint64_t sq = 0, sn = 0;
      bool has_q = q_.peek(tq, sq);
      const bool has_now = next_now_ < now_events_.size();
      // The queue's side: its heap or the instant's list, whichever is first.
      const bool now_first = has_now && (!has_q || now_events_[next_now_].at < tq ||
                                         (now_events_[next_now_].at == tq && now_events_[next_now_].seq < sq));
      if (now_first) {
        tq = now_events_[next_now_].at;
        sq = now_events_[next_now_].seq;
        has_q = true;
      }
      const bool has_n = net_.pending_event(tn, sn);
      const bool has_l = !due_.empty();
      if (!has_q && !has_n && !has_l) break;
      const bool net_first = has_n && (!has_q || tn < tq || (tn == tq && sn < sq));
      const SimTime te = net_first ? tn : tq;  // the earliest of the queue's and the network's
      const uint64_t se = net_first ? sn : sq;
      if (has_l && (!(has_q || has_n) || due_.front().ps < te.ps ||
                    (due_.front().ps == te.ps && due_.front().seq < se))) {
        const Due d = due_.front();
        std::pop_heap(due_.begin(), due_.end(), DueLater{});
        due_.pop_back();
        q_.advance_to(SimTime::from_ps(d.ps));
        current_seq_ = d.seq;
        pending_[d.id] = 0;  // its launch was all it waited for
        start(d.id);
      } else if (net_first) {
        q_.advance_to(tn);
        current_seq_ = sn;
        net_.run_pending_event();
      } else if (now_first) {
        q_.advance_to(now_events_[next_now_].at);  // (the current instant: events are never behind it)
        current_seq_ = now_events_[next_now_].seq;
        const uint64_t t = now_events_[next_now_++].tag;
        if (next_now_ == now_events_.size()) {  // drained: reuse the storage
          now_events_.clear();
          next_now_ = 0;
        }
        on_event(t);
      } else {
        current_seq_ = sq;
        q_.step();
      }
    }
  }

  // An event at the current instant (a kernel's pace check, a copy of no bytes, a collective in a group
  // of one), kept in a list instead of the queue's heap: it takes the sequence number the queue would
  // have given it, so the order of events is the queue's, without a heap push and pop per kernel.
  struct NowEvent {
    SimTime at;
    uint64_t seq;
    uint64_t tag;
  };
  std::vector<NowEvent> now_events_;  // in (time, sequence) order: appended at the current instant
  std::size_t next_now_ = 0;
  void schedule_now(uint64_t t) { now_events_.push_back(NowEvent{q_.now(), q_.reserve_seq(), t}); }

  double now_s() const { return q_.now().seconds(); }

  void on_event(uint64_t t) override {
    const auto id = static_cast<OpId>(t & 0xffffffffu);
    switch (static_cast<Then>(t >> 32)) {
      case Then::finish_empty: finish(id, "empty"); break;
      case Then::finish_no_peers: finish(id, "no_peers"); break;
      case Then::update_pace: update_pace(res_of_[id]); break;
      case Then::move_data: move_collective_data(id); break;
      case Then::kernel_start: start_kernel_work(id, g_.ops[id]); break;
      default: throw std::logic_error(fmt::format("replay: event tag {:#x} is not a queue event", t));
    }
  }
  void flow_done(FlowNetwork::FlowId, uint64_t t) override {
    const auto id = static_cast<OpId>(t & 0xffffffffu);
    switch (static_cast<Then>(t >> 32)) {
      case Then::kernel_done: finish(id, ""); break;
      case Then::h2d_done: finish(id, "host_link_h2d"); break;
      case Then::d2h_done: finish(id, "host_link_d2h"); break;
      case Then::host_done: finish(id, "host_memory"); break;
      case Then::collective_done: collective_done(id); break;
      default: throw std::logic_error(fmt::format("replay: flow tag {:#x} is not a flow's", t));
    }
  }

  // The host thread issues every op in program order, each after its host work (the launch, a
  // framework's own time). It runs ahead of the GPU except where the framework reads a result back
  // (Op::host_waits_for): there it stops until that op has finished, then goes on from that time.
  // Launches up to each rank's first wait are planned before the run (run_events takes them ahead of queue
  // events of the same instant); the rank's later ones are planned when the op it waits for finishes, each
  // with the sequence number its queue event would have had (run_events takes it where it took that event).
  void schedule_launches() {
    const std::size_t ranks = res_of_.size();
    host_s_.assign(ranks, 0.0);
    micro_step_.assign(ranks, g_.names.first_component_key(Name{}));  // ""
    rank_ops_.assign(ranks, {});
    cursor_.assign(ranks, 0);
    for (std::size_t r = 0; r < ranks; ++r) {  // sized once (no regrowth and copy)
      std::size_t on_rank = 0;
      for (uint32_t c : ops_on_stream_[r]) on_rank += c;
      rank_ops_[r].reserve(on_rank);
    }
    if (g_.issue_order.empty())
      for (std::size_t i = 0; i < g_.ops.size(); ++i) rank_ops_[meta_[i].rank].push_back(static_cast<OpId>(i));
    else
      for (OpId i : g_.issue_order) rank_ops_[meta_[i].rank].push_back(i);
    planned_.assign(g_.ops.size(), Planned{});
    for (std::size_t r = 0; r < ranks; ++r) issue_launches(static_cast<int>(r), /*before_run=*/true);
    // Ops that wait for their launch alone from the start ((time, 0, op) keys are distinct: one order).
    due_.clear();
    for (std::size_t i = 0; i < g_.ops.size(); ++i)
      if (planned_[i].ps >= 0 && pending_[i] == 1) due_.push_back(Due{planned_[i].ps, 0, static_cast<OpId>(i)});
    std::make_heap(due_.begin(), due_.end(), DueLater{});
  }
  // Issues the rank's ops from its cursor until one waits for an op that has not finished. Once the run is
  // under way each launch takes the queue's next sequence number, as the queue event that it was did: events
  // keep their numbers and their order. An op with nothing else left waits for it in due_ (its launch is
  // later than the current event: a later instant, or this one with a later number).
  void issue_launches(int rank, bool before_run) {
    const auto& l = sys_.launch;
    const bool graphs = job_.cuda_graphs;
    const std::vector<OpId>& ops = rank_ops_[rank];
    std::size_t& c = cursor_[rank];
    double& h = host_s_[rank];
    for (; c < ops.size(); ++c) {
      const OpId i = ops[c];
      if (c + kAhead < ops.size()) prefetch_op(ops[c + kAhead]);
      const Op& op = g_.ops[i];
      if (op.host_waits_for != workloads::kNoOp) {
        if (!done_[op.host_waits_for]) {
          host_waiters_[op.host_waits_for].push_back(rank);
          meta_[op.host_waits_for].host_waits = true;
          return;
        }
        h = std::max(h, res_.ops[op.host_waits_for].end_s);
      }
      // Everything the host does before the op can be issued is part of its launch (a GPU that
      // waits for it waits for the host: launch_overhead): the graph launch that opens a
      // micro-step chunk, and a runtime's own work (XLA command buffers, HLO replay).
      res_.ops[i].launch_start_s = h;
      if (g_.xla_program) {
        // XLA's own host work (HLO replay), measured as a whole: with command buffers the program,
        // each command-buffer execution's commands and re-recording (which include its graph
        // launch); without, the program and one thunk launch per kernel.
        if (op.host_program_start) h += graphs ? l.xla_program_s : (l.xla_thunk_program_s > 0 ? l.xla_thunk_program_s : l.xla_program_s);
        if (graphs && op.host_commands > 0)
          h += l.xla_command_s * op.host_commands + (op.host_rerecord ? l.xla_rerecord_ref_s * op.host_buffer_refs : 0.0);
        if (!graphs) h += l.xla_thunk_launch_s > 0 ? l.xla_thunk_launch_s : l.eager_kernel_launch_s;
        else if (l.xla_command_s <= 0) h += l.graph_kernel_launch_s;  // no XLA figures: plain graph nodes
      } else {
        const bool from_graph = op.graph == workloads::GraphLaunch::step ? graphs : op.graph == workloads::GraphLaunch::captured;
        if (graphs && op.graph == workloads::GraphLaunch::step) {
          // One CUDA graph per micro-step chunk (and one for the optimizer): a fixed launch each.
          const uint64_t ms = g_.names.first_component_key(op.name);  // the name's text before its first '.'
          if (ms != micro_step_[rank]) {
            h += l.graph_launch_s;
            micro_step_[rank] = ms;
          }
        } else if (op.graph_start) {
          h += l.graph_launch_s;  // a layer's Transformer Engine graph (training.cuda_graph_scope)
        }
        // A framework's measured host work includes its launches; otherwise the launch alone.
        h += op.host_s > 0 ? op.host_s : (from_graph ? l.graph_kernel_launch_s : l.eager_kernel_launch_s);
      }
      res_.ops[i].launch_end_s = h;
      Planned& p = planned_[i];
      p.ps = SimTime::from_seconds(h).ps;
      if (!before_run) {
        if (p.ps < q_.now().ps) throw std::logic_error(fmt::format("replay: op {} launched before now", g_.op_name(i)));
        p.seq = q_.reserve_seq();
        if (pending_[i] == 1) {
          due_.push_back(Due{p.ps, p.seq, i});
          std::push_heap(due_.begin(), due_.end(), DueLater{});
        }
      }
    }
  }
  std::vector<double> host_s_;                 // per rank: when its host thread is free
  std::vector<uint64_t> micro_step_;           // per rank: the micro-step chunk of its last graph launch
  std::vector<std::vector<OpId>> rank_ops_;    // per rank: its ops in program order
  std::vector<std::size_t> cursor_;            // per rank: the next op its host issues
  std::map<OpId, std::vector<int>> host_waiters_;  // op -> ranks whose host waits for it

  // One of the op's dependencies is done. Its launch is counted here: once the launch alone is left, the
  // op starts now if the launch has had its turn (launch_past), else at it; a launch not issued yet is
  // counted when issue_launches plans it.
  void release(OpId id) {
    // (A launch is never counted down here, so at least it is left.)
    if (--pending_[id] == 1 && planned_[id].ps >= 0) {
      if (launch_past(planned_[id])) {
        pending_[id] = 0;
        start(id);
      } else {
        due_.push_back(Due{planned_[id].ps, planned_[id].seq, id});
        std::push_heap(due_.begin(), due_.end(), DueLater{});
      }
    }
  }

  void finish(OpId id, const char* bound_by) {
    auto& r = res_.ops[id];
    r.end_s = now_s();
    res_.step_time_s = std::max(res_.step_time_s, r.end_s);
    if (r.bound_by.empty()) r.bound_by = bound_by;
    done_[id] = 1;
    if (meta_[id].host_waits) {
      const auto w = host_waiters_.find(id);
      const std::vector<int> ranks = std::move(w->second);
      host_waiters_.erase(w);
      for (int rank : ranks) issue_launches(rank, /*before_run=*/false);
    }
    // The pace check's place among this instant's events, when this kernel leaves none running.
    uint64_t pace_seq = 0;
    if (meta_[id].kind == OpKind::kernel) {
      Res& R = res_of_[meta_[id].rank];
      stop_running(R, id);
      // The next kernel usually starts in this same instant: decide once the instant is over.
      if (R.running_count == 0 && R.paced_down) pace_seq = q_.reserve_seq();
      if (auto b = blocked_by_kernel_.empty() ? blocked_by_kernel_.end() : blocked_by_kernel_.find(id);
          b != blocked_by_kernel_.end()) {
        const std::vector<OpId> waiting = std::move(b->second);
        blocked_by_kernel_.erase(b);
        for (OpId c : waiting)
          if (auto w = sm_wait_.find(c); w != sm_wait_.end() && --w->second.blockers == 0) grant_sms(c);
      }
    }
    // The ops this one releases start now; a collective among them that queues behind compute also
    // waits for the kernels among them (see SmWait).
    const std::size_t mark = ready_queuing_.size();
    ++releasing_depth_;
    for (OpId s : successors(id)) release(s);
    --releasing_depth_;
    for (std::size_t i = mark; i < ready_queuing_.size(); ++i) {
      const OpId c = ready_queuing_[i];
      SmWait& w = sm_wait_.at(c);
      for (OpId k : successors(id))
        if (meta_[k].kind == OpKind::kernel && meta_[k].rank == meta_[c].rank && running_[k]) {
          blocked_by_kernel_[k].push_back(c);
          ++w.blockers;
        }
      if (w.blockers == 0) grant_sms(c);
    }
    ready_queuing_.resize(mark);
    if (pace_seq != 0 && res_of_[meta_[id].rank].running_count == 0) {
      // No kernel started: the check goes in at the place it took (events added since come after it).
      // When one did start (the rule: the kernel this one released), the check would find a kernel resident
      // and do nothing, so it is left out: a kernel started in this instant ends one picosecond later at the
      // earliest, so none can leave the rank empty before the check's turn (the count was 0 before it).
      // A skipped sequence number leaves the other events' order as it was.
      const NowEvent e{q_.now(), pace_seq, tag(Then::update_pace, meta_[id].rank)};
      std::size_t at = now_events_.size();
      while (at > next_now_ && now_events_[at - 1].seq > pace_seq) --at;
      now_events_.insert(now_events_.begin() + static_cast<std::ptrdiff_t>(at), e);
    }
  }

  void grant_sms(OpId c) {
    sm_wait_.erase(c);
    begin_collective(c);
  }

  // A collective joined across ranks (OpGraph::joined) waits until every member is ready (its dependencies done and
  // launched), then all start now; and its data moves once every member's kernel has its SMs (begin_collective).
  void start(OpId id) {
    if (Join* j = join_of(id)) {
      if (++j->ready < j->members) return;  // the others' ranks have not reached it yet
      for (OpId other : g_.joined[j->group])
        if (other != id) start_now(other);
    }
    start_now(id);
  }
  struct Join {
    std::size_t group = 0, members = 0;  // group: its index in g_.joined
    std::size_t ready = 0, resident = 0;  // members started; members whose kernel has its SMs
  };
  std::vector<int32_t> join_index_;  // per op: its entry in joins_, -1 if none (empty without joined groups)
  std::vector<Join> joins_;
  Join* join_of(OpId id) {
    return join_index_.empty() || join_index_[id] < 0 ? nullptr : &joins_[static_cast<std::size_t>(join_index_[id])];
  }
  void start_now(OpId id) {
    const Op& op = g_.ops[id];
    auto& r = res_.ops[id];
    r.start_s = now_s();
    // The ops this one releases start when it ends: read the parts of them that start() reads now, its
    // first 192 bytes (the kernel's sizes end at byte 191). An op is 3.5 lines long, so every other op
    // starts mid-line and those bytes span four lines: the last one is fetched through byte 191.
    for (OpId s : successors(id)) {
      const char* p = reinterpret_cast<const char*>(&g_.ops[s]);
      __builtin_prefetch(p);
      __builtin_prefetch(p + 64);
      __builtin_prefetch(p + 128);
      __builtin_prefetch(p + 191);
      __builtin_prefetch(&res_.ops[s]);
    }
    switch (op.kind) {
      case OpKind::kernel: start_kernel(id, op); break;
      case OpKind::collective: start_collective(id, op); break;
      case OpKind::copy_h2d:
      case OpKind::copy_d2h: start_copy(id, op); break;
    }
  }

  // An eagerly launched kernel holds its stream for launch.eager_kernel_gap before its work starts (the stream's
  // front end, measured with the host out of the way: calibration/data/h200-2026-12-03-kernel-gap); a kernel replayed
  // from a CUDA graph does not. The gap takes no SM or HBM bandwidth from the flow network.
  bool launched_eagerly(const Op& op) const {
    if (g_.xla_program || op.graph == workloads::GraphLaunch::step) return !job_.cuda_graphs;
    return op.graph == workloads::GraphLaunch::eager;
  }
  // The kernel counts as running from the start of its gap: a collective released with it still yields it the SMs
  // (SmWait), and one beside it keeps the pace measured beside back-to-back eager kernels (their gaps included).
  void start_kernel(OpId id, const Op& op) {
    Res& R = res_of_[op.rank];
    start_running(R, id);
    if (R.running_count == 1) update_pace(R);
    const double gap_s = sys_.launch.eager_kernel_gap_s;
    if (gap_s > 0 && launched_eagerly(op)) {
      q_.schedule_tagged_after(SimTime::from_seconds(gap_s), tag(Then::kernel_start, id));
      return;
    }
    start_kernel_work(id, op);
  }
  void start_kernel_work(OpId id, const Op& op) {
    Res& R = res_of_[op.rank];
    hw::KernelWork w;
    w.tensor_core = op.unit == ExecUnit::tensor;
    w.dtype = op.dtype;
    w.flops = op.flops;
    w.hbm_bytes = op.hbm_bytes;
    w.m = op.gemm_mnk[0];
    w.n = op.gemm_mnk[1];
    w.k = op.gemm_mnk[2];
    w.batch = op.gemm_batch;
    w.sfu_ops = op.sfu_ops;
    w.thread_bytes = op.thread_bytes;
    w.loop_indices = op.loop_indices;
    w.attention = op.attention;
    w.attention_causal = op.attention_causal;
    w.attention_mla = op.attention_mla;
    w.accumulate_fp32 = op.accumulate_fp32;
    w.accumulate_16bit = op.accumulate_16bit;
    w.wgrad = op.wgrad;
    w.wgrad_te_layout = op.wgrad_te_layout;
    w.te_softmax = op.te_softmax;
    w.attention_seq = op.attention_seq;
    const hw::KernelTiming t = hw::kernel_timing(sys_, w);
    // The kernel's progress is measured in its own HBM bytes (or, with none, in compute
    // seconds), so it competes with copies and other kernels for HBM byte for byte under
    // max-min fairness; the SM resource carries its compute seconds per unit of progress.
    std::array<FlowNetwork::Use, 2> uses;
    std::size_t nuses = 0;
    double amount = 0;
    if (t.hbm_bytes > 0) {
      amount = t.hbm_bytes;
      uses[nuses++] = {R.hbm, 1.0};
      if (t.compute_s > 0) uses[nuses++] = {R.sm, t.compute_s / t.hbm_bytes};
    } else {
      amount = std::max(t.compute_s, t.min_s);
      if (t.compute_s > 0) uses[nuses++] = {R.sm, 1.0};
    }
    // Record what bounds it alone (for the trace); finish() keeps it.
    const double mem_s = t.hbm_bytes / (sys_.gpu.hbm_bandwidth_Bps * sys_.gpu.hbm_efficiency);
    res_.ops[id].bound_by = (t.compute_s <= t.min_s && mem_s <= t.min_s) ? "min_kernel_time"
                            : t.compute_s < mem_s                       ? "hbm"
                            : t.sfu_bound                               ? "sfu"
                            : t.occupancy_bound                         ? "occupancy"
                            : t.index_bound                             ? "loop_indices"
                            : op.unit == ExecUnit::tensor               ? "tensor_core"
                                                                        : "cuda_core";
    net_.start_flow_tagged(uses.data(), nuses, amount, tag(Then::kernel_done, id), amount / t.min_s);
  }
  struct CachedCost {
    hw::CollectiveCost cost;
    std::string_view algorithm, bound_by;  // as labels
  };
  using CollKey = std::tuple<int, double, int, int, int, int, int, int>;  // ..., library, placement_stage
  struct CollKeyHash {
    std::size_t operator()(const CollKey& k) const {
      // The bytes' bit pattern (std::hash<double> is a call to _Hash_bytes): a key's bytes are > 0 (start_collective),
      // so no two equal keys have different patterns (as 0.0 and -0.0 would).
      uint64_t h = std::bit_cast<uint64_t>(std::get<1>(k)) * 0x9e3779b97f4a7c15ull;
      for (const uint64_t v : {static_cast<uint64_t>(std::get<0>(k)), static_cast<uint64_t>(std::get<2>(k)),
                               static_cast<uint64_t>(std::get<3>(k)), static_cast<uint64_t>(std::get<4>(k)),
                               static_cast<uint64_t>(std::get<5>(k)), static_cast<uint64_t>(std::get<6>(k)),
                               static_cast<uint64_t>(std::get<7>(k))})
        h = (h ^ v) * 0x100000001b3ull;
      return static_cast<std::size_t>(h ^ (h >> 29));
    }
  };
  // Where each shape of group sits: the groups that stay inside a pipeline stage (all but the pipeline's and the
  // embedding's) are placed over that stage's ranks [stage·S, (stage+1)·S), S = the job's GPUs / pp (Megatron's
  // pp is the outermost dimension); the others over the whole job (hw::place_group_in_job scans them).
  struct Placed {
    int size, stride;
    hw::GroupPlacement place;
  };
  std::vector<std::vector<Placed>> placements_;  // [stage + 1]: the shapes placed (stage -1: over the whole job)
  std::vector<std::tuple<int, int, int>> warned_shapes_;  // (group kind, size, stride) warned about
  // Which placement a collective of `group` on simulated rank `rank` (its pipeline stage) takes: -1 over the
  // whole job, else the stage whose ranks it scans (0 for every stage when stages start at domain boundaries).
  int placement_stage(CommGroup group, int rank) const {
    if (group == CommGroup::pp || group == CommGroup::embd || group == CommGroup::world || job_.parallelism.pp <= 1) return -1;
    return stages_start_at_domains() ? 0 : rank;
  }
  // A pipeline send goes to one neighbour: the pair of ranks it joins (the sender's stage and the next one forward,
  // the one before backward; the last stage's forward send wraps to the first under virtual stages, and the first
  // stage's backward send to the last), placed where those two stages' ranks sit, not where the whole pipeline
  // group spans: 2 ranks at the stage stride S = tp·cp·dp and the lower stage's first members, or for the wrapping
  // pair the embedding group's shape (stages 0 and pp-1, stride (pp-1)·S) at the first stage's. So a hop between
  // two stages inside one NVLink domain runs over NVLink, whatever the other hops cross.
  std::pair<GroupShape, int> pipeline_pair(const Op& op) const {
    const int pp = job_.parallelism.pp, stride = group_shape(job_, CommGroup::pp).stride;
    const int from = op.rank, to = (op.phase == Phase::backward ? from - 1 + pp : from + 1) % pp;
    if (std::abs(to - from) != 1) return {GroupShape{2, (pp - 1) * stride}, 0};
    return {GroupShape{2, stride}, std::min(from, to)};
  }
  bool stages_start_at_domains() const {
    return (job_.system.gpus / std::max(1, job_.parallelism.pp)) % std::max(1, sys_.scale_up.domain_size) == 0;
  }
  const hw::GroupPlacement& placement(const GroupShape& gs, CommGroup group, int stage) {
    const int pp = std::max(1, job_.parallelism.pp), gpus = job_.system.gpus;
    if (placements_.size() < static_cast<std::size_t>(pp) + 1) placements_.resize(static_cast<std::size_t>(pp) + 1);
    auto& placed = placements_[static_cast<std::size_t>(stage + 1)];
    for (const auto& p : placed)
      if (p.size == gs.size && p.stride == gs.stride) {
        warn_placement(gs, group, stage, p.place);  // (another kind of group may have this shape)
        return p.place;
      }
    const int per_stage = gpus / pp;
    const bool tiled = group != CommGroup::pp;  // a pipeline hop's pair starts at any stage (pipeline_pair)
    const hw::GroupPlacement place =
        stage < 0 ? hw::place_group_in_job(sys_, gs.size, gs.stride, gpus)
                  : hw::place_group_in_job(sys_, gs.size, gs.stride, gpus, stage * per_stage, (stage + 1) * per_stage, tiled);
    warn_placement(gs, group, stage, place);
    placed.push_back({gs.size, gs.stride, place});
    return placed.back().place;
  }
  // A kind of group whose worst member in the job sits worse than its first says so in the report, once per kind and
  // shape (the data-parallel and expert groups may be the same ranks: each is named).
  void warn_placement(const GroupShape& gs, CommGroup group, int stage, const hw::GroupPlacement& place) {
    const int gpus = job_.system.gpus;
    const std::tuple<int, int, int> shape{static_cast<int>(group), gs.size, gs.stride};
    if (std::find(warned_shapes_.begin(), warned_shapes_.end(), shape) == warned_shapes_.end()) {
      warned_shapes_.push_back(shape);
      const bool same_everywhere = stage < 0 || stages_start_at_domains();  // `place` is the job's worst then
      const int worst = same_everywhere ? place.ranks_per_domain
                                        : hw::place_group_in_job(sys_, gs.size, gs.stride, gpus).ranks_per_domain;
      const hw::GroupPlacement first_group = hw::place_group(sys_, gs.size, gs.stride);
      const int first = first_group.ranks_per_domain;
      // Tensor (and expert-tensor) parallelism across domains: legal, but every layer's exchanges cross the NICs.
      if ((group == CommGroup::tp || group == CommGroup::etp) && first_group.domains() > 1)
        res_.warnings.push_back(fmt::format(
            "{} groups of {} ranks span NVLink domains of {} GPUs: every layer's {} exchanges cross the NICs "
            "(frameworks keep tensor parallelism inside a domain)",
            workloads::to_string(group), gs.size, sys_.scale_up.domain_size, workloads::to_string(group)));
      // A job that leaves its last NVLink domain partly filled: a group reaching into it has fewer ranks there than it
      // would in a full domain, and their NICs carry its traffic between domains (a probe's 512 GB200 on 72-GPU racks:
      // 8 GPUs in the last, the data-parallel ring 22% slower than on 64-GPU domains, without a word). Counted in that
      // domain for the groups of this shape that reach it (hw::partial_domain_shortfall).
      if (group != CommGroup::pp && group != CommGroup::tp && group != CommGroup::etp && group != CommGroup::world)
        if (const auto s = hw::partial_domain_shortfall(sys_, gs.size, gs.stride, gpus); s.in_partial > 0)
          res_.warnings.push_back(fmt::format(
              "the job's {} GPUs leave an NVLink domain of {} partly filled ({} GPUs): {} groups of {} ranks have as few "
              "as {} there (against {} in their other domains), whose NICs carry the group's traffic between domains (a "
              "scheduler that spreads the job evenly says so with system.overrides: {{scale_up.domain_size: N}})",
              gpus, sys_.scale_up.domain_size, gpus % sys_.scale_up.domain_size, workloads::to_string(group), gs.size,
              s.in_partial, s.elsewhere));
      if (worst < first && group != CommGroup::pp)  // (pipeline hops: each pair is timed where it sits)
        res_.warnings.push_back(fmt::format(
            "{} groups of {} ranks straddle NVLink domains of {} GPUs: the worst has {} of its ranks in one domain, "
            "the first {}; each is timed at its own stage's worst (a job that uses fewer GPUs of each domain, as "
            "NVLink-aware scheduling does, says so with system.overrides: {{scale_up.domain_size: N}})",
            workloads::to_string(group), gs.size, sys_.scale_up.domain_size, worst, first));
    }
  }
  // Hashed (a search of an ordered map of 7-field keys was a third of a collective's start); its nodes stay put.
  std::unordered_map<CollKey, CachedCost, CollKeyHash> coll_cache_;
  bool said_nvls_fit_skipped_ = false;  // (a calibration's measured NCCL fit passed over for NVLS: said once)

  void start_copy(OpId id, const Op& op) {
    const bool h2d = op.kind == OpKind::copy_h2d;
    const Res& R = res_of_[op.rank];
    const std::array<FlowNetwork::Use, 4> uses = {
        FlowNetwork::Use{h2d ? R.h2d : R.d2h, 1.0}, {R.host_both, 1.0}, {R.host_mem, 1.0}, {R.hbm, 1.0}};
    if (op.copy_bytes <= 0) {
      schedule_now(tag(Then::finish_empty, id));
      return;
    }
    if (op.host_compute) {  // the host's memory only (shared by the GPUs of the host, as copies share it)
      const FlowNetwork::Use host{R.host_mem, 1.0};
      net_.start_flow_tagged(&host, 1, op.copy_bytes, tag(Then::host_done, id));
      return;
    }
    net_.start_flow_tagged(uses.data(), uses.size(), op.copy_bytes, tag(h2d ? Then::h2d_done : Then::d2h_done, id));
  }

  void start_collective(OpId id, const Op& op) {
    GroupShape gs = group_shape(job_, op.group);
    if (gs.size <= 1 || op.coll_bytes <= 0) {
      schedule_now(tag(Then::finish_no_peers, id));
      return;
    }
    // A step repeats the same few collectives many times: estimate each kind once.
    int stage = placement_stage(op.group, op.rank);
    if (op.group == CommGroup::pp) std::tie(gs, stage) = pipeline_pair(op);
    const CollKey key{static_cast<int>(op.coll), op.coll_bytes, gs.size, gs.stride, op.expert_top_k,
                      op.expert_max_domains, static_cast<int>(op.expert_library), stage};
    auto cached = coll_cache_.find(key);
    if (cached == coll_cache_.end()) {
      const hw::GroupPlacement place = placement(gs, op.group, stage);
      hw::CollectiveOptions opt;
      opt.nvls_enabled = job_.nvls;
      hw::CollectiveCost cost;
      if (op.expert_top_k > 0) {
        hw::ExpertExchange x;
        x.top_k = op.expert_top_k;
        x.token_bytes = 1;
        x.tokens = op.coll_bytes / op.expert_top_k;  // coll_bytes = tokens · top_k · bytes per token
        x.max_domains = op.expert_max_domains;
        x.experts = job_.moe_experts;
        x.groups = job_.moe_router_groups;
        x.group_top_k = job_.moe_router_group_top_k;
        x.library = op.expert_library;
        cost = hw::estimate_expert_exchange(sys_, place, x, opt);
      } else {
        cost = hw::estimate_collective(sys_, op.coll, op.coll_bytes, place, opt);
        if (cost.measured_fit_skipped_for_nvls && !said_nvls_fit_skipped_) {
          said_nvls_fit_skipped_ = true;
          res_.warnings.push_back(fmt::format(
              "measured NCCL fit passed over: the calibration's {} on {} GPUs (the first of the step's such "
              "collectives) is not applied where racksim picks NVLS (training.nvls): measured fits are taken as "
              "ring/tree times (racksim-bench runs NCCL with NCCL_NVLS_ENABLE=0), so the modelled NVLS time stands; "
              "training.nvls: false runs on the measured figures (for an nccl-tests log taken with NVLS on, the "
              "figures it measured)",
              hw::to_string(op.coll), place.ranks));
        }
      }
      cached = coll_cache_.emplace(key, CachedCost{cost, intern_label(hw::to_string(cost.algorithm) + "/" + cost.protocol),
                                                   intern_label(cost.bound_by)})
                   .first;
    }
    // The cache's entries stay put (a node-based map), so the events refer to it instead of copying.
    const hw::CollectiveCost* cost = &cached->second.cost;
    res_.ops[id].algorithm = cached->second.algorithm;
    res_.ops[id].bound_by = cached->second.bound_by;
    res_.ops[id].nic_bytes = static_cast<float>(cost->bytes_per_rank_nic);
    res_.ops[id].nvlink_bytes = static_cast<float>(cost->bytes_per_rank_nvlink);
    coll_cost_[id] = cost;
    // SMs first (see SmWait), then latency (launch, handshakes), then the data moves as a flow on the links.
    const int rank = op.rank;
    if (!op.queues_behind_compute) {
      begin_collective(id);
      return;
    }
    // Wait for the compute kernels resident now, and (added by finish) for those released by the
    // same op, which win the race for the SMs.
    SmWait& w = sm_wait_[id];
    for (OpId k : res_of_[rank].running_kernels) {
      blocked_by_kernel_[k].push_back(id);
      ++w.blockers;
    }
    if (releasing_depth_ > 0) ready_queuing_.push_back(id);
    else if (w.blockers == 0) grant_sms(id);
  }

  // The collective has its SMs. NCCL launches one CTA per channel (NVIDIA/nccl src/enqueue.cc,
  // ncclLaunchKernel: grid = the plan's channel count) and each CTA stays resident, spinning on its peers'
  // FIFO flags, until its channel's last step: the SMs are held for the latency (handshakes, the ring's
  // per-step waits) as well as while data moves, not from the first byte on.
  // A joined collective's kernel, once resident, spins on its SMs until every member's is (NCCL's ranks meet in the
  // kernel); then all begin together.
  void begin_collective(OpId id) {
    reserve_sms(g_.ops[id].rank, sm_fraction(*coll_cost_[id], g_.ops[id]));
    if (Join* j = join_of(id)) {
      if (++j->resident < j->members) return;
      for (OpId m : g_.joined[j->group]) move_after_latency(m);
      return;
    }
    move_after_latency(id);
  }
  void move_after_latency(OpId id) {
    res_.ops[id].start_s = now_s();  // its CTAs are on the GPU: where a profiler shows the kernel start
    q_.schedule_tagged_after(SimTime::from_seconds(coll_cost_[id]->latency_s), tag(Then::move_data, id));
  }

  // The share of the SMs a collective's kernel holds while it runs: NCCL's channels, the SMs set aside
  // for a userbuffer kernel, none for the copy engines.
  double sm_fraction(const hw::CollectiveCost& c, const Op& op) const {
    const double sms = op.comm_kernel == CommKernel::nccl            ? c.sm_count
                       : op.comm_kernel == CommKernel::dedicated_sms ? op.comm_sms
                                                                     : 0;
    return std::min(0.5, sms / std::max(1, sys_.gpu.sm_count));
  }

  void move_collective_data(OpId id) {
    const hw::CollectiveCost& c = *coll_cost_[id];
    const double sm_frac = sm_fraction(c, g_.ops[id]);
    const int rank = g_.ops[id].rank;
    Res& R = res_of_[rank];
    // Progress in bytes this rank moves, so concurrent collectives share a link byte for byte.
    const double moved = c.bytes_per_rank_nvlink + c.bytes_per_rank_nic;
    std::array<FlowNetwork::Use, 6> uses;
    std::size_t nuses = 0;
    if (c.bytes_per_rank_nvlink > 0) uses[nuses++] = {R.nvlink, c.bytes_per_rank_nvlink / moved};
    if (c.bytes_per_rank_nic > 0) {
      uses[nuses++] = {R.nic, c.bytes_per_rank_nic / moved};
      // On a PCIe host the NIC reaches the GPU's memory (GPUDirect RDMA) through the PCIe switch the GPU hangs off, over
      // the GPU's own x16 link: what it sends leaves over that link and what it receives arrives over it, the lanes
      // that host copies (activation or optimizer offload) use too. Grace's C2C is not on the NIC's path.
      if (sys_.host.link != hw::HostLinkKind::nvlink_c2c) {
        uses[nuses++] = {R.d2h, c.bytes_per_rank_nic / moved};
        uses[nuses++] = {R.h2d, c.bytes_per_rank_nic / moved};
      }
    }
    if (moved > 0) uses[nuses++] = {R.hbm, hbm_bytes_per_byte_moved(c, g_.ops[id])};
    const double cap = c.bandwidth_time_s > 0 && moved > 0 ? moved / c.bandwidth_time_s
                                                           : std::numeric_limits<double>::infinity();
    if (nuses == 0 && !std::isfinite(cap)) {
      reserve_sms(rank, -sm_frac);
      finish(id, "");
      return;
    }
    const int lane = pace_lane(g_.ops[id].stream);
    if (lane >= 0 && std::isfinite(cap)) {
      R.pace_cap[lane] = cap;
      R.pace_cap_beside[lane] = rate_beside_compute(c, cap, g_.ops[id]);
      net_.set_capacity(R.pace[lane], R.paced_down ? R.pace_cap_beside[lane] : cap);
      uses[nuses++] = {R.pace[lane], 1.0};
    }
    net_.start_flow_tagged(uses.data(), nuses, moved, tag(Then::collective_done, id), cap);
  }
  // A collective's own HBM traffic per byte it moves over the links, which memory-bound kernels beside it share
  // (docs/decisions.md, "Collectives draw HBM"). NCCL's ring, tree and point-to-point kernels stage through
  // FIFO buffers in the receiver's HBM: the sender reads its input, the peer's write lands in the staging
  // buffer, the receiver reads it back and writes its output (a reduction's extra read of the local input is
  // fused with that write): 4 bytes per byte moved; measured beside an HBM-bound copy on two H200s
  // (calibration/torch/overlap_compute_slowdown.py: the copy loses 0.12-0.13 of its rate per second of a
  // 32-128 MiB all-reduce). NVLS (multimem loads and stores; the switch reduces), DeepEP/HybridEP and Transformer
  // Engine's userbuffers write straight into the destination buffer: the read at the source and the write
  // at the destination, 2.
  static double hbm_bytes_per_byte_moved(const hw::CollectiveCost& c, const Op& op) {
    const bool direct = op.comm_kernel != CommKernel::nccl || (op.expert_top_k > 0 && op.expert_library != hw::ExpertLibrary::nccl) ||
                        c.algorithm == hw::CollectiveAlgorithm::nvls || c.algorithm == hw::CollectiveAlgorithm::nvls_tree;
    return direct ? 2.0 : 4.0;
  }
  void collective_done(OpId id) {
    const hw::CollectiveCost& c = *coll_cost_[id];
    const int rank = g_.ops[id].rank;
    const int lane = pace_lane(g_.ops[id].stream);
    reserve_sms(rank, -sm_fraction(c, g_.ops[id]));
    if (lane >= 0) res_of_[rank].pace_cap[lane] = 0;
    finish(id, "");
  }
  void start_running(Res& R, OpId id) {
    running_[id] = 1;
    R.running_kernels.push_back(id);
    ++R.running_count;
  }
  void stop_running(Res& R, OpId id) {
    if (!running_[id]) return;
    running_[id] = 0;
    auto it = std::find(R.running_kernels.begin(), R.running_kernels.end(), id);
    *it = R.running_kernels.back();
    R.running_kernels.pop_back();
    --R.running_count;
  }

  static int pace_lane(StreamKind s) {
    switch (s) {
      case StreamKind::comm: return 0;
      case StreamKind::comm_dp: return 1;
      case StreamKind::comm_grad: return 2;
      case StreamKind::comm_ep: return 3;
      default: return -1;
    }
  }
  // A collective runs at 1/k of its standalone rate while compute kernels are resident on its GPU
  // (k = gpu.collective_slowdown_beside_compute, measured beside GEMMs and beside HBM-bound copies
  // alike, so a contention for the GPU's memory system rather than for HBM bandwidth alone).
  double pace_factor(bool down) const {
    return down ? 1.0 / std::max(1.0, sys_.gpu.collective_slowdown_beside_compute) : 1.0;
  }
  // What slows beside compute is the collective's kernel (its SMs' access to the memory system), measured
  // on NVLink-only collectives: their rate falls to 1/k. A collective that also crosses the NICs is held
  // to what the slowed kernel can process, 1/k of the GPU's NVLink rate, and no lower: one bounded by its
  // NICs (an H100 NIC carries 50 GB/s, its NVLink 450) does not slow at all.
  // Only an NCCL kernel contends with compute for the SMs' memory system; copy engines and SMs set aside
  // (the GEMM launched on the rest) keep their rate.
  double rate_beside_compute(const hw::CollectiveCost& c, double cap, const Op& op) const {
    if (op.comm_kernel != CommKernel::nccl) return cap;
    if (c.bytes_per_rank_nic <= 0) return cap * pace_factor(true);  // the measured case
    return std::min(cap, sys_.scale_up.bandwidth_per_direction_Bps * pace_factor(true));
  }
  // Applies the pace that the resident kernels call for, if it changed.
  void update_pace(Res& R) {
    const bool down = R.running_count > 0;
    if (down == R.paced_down) return;
    R.paced_down = down;
    for (std::size_t k = 0; k < R.pace.size(); ++k)
      if (R.pace_cap[k] > 0) net_.set_capacity(R.pace[k], down ? R.pace_cap_beside[k] : R.pace_cap[k]);
  }

  // Collective kernels occupy SMs while they run; compute gets the rest.
  void reserve_sms(int rank, double frac) {
    Res& R = res_of_[rank];
    R.sm_reserved += frac;
    net_.set_capacity(R.sm, std::max(0.05, 1.0 - R.sm_reserved));
  }

  struct Event {
    double time;
    int delta;
    int cls;
  };
  // Visits the elements of ranges each in order of key(x), in that order: the element at the earliest of the
  // ranges' heads each time (a scan of at most K heads; no merged list is made; a drained range gives its place
  // to the last one). Equal keys come in no set order.
  template <class T, std::size_t K, class Key, class Visit>
  static void for_each_in_order(const std::array<std::span<const T>, K>& ranges, Key key, Visit visit) {
    std::array<const T*, K> at{}, end{};
    std::array<double, K> head{};
    std::size_t n = 0;
    for (const auto& range : ranges)
      if (!range.empty()) {
        at[n] = range.data();
        end[n] = range.data() + range.size();
        head[n++] = key(range.front());
      }
    while (n > 0) {
      std::size_t best = 0;
      for (std::size_t k = 1; k < n; ++k)
        if (head[k] < head[best]) best = k;
      visit(*at[best]);
      if (++at[best] == end[best]) {
        --n;
        at[best] = at[n];
        end[best] = end[n];
        head[best] = head[n];
      } else {
        head[best] = key(*at[best]);
      }
    }
  }

  void compute_breakdown() {
    // Sweep the timeline: at each instant the step is doing the most useful thing running.
    enum Cls { kCompute, kRecompute, kComm, kCopy, kLaunch, kBubble, kCount };
    // Events per stream (and the launch gaps of the compute stream, and its waits for a pipeline receive): the ops
    // of a stream run one after the other, so each list is in time order already and a merge replaces a sort. The
    // order of events at the same instant does not matter (time spent is counted between instants).
    std::array<std::vector<Event>, kStreamCount + 2> lists;
    const std::size_t kLaunchList = kStreamCount, kBubbleList = kStreamCount + 1;
    auto add_to = [&](std::vector<Event>& ev, double a, double b, int cls) {
      if (b <= a) return;
      ev.push_back({a, +1, cls});
      ev.push_back({b, -1, cls});
    };
    double prev_compute_end = 0;
    // The breakdown is that of the busiest pipeline stage (the one that sets the pace; all
    // stages share the step time).
    std::vector<double> busy(res_of_.size(), 0.0);
    for (std::size_t i = 0; i < g_.ops.size(); ++i)
      if (meta_[i].stream == StreamKind::compute) busy[meta_[i].rank] += res_.ops[i].end_s - res_.ops[i].start_s;
    const int critical = static_cast<int>(std::max_element(busy.begin(), busy.end()) - busy.begin());
    res_.breakdown_rank = critical;
    for (int k = 0; k < kStreamCount; ++k) lists[k].reserve(2 * ops_on_stream_[critical][k]);
    lists[kLaunchList].reserve(2 * ops_on_stream_[critical][static_cast<int>(StreamKind::compute)]);
    for (std::size_t at = 0; at < g_.ops.size(); ++at) {
      const std::size_t i = program_op(at);
      const OpMeta& op = meta_[i];
      const auto& r = res_.ops[i];
      if (op.rank != critical) continue;
      auto& list = lists[static_cast<int>(op.stream)];
      // The all-reduces that join stages (the embedding copies' gradients, MTP's, between the first and the last stage;
      // the optimizer's gradient norm over every stage) start when the others have finished their cool-down: the wait,
      // with nothing else running, is this stage's pipeline bubble (docs/contracts.md: "the others' cool-down"), not
      // idle time.
      if (join_of(static_cast<OpId>(i))) {
        double ready = r.launch_end_s;
        for (OpId d : g_.ops[i].deps)
          if (meta_[d].rank == critical) ready = std::max(ready, res_.ops[d].end_s);
        add_to(lists[kBubbleList], ready, r.start_s, kBubble);
      }
      if (op.stream == StreamKind::compute) {
        // The GPU waited for this launch: the kernel started the moment the host issued it.
        if (r.start_s > prev_compute_end && std::abs(r.start_s - r.launch_end_s) < 1e-12)
          add_to(lists[kLaunchList], std::max(prev_compute_end, r.launch_start_s), r.start_s, kLaunch);
        // The pipeline bubble: the stream free and the op issued, it waits for the tensor a neighbouring stage sends
        // (its receive depends on that stage's send). Other waits with nothing running stay idle (host waits).
        if (g_.ranks > 1 && r.start_s > prev_compute_end)
          for (OpId d : g_.ops[i].deps)
            if (meta_[d].rank != critical && g_.ops[d].kind == OpKind::collective && g_.ops[d].group == CommGroup::pp)
              add_to(lists[kBubbleList], std::max(prev_compute_end, r.launch_end_s), std::min(res_.ops[d].end_s, r.start_s),
                     kBubble);
        // A host copy XLA issues on the compute stream (its offload copies serialize with the kernels) is exposed
        // offload, as the same copy on a copy stream of its own would be where nothing else runs.
        const OpKind kind = g_.ops[i].kind;
        const bool host_copy = kind == OpKind::copy_d2h || kind == OpKind::copy_h2d;
        add_to(list, r.start_s, r.end_s, host_copy ? kCopy : op.phase == Phase::recompute ? kRecompute : kCompute);
        prev_compute_end = r.end_s;
      } else if (pace_lane(op.stream) >= 0) {  // a communication stream
        add_to(list, r.start_s, r.end_s, kComm);
      } else {
        add_to(list, r.start_s, r.end_s, kCopy);
      }
    }
    std::array<int, kCount> active{};
    std::array<double, kCount + 1> total{};
    double t = 0;
    std::array<std::span<const Event>, kStreamCount + 2> ranges;
    for (std::size_t k = 0; k < ranges.size(); ++k) ranges[k] = lists[k];
    for_each_in_order(ranges, [](const Event& e) { return e.time; }, [&](const Event& e) {
      const double time = e.time;
      const double dt = time - t;
      if (dt > 0) {
        int c = kCount;  // idle
        for (int k = 0; k < kCount; ++k)
          if (active[k] > 0) {
            c = k;
            break;
          }
        total[c] += dt;
      }
      t = time;
      active[e.cls] += e.delta;
    });
    // After its last op a stage of a pipeline waits for the others' cool-down: bubble too.
    total[g_.ranks > 1 ? kBubble : kCount] += std::max(0.0, res_.step_time_s - t);
    auto& b = res_.breakdown;
    b.compute_s = total[kCompute];
    b.recompute_s = total[kRecompute];
    b.exposed_communication_s = total[kComm];
    b.exposed_offload_s = total[kCopy];
    b.launch_overhead_s = total[kLaunch];
    b.pipeline_bubble_s = total[kBubble];
    b.idle_s = total[kCount];
  }

  void compute_rank_busy() {
    // Per rank and stream the ops run one after the other, so each stream's ops of positive length are in time
    // order: the rank's intervals in start order come from a scan of its streams' heads (for_each_in_order; no
    // list of events made and merged). The union's parts, and so their sum, do not depend on the order of equal
    // starts.
    const std::size_t ranks = res_of_.size();
    auto list_of = [&](std::size_t i) { return meta_[i].rank * kStreamCount + static_cast<int>(meta_[i].stream); };
    auto runs = [&](std::size_t i) { return res_.ops[i].end_s > res_.ops[i].start_s; };
    std::vector<uint32_t> first(ranks * kStreamCount + 1, 0);  // CSR: the ops of (rank, stream) in op order
    for (std::size_t i = 0; i < g_.ops.size(); ++i)
      if (runs(i)) ++first[list_of(i) + 1];
    for (std::size_t j = 0; j + 1 < first.size(); ++j) first[j + 1] += first[j];
    std::vector<OpId> ops(first.back());
    {
      std::vector<uint32_t> fill(first.begin(), first.end() - 1);
      for (std::size_t at = 0; at < g_.ops.size(); ++at)
        if (const std::size_t i = program_op(at); runs(i)) ops[fill[list_of(i)]++] = static_cast<OpId>(i);
    }
    res_.rank_busy_s.assign(ranks, 0.0);
    for (std::size_t r = 0; r < ranks; ++r) {
      std::array<std::span<const OpId>, kStreamCount> ranges;
      for (int k = 0; k < kStreamCount; ++k) {
        const std::size_t j = r * kStreamCount + k;
        ranges[k] = std::span<const OpId>(ops).subspan(first[j], first[j + 1] - first[j]);
      }
      double busy = 0, a = 0, b = -1;
      for_each_in_order(ranges, [&](OpId op) { return res_.ops[op].start_s; }, [&](OpId op) {
        const double s = res_.ops[op].start_s, e = res_.ops[op].end_s;
        if (s > b) {
          if (b > a) busy += b - a;
          a = s;
          b = e;
        } else {
          b = std::max(b, e);
        }
      });
      if (b > a) busy += b - a;
      res_.rank_busy_s[r] = busy;
    }
    // The host's own activity: each op's launch interval (after any wait of the host for the GPU).
    res_.rank_host_busy_s.assign(ranks, 0.0);
    for (std::size_t i = 0; i < g_.ops.size(); ++i)
      res_.rank_host_busy_s[meta_[i].rank] += res_.ops[i].launch_end_s - res_.ops[i].launch_start_s;
  }

  void compute_memory() {
    const int R = static_cast<int>(res_of_.size());
    MemoryInUse in_use(g_, R);
    auto& m = res_.memory;
    // The peak is the largest over ranks; its breakdown is that rank's at that moment.
    auto check_peak = [&](int r) {
      const double total = in_use.hbm_total(r);
      if (total > m.peak_hbm_bytes) {
        m.peak_hbm_bytes = total;
        m.at_peak = in_use.hbm(r);
        m.peak_rank = r;
      }
      m.peak_host_bytes = std::max(m.peak_host_bytes, in_use.host(r));
    };
    for (int r = 0; r < R; ++r) check_peak(r);
    for (const auto& e : memory_events(g_, res_.ops)) {
      in_use.apply(e.tensor, e.alloc);
      if (e.alloc) check_peak(g_.tensors[e.tensor].rank);
    }
  }
};

}  // namespace

std::string_view intern_label(std::string_view text) {
  static std::mutex mu;
  static std::unordered_set<std::string> labels;  // node-based: the strings never move
  std::lock_guard lock(mu);
  return *labels.emplace(text).first;
}

ReplayResult replay(const OpGraph& graph, const Job& job, const ReplayOptions& options) {
  Replayer r(graph, job, options);
  return r.run();
}

std::vector<MemoryEvent> memory_events(const OpGraph& g, std::span<const OpRecord> ops) {
  std::vector<MemoryEvent> ev;
  ev.reserve(2 * g.tensors.size());  // a tensor is allocated and freed once, as a rule
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    // The two lists lie in bytes 48-111 of an op (one or two cache lines); the ops are read in
    // order, so they are fetched ahead of use.
    if (i + 16 < g.ops.size()) {
      const char* p = reinterpret_cast<const char*>(&g.ops[i + 16]);
      __builtin_prefetch(p + offsetof(Op, allocs));
      __builtin_prefetch(p + offsetof(Op, frees) + sizeof(Op::frees) - 1);
    }
    for (TensorId t : g.ops[i].allocs) ev.push_back({ops[i].start_s, true, t});
    for (TensorId t : g.ops[i].frees) ev.push_back({ops[i].end_s, false, t});
  }
  // A stable sort, so the order is std::stable_sort's; merging the runs the ops' order leaves
  // already sorted costs N log(runs) instead of N log N.
  const auto before = [](const MemoryEvent& a, const MemoryEvent& b) {
    return a.t_s != b.t_s ? a.t_s < b.t_s : (!a.alloc && b.alloc);
  };
  std::vector<std::size_t> runs{0};  // where each sorted run starts, then the end
  for (std::size_t i = 1; i < ev.size(); ++i)
    if (before(ev[i], ev[i - 1])) runs.push_back(i);
  runs.push_back(ev.size());
  std::vector<MemoryEvent> merged(ev.size());
  while (runs.size() > 2) {
    std::vector<std::size_t> next{0};
    std::size_t k = 0;
    for (; k + 2 < runs.size(); k += 2) {
      std::merge(ev.begin() + static_cast<std::ptrdiff_t>(runs[k]), ev.begin() + static_cast<std::ptrdiff_t>(runs[k + 1]),
                 ev.begin() + static_cast<std::ptrdiff_t>(runs[k + 1]), ev.begin() + static_cast<std::ptrdiff_t>(runs[k + 2]),
                 merged.begin() + static_cast<std::ptrdiff_t>(runs[k]), before);
      next.push_back(runs[k + 2]);
    }
    if (k + 1 < runs.size()) {  // an odd run left over
      std::copy(ev.begin() + static_cast<std::ptrdiff_t>(runs[k]), ev.end(), merged.begin() + static_cast<std::ptrdiff_t>(runs[k]));
      next.push_back(ev.size());
    }
    ev.swap(merged);
    runs.swap(next);
  }
  return ev;
}

MemoryInUse::MemoryInUse(const OpGraph& g, int ranks)
    : g_(g), live_(g.tensors.size(), 0), hbm_(std::max(1, ranks)), host_(std::max(1, ranks), 0.0) {
  for (auto& a : hbm_) a.fill(0);
  for (TensorId id : g.resident) apply(id, true);
}

void MemoryInUse::apply(TensorId id, bool alloc) {
  const Tensor& t = g_.tensors[id];
  if (static_cast<bool>(live_[id]) == alloc || t.rank >= hbm_.size()) return;  // double free / re-alloc: ignore
  live_[id] = alloc;
  const double d = alloc ? t.bytes : -t.bytes;
  if (t.on_host)
    host_[t.rank] += d;
  else
    hbm_[t.rank][static_cast<int>(t.category)] += d;
}

double MemoryInUse::hbm_total(int rank) const {
  double total = 0;
  for (double v : hbm_[rank]) total += v;
  return total;
}

}  // namespace racksim::sim
