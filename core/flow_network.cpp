#include "core/flow_network.h"
#include "core/heap_push.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace racksim::sim {
namespace {

// A flow whose remaining amount is below this fraction of its amount is done: the float
// subtraction remaining -= rate*dt cannot be trusted below that.
constexpr double kRelativeEpsilon = 1e-9;
// Completion instants within this relative distance above a whole picosecond are float noise
// (e.g. 0.3 s / 1 * 1e12 = 300000000000.00006) and round down instead of up.
constexpr double kTickNoise = 1e-13;

void check_capacity(const std::string& name, double capacity_per_s) {
  if (!(capacity_per_s > 0) || !std::isfinite(capacity_per_s)) {
    throw std::invalid_argument(
        fmt::format("FlowNetwork: capacity of '{}' must be finite and > 0, got {}", name, capacity_per_s));
  }
}

// Heap order for progressive filling (std heaps are max-heaps, so this is "a comes after b"):
// lowest level first; on equal levels resources (who >= 0) before rate caps, lower ids first.
// A total order, so the solve is deterministic; a flow whose cap equals its fair share is reported
// as bound by the resource. A function object so that the heap operations inline it.
struct LevelLater {
  template <class L>
  bool operator()(const L& a, const L& b) const {
    if (a.level != b.level) return a.level > b.level;
    if ((a.who >= 0) != (b.who >= 0)) return a.who < 0;
    return a.who >= 0 ? a.who > b.who : a.who < b.who;
  }
};

// Earliest completion first; equal picoseconds in start (id) order.
struct CompletionLater {
  template <class C>
  bool operator()(const C& a, const C& b) const {
    return a.ps != b.ps ? a.ps > b.ps : a.id > b.id;
  }
};

}  // namespace

FlowNetwork::FlowNetwork(EventQueue& q, bool external_events) : q_(q), external_(external_events) {}

FlowNetwork::~FlowNetwork() {
  // The scheduled event captures `this`; it must not outlive the network.
  if (scheduled_) q_.cancel(scheduled_);
}

const FlowNetwork::Resource& FlowNetwork::resource(ResourceId r) const {
  if (r >= resources_.size()) throw std::out_of_range(fmt::format("FlowNetwork: unknown resource {}", r));
  return resources_[r];
}

FlowNetwork::ResourceId FlowNetwork::add_resource(std::string name, double capacity_per_s) {
  check_capacity(name, capacity_per_s);
  if (resources_.size() >= std::numeric_limits<ResourceId>::max()) {
    throw std::length_error("FlowNetwork: too many resources");
  }
  resources_.emplace_back().capacity = capacity_per_s;
  names_.push_back(std::move(name));
  return static_cast<ResourceId>(resources_.size() - 1);
}

void FlowNetwork::set_capacity(ResourceId r, double capacity_per_s) {
  if (r >= resources_.size()) resource(r);  // throws for an unknown id (the check inline: tens of thousands of calls)
  // (The name is read only for the message: the replay sets capacities tens of thousands of times.)
  if (!(capacity_per_s > 0) || !std::isfinite(capacity_per_s)) check_capacity(names_[r], capacity_per_s);
  resources_[r].capacity = capacity_per_s;
  // No flow on it: no rate changes, and nothing to settle (outside a completion batch every change so far
  // has been settled, so settling now would find the next completion where it is).
  if (resources_[r].users.empty()) return;
  mark_dirty(r);
  if (!deferring_) settle();
}

double FlowNetwork::capacity(ResourceId r) const { return resource(r).capacity; }

const std::string& FlowNetwork::resource_name(ResourceId r) const {
  resource(r);  // validates the id
  return names_[r];
}

FlowNetwork::FlowId FlowNetwork::start_flow_path(const Use* path, std::size_t count, double amount,
                                                 std::function<void(FlowId)> on_done, double rate_cap_per_s) {
  const Slot slot = begin_flow(path, count, amount, rate_cap_per_s);
  on_done_[slot] = std::move(on_done);
  const FlowId id = flows_[slot].id;
  launch(slot);
  return id;
}

FlowNetwork::FlowId FlowNetwork::start_flow_tagged(const Use* path, std::size_t count, double amount, uint64_t tag,
                                                   double rate_cap_per_s) {
  if (sink_ == nullptr) throw std::logic_error("FlowNetwork::start_flow_tagged: no completion sink set");
  const Slot slot = begin_flow(path, count, amount, rate_cap_per_s);
  Flow& f = flows_[slot];
  f.tagged = true;
  f.tag = tag;
  const FlowId id = f.id;
  launch(slot);
  return id;
}

// The per-flow steps (begin_flow, launch, apply, update_completion, detach, release, settle, reschedule) are
// inlined into their few callers in this file: GCC kept them as calls, and their prologues, reloads of the
// network's fields and argument passing were a fifth of a lone flow's cost (405B run: -8 M instructions).
[[gnu::always_inline]] inline FlowNetwork::Slot FlowNetwork::begin_flow(const Use* path, std::size_t count, double amount, double rate_cap_per_s) {
  if (!std::isfinite(amount) || amount < 0) {
    throw std::invalid_argument(fmt::format("FlowNetwork::start_flow: amount must be finite and >= 0, got {}", amount));
  }
  if (!(rate_cap_per_s > 0)) {
    throw std::invalid_argument(fmt::format("FlowNetwork::start_flow: rate cap must be > 0, got {}", rate_cap_per_s));
  }

  Slot slot = 0;
  if (free_slots_.empty()) {
    if (flows_.size() >= std::numeric_limits<Slot>::max()) throw std::length_error("FlowNetwork: too many flows");
    slot = static_cast<Slot>(flows_.size());
    flows_.emplace_back();
    on_done_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  Flow& f = flows_[slot];
  // The path is checked as it is built, in one pass that also notes whether the flow is alone (launch): a
  // bad use gives the slot back before throwing, so the network is as it was. Its storage stays (no
  // allocation per flow).
  f.path.clear();
  bool alone = true;
  const std::size_t resources = resources_.size();
  for (std::size_t i = 0; i < count; ++i) {
    const Use& u = path[i];
    // (One comparison pair: NaN fails both, an infinity the second.)
    if (u.resource >= resources || !(u.coefficient >= 0 && u.coefficient <= std::numeric_limits<double>::max())) {
      f.path.clear();
      free_slots_.push_back(slot);
      bad_use(u);
    }
    if (u.coefficient == 0) continue;  // consumes nothing, so it cannot bound the flow
    PathEntry* same = nullptr;
    for (PathEntry& e : f.path)
      if (e.resource == u.resource) {
        same = &e;
        break;
      }
    if (same != nullptr) {
      same->coefficient += u.coefficient;  // crossing a resource twice uses it twice
    } else {
      f.path.push_back(PathEntry{u.resource, 0, u.coefficient});
      const Resource& res = resources_[u.resource];
      alone = alone && !res.dirty && res.users.empty();
    }
  }
  if (f.path.empty() && std::isinf(rate_cap_per_s)) {
    free_slots_.push_back(slot);
    throw std::invalid_argument("FlowNetwork::start_flow: a flow that crosses no resource needs a finite rate cap");
  }
  if (next_id_ >= (uint64_t{1} << 32)) {
    f.path.clear();
    free_slots_.push_back(slot);
    throw std::length_error("FlowNetwork: too many flows started");
  }
  // Reset the slot field by field: its completion version keeps stale entries of the slot's last flow stale.
  f.id = (next_id_++ << 32) | slot;
  f.amount = amount;
  f.remaining = amount;
  f.rate_cap = rate_cap_per_s;
  f.rate = 0;
  f.last_update = q_.now();
  f.completion = SimTime::max();
  f.bottleneck = kBoundByNone;
  f.stamp = 0;
  f.new_rate = 0;
  f.new_bottleneck = kBoundByNone;
  f.frozen = false;
  f.in_completions = false;
  f.attached = false;
  f.finished = false;
  f.tagged = false;
  f.alone = alone;
  ++active_;
  return slot;
}

void FlowNetwork::bad_use(const Use& u) const {
  resource(u.resource);  // throws for an unknown id
  throw std::invalid_argument(fmt::format("FlowNetwork::start_flow: coefficient on '{}' must be finite and >= 0, got {}",
                                          names_[u.resource], u.coefficient));
}

[[gnu::always_inline]] inline void FlowNetwork::launch(Slot slot) {
  Flow& f = flows_[slot];
  if (f.amount == 0) {
    // Completes at now() through the queue, so on_done never runs inside start_flow. It takes no
    // bandwidth, so it is not attached to its resources.
    update_completion(slot);
  } else if (f.path.empty()) {
    f.rate = f.rate_cap;  // alone in its own component
    f.bottleneck = kBoundByCap;
    update_completion(slot);
  } else if (f.alone) {
    // Its component is itself: the solve's one-flow case (solve_alone) without marking, searching
    // and re-solving its resources. Most of a replay's flows (a kernel on its GPU's SMs and HBM, a
    // collective on its links) start alone. Attached and solved in one pass over its path (what
    // attach and solve_alone do, the same tie rules).
    double best = 0;
    int64_t who = kBoundByNone;
    for (uint32_t i = 0; i < f.path.size(); ++i) {
      PathEntry& pe = f.path[i];
      Resource& res = resources_[pe.resource];
      pe.user_index = static_cast<uint32_t>(res.users.size());
      res.users.push_back(User{slot, i});
      lower_level(best, who, res.capacity / pe.coefficient, static_cast<int64_t>(pe.resource));
    }
    f.attached = true;
    take_alone_rate(f, best, who);
    apply(slot);
  } else {
    attach(slot, /*dirty=*/true);
  }
  if (!deferring_) settle();
}

bool FlowNetwork::cancel_flow(FlowId id) {
  const Slot slot = static_cast<Slot>(id & 0xffffffffu);
  if (id == 0 || slot >= flows_.size() || flows_[slot].id != id) return false;
  Flow& f = flows_[slot];
  if (f.finished) return false;
  drop_completion(f);
  if (f.attached) detach(slot);
  release(slot);
  --active_;
  if (!deferring_) settle();
  return true;
}

[[gnu::always_inline]] inline void FlowNetwork::release(Slot slot) {
  Flow& f = flows_[slot];
  f.id = 0;
  f.path.clear();
  if (!f.tagged) on_done_[slot] = nullptr;
  free_slots_.push_back(slot);
}

FlowNetwork::Slot FlowNetwork::slot_of(FlowId id) const {
  const Slot slot = static_cast<Slot>(id & 0xffffffffu);
  if (id == 0 || slot >= flows_.size() || flows_[slot].id != id)
    throw std::out_of_range(fmt::format("FlowNetwork: unknown or finished flow {}", id));
  return slot;
}

double FlowNetwork::rate(FlowId f) const {
  settle_if_dirty();
  return flows_[slot_of(f)].rate;
}

double FlowNetwork::remaining(FlowId id) const {
  // No settle needed: a rate change at now() does not change progress made up to now().
  const Flow& f = flows_[slot_of(id)];
  if (f.finished) return 0.0;
  const double dt_s = static_cast<double>((q_.now() - f.last_update).ps) / 1e12;
  return std::max(0.0, f.remaining - f.rate * dt_s);
}

std::string FlowNetwork::bottleneck(FlowId id) const {
  settle_if_dirty();
  const Flow& f = flows_[slot_of(id)];
  if (f.bottleneck == kBoundByCap) return "cap";
  if (f.bottleneck == kBoundByNone) return "none";
  return names_[static_cast<std::size_t>(f.bottleneck)];
}

double FlowNetwork::utilization(ResourceId r) const {
  settle_if_dirty();
  const Resource& res = resource(r);
  double used = 0;
  for (const User& u : res.users) {
    const Flow& f = flows_[u.flow];
    used += f.path[u.path_index].coefficient * f.rate;
  }
  return used / res.capacity;
}

void FlowNetwork::attach(Slot slot, bool dirty) {
  Flow& f = flows_[slot];
  for (uint32_t i = 0; i < f.path.size(); ++i) {
    Resource& res = resources_[f.path[i].resource];
    f.path[i].user_index = static_cast<uint32_t>(res.users.size());
    res.users.push_back(User{slot, i});
    if (dirty) mark_dirty(f.path[i].resource);
  }
  f.attached = true;
}

[[gnu::always_inline]] inline void FlowNetwork::detach(Slot slot) {
  Flow& f = flows_[slot];
  for (const PathEntry& pe : f.path) {
    Resource& res = resources_[pe.resource];
    if (res.users.size() == 1) {  // alone on it (the rule): nothing moves, nothing to re-solve
      res.users.pop_back();
      continue;
    }
    // Swap-remove, fixing the moved user's back-index.
    const User last = res.users.back();
    res.users[pe.user_index] = last;
    flows_[last.flow].path[last.path_index].user_index = pe.user_index;
    res.users.pop_back();
    // The flows left on it share what this one freed; none left, nothing to re-solve.
    if (!res.users.empty()) mark_dirty(pe.resource);
  }
  f.attached = false;
}

[[gnu::always_inline]] inline void FlowNetwork::advance(Flow& f) {
  const SimTime now = q_.now();
  if (now == f.last_update) return;
  const double dt_s = static_cast<double>((now - f.last_update).ps) / 1e12;
  f.remaining = std::max(0.0, f.remaining - f.rate * dt_s);
  f.last_update = now;
}

[[gnu::always_inline]] inline void FlowNetwork::drop_completion(Flow& f) {
  if (!f.in_completions) return;
  f.in_completions = false;  // its heap entry is now stale
  --live_completions_;
}

const FlowNetwork::Completion* FlowNetwork::earliest_completion_after_stale() {
  while (!completions_.empty() && !valid(completions_.front())) {
    std::pop_heap(completions_.begin(), completions_.end(), CompletionLater{});
    completions_.pop_back();
  }
  return completions_.empty() ? nullptr : &completions_.front();
}

[[gnu::always_inline]] inline void FlowNetwork::update_completion(Slot slot) {
  Flow& f = flows_[slot];
  drop_completion(f);
  const SimTime now = q_.now();
  SimTime when = SimTime::max();  // never (rate 0)
  bool beyond_clock = false;
  if (f.remaining <= kRelativeEpsilon * f.amount) {
    when = now;
  } else if (f.rate > 0) {
    const double delay_ps = f.remaining / f.rate * 1e12;
    const double headroom_ps = static_cast<double>(SimTime::max().ps - now.ps);
    if (delay_ps + 2 < headroom_ps) {
      double whole_ps = std::floor(delay_ps);
      if (delay_ps - whole_ps > delay_ps * kTickNoise) whole_ps += 1;  // round up to the next ps
      when = now + SimTime::from_ps(static_cast<int64_t>(whole_ps));
    } else {
      // It would end after the clock's range: an entry at SimTime::max() that, should the
      // simulation get there (nothing else changes its rate first), throws TimeOverflow.
      beyond_clock = true;
    }
  }
  f.completion = when;
  if (when == SimTime::max() && !beyond_clock) return;
  f.in_completions = true;
  ++live_completions_;
  heap_push(completions_, Completion{when.ps, f.id, ++f.completion_version, slot}, CompletionLater{});  // (core/heap_push.h)
  if (completions_.size() > 64 && completions_.size() > 2 * live_completions_) {
    // O(n) after at least n/2 superseded entries: O(1) amortized per update.
    std::erase_if(completions_, [this](const Completion& c) { return !valid(c); });
    std::make_heap(completions_.begin(), completions_.end(), CompletionLater{});
  }
}

[[gnu::always_inline]] inline void FlowNetwork::settle() {
  if (!dirty_.empty()) solve_components();
  reschedule();
}

void FlowNetwork::settle_if_dirty() const {
  // Queries see the rates as they are after every change so far, even inside a completion batch
  // whose solve is deferred. The network is never const while it has pending changes (those come
  // only from non-const calls), so the cast never writes to a const object.
  if (!dirty_.empty()) const_cast<FlowNetwork*>(this)->settle();
}

void FlowNetwork::freeze(Flow& f, double level, int64_t bound_by) {
  f.frozen = true;
  f.new_rate = level;
  f.new_bottleneck = bound_by;
  for (const PathEntry& pe : f.path) {
    Resource& res = resources_[pe.resource];
    res.frozen_use += pe.coefficient * level;
    res.unfrozen_coef -= pe.coefficient;
    --res.unfrozen_count;
    ++res.version;  // its heap entry is now a lower bound; re-keyed when it surfaces
  }
}

void FlowNetwork::solve_components() {
  ++stamp_;
  comp_flows_.clear();
  comp_resources_.clear();
  for (ResourceId r : dirty_) {
    Resource& res = resources_[r];
    res.dirty = false;
    if (res.stamp != stamp_) {
      res.stamp = stamp_;
      comp_resources_.push_back(r);
    }
  }
  dirty_.clear();

  // Breadth-first over the bipartite graph flows <-> resources: only the components that the
  // changes touched are re-solved.
  for (std::size_t k = 0; k < comp_resources_.size(); ++k) {
    for (const User& u : resources_[comp_resources_[k]].users) {
      Flow& f = flows_[u.flow];
      if (f.stamp == stamp_) continue;
      f.stamp = stamp_;
      comp_flows_.push_back(u.flow);
      for (const PathEntry& pe : f.path) {
        Resource& next = resources_[pe.resource];
        if (next.stamp != stamp_) {
          next.stamp = stamp_;
          comp_resources_.push_back(pe.resource);
        }
      }
    }
  }

  // A finished flow's resources with no other flow on them: nothing to solve.
  if (comp_flows_.empty()) return;
  if (comp_flows_.size() == 1) {
    solve_alone(flows_[comp_flows_[0]]);
  } else {
    progressive_filling();
  }
  for (Slot s : comp_flows_) apply(s);
}

void FlowNetwork::solve_alone(Flow& f) {
  // One flow alone: its rate is the lowest of its cap and each resource's capacity over its
  // coefficient -- what the filling finds, with the same tie rule (a resource before the cap, the
  // lower resource id first), without the heap.
  double best = 0;
  int64_t who = kBoundByNone;
  for (const PathEntry& pe : f.path)
    lower_level(best, who, resources_[pe.resource].capacity / pe.coefficient, static_cast<int64_t>(pe.resource));
  take_alone_rate(f, best, who);
}

[[gnu::always_inline]] inline void FlowNetwork::take_alone_rate(Flow& f, double best, int64_t who) {
  if (who == kBoundByNone || (std::isfinite(f.rate_cap) && f.rate_cap < best)) {
    best = f.rate_cap;
    who = kBoundByCap;
  }
  f.frozen = true;
  f.new_rate = std::max(0.0, best);
  f.new_bottleneck = who;
}

[[gnu::always_inline]] inline void FlowNetwork::apply(Slot s) {
  // A flow whose rate is unchanged keeps its completion time untouched, so unrelated events
  // cannot perturb it by float noise.
  Flow& f = flows_[s];
  if (f.new_rate != f.rate) {
    advance(f);  // progress up to now at the old rate
    f.rate = f.new_rate;
    update_completion(s);
  }
  f.bottleneck = f.new_bottleneck;
}

void FlowNetwork::progressive_filling() {
  // Progressive filling. Every unfrozen flow sits at the common `level`; the next event is the
  // lowest level at which a resource saturates or a flow reaches its cap. A min-heap holds one
  // entry per resource (a lower bound on its saturation level, re-keyed lazily) and one per
  // capped flow: O((R + F + re-keys) log(R + F)) plus O(P) for the P path entries.
  for (ResourceId r : comp_resources_) {
    Resource& res = resources_[r];
    res.frozen_use = 0;
    res.unfrozen_coef = 0;
    res.unfrozen_count = 0;
    res.version = 0;
  }
  for (Slot s : comp_flows_) {
    Flow& f = flows_[s];
    f.frozen = false;
    for (const PathEntry& pe : f.path) {
      Resource& res = resources_[pe.resource];
      res.unfrozen_coef += pe.coefficient;
      ++res.unfrozen_count;
    }
  }
  heap_.clear();
  for (ResourceId r : comp_resources_) {
    const Resource& res = resources_[r];
    if (res.unfrozen_count > 0) heap_.push_back(Level{res.capacity / res.unfrozen_coef, static_cast<int64_t>(r), 0});
  }
  for (std::size_t i = 0; i < comp_flows_.size(); ++i) {
    const Flow& f = flows_[comp_flows_[i]];
    if (std::isfinite(f.rate_cap)) heap_.push_back(Level{f.rate_cap, -1 - static_cast<int64_t>(i), 0});
  }
  // A few entries (the common component: a kernel and a collective beside it) are kept unordered and the lowest
  // found by a scan: LevelLater orders the entries totally (one entry per resource and per capped flow), so the scan
  // takes them in the heap's order and the solve is the same.
  const bool scan = heap_.size() <= kScanEntries;
  if (!scan) std::make_heap(heap_.begin(), heap_.end(), LevelLater{});

  double level = 0;
  while (!heap_.empty()) {
    Level top;
    if (scan) {
      std::size_t lowest = 0;
      for (std::size_t i = 1; i < heap_.size(); ++i)
        if (LevelLater{}(heap_[lowest], heap_[i])) lowest = i;
      top = heap_[lowest];
      heap_[lowest] = heap_.back();
    } else {
      std::pop_heap(heap_.begin(), heap_.end(), LevelLater{});
      top = heap_.back();
    }
    heap_.pop_back();
    if (top.who >= 0) {
      Resource& res = resources_[static_cast<std::size_t>(top.who)];
      if (res.unfrozen_count == 0) continue;
      if (top.version != res.version) {
        // Flows froze on it since this entry was made. Freezing a flow at a level no higher than
        // a resource's saturation level never lowers that level, so the entry was a lower bound:
        // re-key it now instead of on every freeze (one live entry per resource).
        if (!(res.unfrozen_coef > 0)) {
          // Cancellation drift in the running sum; recompute it exactly.
          res.unfrozen_coef = 0;
          for (const User& u : res.users) {
            const Flow& f = flows_[u.flow];
            if (!f.frozen) res.unfrozen_coef += f.path[u.path_index].coefficient;
          }
        }
        // Never below the current level: the true value is not, only rounding can make it so.
        const double saturation = (res.capacity - res.frozen_use) / res.unfrozen_coef;
        heap_.push_back(Level{std::max(level, saturation), top.who, res.version});
        if (!scan) std::push_heap(heap_.begin(), heap_.end(), LevelLater{});
        continue;
      }
      level = std::max(level, top.level);
      // freeze() does not change the users list, only the flows' frozen flags.
      for (const User& u : res.users) {
        Flow& f = flows_[u.flow];
        if (!f.frozen) freeze(f, level, top.who);
      }
    } else {
      Flow& f = flows_[comp_flows_[static_cast<std::size_t>(-1 - top.who)]];
      if (f.frozen) continue;
      level = std::max(level, top.level);
      freeze(f, level, kBoundByCap);
    }
  }
}

[[gnu::always_inline]] inline void FlowNetwork::reschedule() {
  const Completion* first = earliest_completion();
  const SimTime next = first == nullptr ? SimTime::max() : std::max(SimTime::from_ps(first->ps), q_.now());
  if (external_) {
    // What scheduling would do, without the queue: the same sequence number, and no stale entry.
    if (pending_ && scheduled_at_ == next) return;
    pending_ = first != nullptr;  // (at SimTime::max(): a completion past the clock, which throws if reached)
    scheduled_at_ = next;
    if (pending_) pending_seq_ = q_.reserve_seq();
    return;
  }
  if (scheduled_ && scheduled_at_ == next) return;
  if (scheduled_) q_.cancel(scheduled_);
  scheduled_ = {};
  scheduled_at_ = SimTime::max();
  if (first == nullptr) return;  // nothing will complete (rates 0): no event
  scheduled_ = q_.schedule(next, [this] { on_completion_event(); });
  scheduled_at_ = next;
}

void FlowNetwork::on_completion_event() {
  scheduled_ = {};
  scheduled_at_ = SimTime::max();
  const SimTime now = q_.now();
  if (now == SimTime::max()) {
    const Completion* c = earliest_completion();
    if (c == nullptr) return;
    const Flow& f = flows_[c->slot];
    throw TimeOverflow(fmt::format("a flow of {:.6g} units at {:.6g} per second would end after the largest "
                                   "simulated time (2^63 ps, about 106 days)",
                                   f.remaining, f.rate));
  }
  // Slots, not references: callbacks may start flows, which can reallocate flows_.
  std::vector<Slot> done;
  done.swap(done_scratch_);
  for (const Completion* c = earliest_completion(); c != nullptr && c->ps <= now.ps; c = earliest_completion()) {
    const Slot slot = c->slot;
    std::pop_heap(completions_.begin(), completions_.end(), CompletionLater{});
    completions_.pop_back();
    Flow& f = flows_[slot];
    drop_completion(f);
    f.remaining = 0;
    f.last_update = now;
    if (f.attached) detach(slot);
    f.finished = true;
    --active_;
    done.push_back(slot);
  }

  // Callbacks typically start the next flows; solving once after all of them (instead of once
  // per start) is exact because time does not advance in between. Queries made meanwhile settle
  // first. The guard also cleans up if a callback throws.
  struct Batch {
    FlowNetwork& net;
    const std::vector<Slot>& done;
    bool outer;
    ~Batch() {
      net.deferring_ = outer;
      for (Slot s : done) net.release(s);
    }
  };
  {
    Batch batch{*this, done, deferring_};
    deferring_ = true;
    for (Slot s : done) {
      const Flow& f = flows_[s];
      if (f.tagged) {
        sink_->flow_done(f.id, f.tag);
        continue;
      }
      // Moved out first: the callback may start flows, which can reallocate on_done_.
      std::function<void(FlowId)> cb = std::move(on_done_[s]);
      if (cb) cb(flows_[s].id);
    }
  }
  done.clear();
  if (done_scratch_.capacity() < done.capacity()) done_scratch_.swap(done);
  if (!deferring_) settle();
}

}  // namespace racksim::sim
