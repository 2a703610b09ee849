// Fluid max-min fair flow network: links, HBM, host links and abstract capacities shared by flows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/event_queue.h"
#include "core/small_vector.h"
#include "core/time.h"

namespace racksim::sim {

// Resources have a capacity in units per second (bytes/s of a link direction or of HBM, or an
// abstract capacity such as "SMs" = 1.0). A flow delivers an amount of work across one or more
// resources; at rate r it consumes coefficient*r of each. Rates are the max-min fair allocation by
// progressive filling: all unfrozen flows' rates rise together; a flow freezes when a resource it
// crosses saturates or it reaches its own rate cap. Rates are recomputed only when a flow starts,
// finishes or is cancelled, or a capacity changes (no timer, no packets), and only for the
// connected component of flows and resources that the change touches; a flow that starts alone on
// its resources gets its rate at once (the one-flow case of the solve), and a flow that ends alone
// leaves nothing to re-solve.
//
// The network drives itself through the EventQueue: it keeps exactly one event scheduled, at the
// earliest completion. Completion times are rounded up to the next whole picosecond (except an
// excess within 1e-13 relative of a whole picosecond, which is float noise); a flow with less
// than 1e-9 of its amount left completes. Flows that complete at the same picosecond complete in
// start order, and their on_done callbacks run in that order from one event; flows started or
// cancelled by those callbacks are solved once, after the last callback.
//
// Cost per start/finish: O(size of the touched component * log). Measured (RelWithDebInfo, one
// core): ~1.2M start+finish events/s with 4000 flows in components of ~4 flows, ~2e5/s in
// components of ~40, ~2e4/s when all 2000 flows form a single component.
class FlowNetwork {
 public:
  using ResourceId = uint32_t;
  using FlowId = uint64_t;  // never reused; 0 is never a valid id; increases with start order

  // With external_events the network schedules no event on the queue: it keeps its next completion
  // (time, and a sequence number reserved from the queue when it would have scheduled it) for the
  // driver, which runs it with run_pending_event() in (time, sequence) order among the queue's.
  explicit FlowNetwork(EventQueue& q, bool external_events = false);
  ~FlowNetwork();  // cancels its pending completion event
  FlowNetwork(const FlowNetwork&) = delete;
  FlowNetwork& operator=(const FlowNetwork&) = delete;

  // capacity_per_s must be finite and > 0 (std::invalid_argument otherwise).
  ResourceId add_resource(std::string name, double capacity_per_s);
  // Takes effect now: progress so far is kept at the old rates, and the component re-solves.
  void set_capacity(ResourceId r, double capacity_per_s);
  double capacity(ResourceId r) const;

  struct Use {
    ResourceId resource;
    double coefficient = 1.0;  // finite, >= 0; a zero coefficient is dropped, repeats are summed
  };
  // Starts now (q.now()). on_done (may be empty) is called from the event queue, never from inside
  // start_flow, when the amount is delivered; an amount of 0 completes at now(). Throws
  // std::invalid_argument for a negative/non-finite amount, a bad coefficient, a cap that is not
  // > 0, or an empty path without a finite cap; std::out_of_range for an unknown resource.
  FlowId start_flow(const std::vector<Use>& path, double amount, std::function<void(FlowId)> on_done,
                    double rate_cap_per_s = std::numeric_limits<double>::infinity()) {
    return start_flow_path(path.data(), path.size(), amount, std::move(on_done), rate_cap_per_s);
  }
  // The same with the path as an array (no allocation: a flow's slot keeps its path storage).
  FlowId start_flow_path(const Use* path, std::size_t count, double amount, std::function<void(FlowId)> on_done,
                         double rate_cap_per_s = std::numeric_limits<double>::infinity());

  // Where flows started with a tag report their completion: one virtual call with the tag the
  // driver chose (e.g. an op id and what to do with it) instead of a std::function per flow, which
  // a replay of 100,000 flows paid to build, move and destroy. Called like on_done, in the same order.
  class CompletionSink {
   public:
    virtual void flow_done(FlowId id, uint64_t tag) = 0;

   protected:
    ~CompletionSink() = default;
  };
  // The sink must outlive the flows started with a tag.
  void set_completion_sink(CompletionSink* sink) { sink_ = sink; }
  // start_flow_path, reporting to the sink (std::logic_error without one).
  FlowId start_flow_tagged(const Use* path, std::size_t count, double amount, uint64_t tag,
                           double rate_cap_per_s = std::numeric_limits<double>::infinity());
  // True if the flow was active; it is removed without calling on_done and its share is freed.
  bool cancel_flow(FlowId f);

  // Queries accept active flows and, while their on_done callbacks run, the flows completing at
  // this instant (their last rate and bottleneck; remaining 0). Any other id: std::out_of_range.
  double rate(FlowId f) const;       // current rate, units per second
  double remaining(FlowId f) const;  // amount left as of now()
  // Which resource bounds the flow now: its name, "cap" for its own rate cap, or "none" for a
  // zero-amount flow (which never takes a rate). For trace args.
  std::string bottleneck(FlowId f) const;

  double utilization(ResourceId r) const;  // sum coefficient*rate / capacity, in [0, 1]
  const std::string& resource_name(ResourceId r) const;  // stays valid for the network's lifetime
  std::size_t resource_count() const { return resources_.size(); }
  // external_events: the pending completion event, if any.
  bool pending_event(SimTime& at, uint64_t& seq) const {
    if (!pending_) return false;
    at = scheduled_at_;
    seq = pending_seq_;
    return true;
  }
  void run_pending_event() {
    pending_ = false;
    on_completion_event();
  }
  std::size_t active_flows() const { return active_; }

 private:
  using Slot = uint32_t;  // index into flows_; a slot is reused after its flow ends
  static constexpr int64_t kBoundByCap = -1;
  static constexpr int64_t kBoundByNone = -2;

  struct PathEntry {
    ResourceId resource;
    uint32_t user_index;  // where this flow sits in the resource's users list (O(1) removal)
    double coefficient;
  };
  struct Flow {
    FlowId id = 0;  // 0: free slot
    // Inline up to four resources (a replay's kernels cross two, its copies and collectives up to
    // four): the solver and a finishing flow's removal read other flows' paths, one load fewer each.
    SmallVec<PathEntry, 4> path;
    double amount = 0;
    double remaining = 0;  // as of last_update
    double rate_cap = 0;
    double rate = 0;
    SimTime last_update{};
    SimTime completion = SimTime::max();  // meaningful while in_completions
    uint64_t completion_version = 0;      // completion entries with another version are stale
    int64_t bottleneck = kBoundByNone;    // resource id, kBoundByCap or kBoundByNone
    // Solver scratch.
    uint64_t stamp = 0;
    double new_rate = 0;
    int64_t new_bottleneck = kBoundByNone;
    bool frozen = false;
    bool in_completions = false;  // has a valid entry in completions_
    bool attached = false;        // listed in its resources' users (not zero-amount or pathless flows)
    bool finished = false;        // completing now; kept only while the on_done callbacks run
    bool tagged = false;          // reports to sink_ with `tag`; else on_done_[slot] (may be empty)
    bool alone = false;           // begin_flow: its resources carry no other flow and no unsolved change
    uint64_t tag = 0;
  };
  struct User {
    Slot flow;
    uint32_t path_index;
  };
  struct Resource {
    double capacity = 0;
    std::vector<User> users;
    bool dirty = false;  // seeds the next solve
    // Solver scratch.
    uint32_t unfrozen_count = 0;
    uint32_t version = 0;  // bumped when a flow on it freezes; older heap entries are stale
    uint64_t stamp = 0;
    double frozen_use = 0;     // sum coefficient*rate of frozen flows
    double unfrozen_coef = 0;  // sum of coefficients of unfrozen flows
  };
  struct Level {
    double level = 0;
    int64_t who = 0;  // resource id, or -(1 + index into comp_flows_) for a flow's cap
    uint32_t version = 0;
  };
  static constexpr std::size_t kScanEntries = 8;  // progressive_filling scans instead of a heap up to this many
  struct Completion {
    int64_t ps;
    FlowId id;
    uint64_t version;
    Slot slot;
  };

  Slot slot_of(FlowId f) const;  // std::out_of_range for an unknown or forgotten flow
  const Resource& resource(ResourceId r) const;
  Slot begin_flow(const Use* path, std::size_t count, double amount, double rate_cap_per_s);
  void launch(Slot s);  // attaches a begun flow and gives it its rate (at once when alone, else by the solve)
  void release(Slot s);
  void attach(Slot s, bool dirty);
  void detach(Slot s);
  [[noreturn, gnu::cold]] void bad_use(const Use& u) const;  // begin_flow's error for an unknown resource or bad coefficient
  void mark_dirty(ResourceId r) {  // in the header: called per path entry of every start and end
    Resource& res = resources_[r];
    if (!res.dirty) {
      res.dirty = true;
      dirty_.push_back(r);
    }
  }
  void solve_alone(Flow& f);        // a flow's max-min rate with no other flow on its resources
  // solve_alone's parts: the lowest level over the path (on a tie the lower resource id), then the cap.
  static void lower_level(double& best, int64_t& who, double level, int64_t resource) {
    if (who == kBoundByNone || level < best || (level == best && resource < who)) {
      best = level;
      who = resource;
    }
  }
  static void take_alone_rate(Flow& f, double best, int64_t who);
  void apply(Slot s);               // takes a solved rate (new_rate, new_bottleneck)
  void advance(Flow& f);            // bring remaining up to now() at the current rate
  void update_completion(Slot s);   // recompute the completion key from remaining and rate
  void drop_completion(Flow& f);
  bool valid(const Completion& c) const {
    const Flow& f = flows_[c.slot];
    return f.id == c.id && f.in_completions && f.completion_version == c.version;
  }
  // The earliest valid entry, dropping stale ones (inline: the top is valid almost always).
  const Completion* earliest_completion() {
    if (!completions_.empty() && valid(completions_.front())) return &completions_.front();
    return earliest_completion_after_stale();
  }
  const Completion* earliest_completion_after_stale();
  void settle();                    // re-solve dirty components, then reschedule
  void settle_if_dirty() const;     // for queries: solve any deferred change first
  void solve_components();
  void progressive_filling();  // the max-min solve of the component in comp_flows_/comp_resources_
  void freeze(Flow& f, double level, int64_t bound_by);
  void reschedule();
  void on_completion_event();

  EventQueue& q_;
  std::vector<Resource> resources_;
  std::deque<std::string> names_;  // apart from resources_ so resource_name() references stay valid
  // Flows live in slots of a vector (cache-friendly for the solver); on_done is kept apart because
  // the solver never touches it. slots_ maps public ids to slots.
  std::vector<Flow> flows_;
  std::vector<std::function<void(FlowId)>> on_done_;
  CompletionSink* sink_ = nullptr;
  std::vector<Slot> free_slots_;
  // A flow id is (start sequence << 32) | slot, so finding a flow needs no map.
  // Min-heap on (completion ps, id), so ties complete in start order. Lazy deletion: an entry is
  // valid only while its slot holds the same flow, in_completions, with the same version;
  // compacted when stale entries outnumber live ones.
  std::vector<Completion> completions_;
  std::size_t live_completions_ = 0;
  std::vector<ResourceId> dirty_;
  bool deferring_ = false;  // inside a completion batch: solve once after all callbacks
  std::size_t active_ = 0;
  FlowId next_id_ = 1;
  uint64_t stamp_ = 0;
  EventQueue::Handle scheduled_{};
  SimTime scheduled_at_ = SimTime::max();
  bool external_ = false;      // events kept for the driver instead of scheduled
  bool pending_ = false;       // external_: a completion event is pending at scheduled_at_
  uint64_t pending_seq_ = 0;
  std::vector<Slot> comp_flows_;  // solver scratch
  std::vector<ResourceId> comp_resources_;
  std::vector<Level> heap_;
  std::vector<Slot> done_scratch_;  // on_completion_event's batch, kept for its capacity
};

}  // namespace racksim::sim
