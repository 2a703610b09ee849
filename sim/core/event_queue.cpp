#include "sim/core/event_queue.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace racksim::sim {

EventQueue::Handle EventQueue::schedule(SimTime at, Handler h) {
  if (at < now_) {
    throw std::logic_error(fmt::format("EventQueue::schedule: time {} ps is before now ({} ps)", at.ps, now_.ps));
  }
  if (!h) throw std::invalid_argument("EventQueue::schedule: empty handler");
  const uint64_t seq = next_seq_++;
  handlers_.emplace(seq, std::move(h));
  heap_.push_back(Entry{at, seq});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
  return Handle{seq};
}

EventQueue::Handle EventQueue::schedule_after(SimTime delay, Handler h) {
  if (delay.ps < 0) {
    throw std::logic_error(fmt::format("EventQueue::schedule_after: negative delay {} ps", delay.ps));
  }
  return schedule(now_ + delay, std::move(h));
}

bool EventQueue::cancel(Handle h) {
  if (!h) return false;
  // The heap entry stays until it surfaces or the heap is compacted (lazy deletion).
  if (handlers_.erase(h.id) == 0) return false;
  compact_if_sparse();
  return true;
}

void EventQueue::pop_cancelled() {
  while (!heap_.empty() && !handlers_.contains(heap_.front().seq)) {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    heap_.pop_back();
  }
}

void EventQueue::compact_if_sparse() {
  // Rebuilding costs O(n) and happens only after n/2 cancels since the last rebuild, so it adds
  // O(1) amortized per cancel and bounds the garbage (e.g. a flow network's superseded
  // completion events far in the future).
  if (heap_.size() < 64 || heap_.size() <= 2 * handlers_.size()) return;
  std::erase_if(heap_, [this](const Entry& e) { return !handlers_.contains(e.seq); });
  std::make_heap(heap_.begin(), heap_.end(), Later{});
}

bool EventQueue::step() {
  pop_cancelled();
  if (heap_.empty()) return false;
  const Entry e = heap_.front();
  std::pop_heap(heap_.begin(), heap_.end(), Later{});
  heap_.pop_back();
  auto it = handlers_.find(e.seq);
  Handler h = std::move(it->second);
  handlers_.erase(it);
  now_ = e.at;
  ++processed_;
  h();
  return true;
}

void EventQueue::run() {
  while (step()) {
  }
}

void EventQueue::run_until(SimTime t) {
  if (t < now_) {
    throw std::logic_error(fmt::format("EventQueue::run_until: time {} ps is before now ({} ps)", t.ps, now_.ps));
  }
  for (;;) {
    pop_cancelled();
    if (heap_.empty() || heap_.front().at > t) break;
    step();
  }
  now_ = t;
}

}  // namespace racksim::sim
