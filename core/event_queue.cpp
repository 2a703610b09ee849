#include "core/event_queue.h"
#include "core/heap_push.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace racksim::sim {

uint32_t EventQueue::take_slot(SimTime at, uint64_t seq) {
  uint32_t slot = 0;
  if (free_slots_.empty()) {
    slot = static_cast<uint32_t>(handlers_.size());
    handlers_.emplace_back();
    tags_.push_back(0);
    slot_seq_.push_back(seq);
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
    slot_seq_[slot] = seq;
  }
  ++live_;
  heap_push(heap_, Entry{at, seq, slot}, Later{});  // (core/heap_push.h: why not std::push_heap)
  return slot;
}

EventQueue::Handle EventQueue::schedule(SimTime at, Handler h) {
  if (at < now_) {
    throw std::logic_error(fmt::format("EventQueue::schedule: time {} ps is before now ({} ps)", at.ps, now_.ps));
  }
  if (!h) throw std::invalid_argument("EventQueue::schedule: empty handler");
  const uint64_t seq = next_seq_++;
  const uint32_t slot = take_slot(at, seq);
  handlers_[slot] = std::move(h);
  return Handle{seq, slot};
}

EventQueue::Handle EventQueue::schedule_tagged(SimTime at, uint64_t tag) {
  if (at < now_) {
    throw std::logic_error(fmt::format("EventQueue::schedule_tagged: time {} ps is before now ({} ps)", at.ps, now_.ps));
  }
  if (sink_ == nullptr) throw std::logic_error("EventQueue::schedule_tagged: no sink set");
  const uint64_t seq = next_seq_++;
  const uint32_t slot = take_slot(at, seq);
  tags_[slot] = tag;  // handlers_[slot] is empty: free slots hold no handler
  return Handle{seq, slot};
}

EventQueue::Handle EventQueue::schedule_after(SimTime delay, Handler h) {
  if (delay.ps < 0) {
    throw std::logic_error(fmt::format("EventQueue::schedule_after: negative delay {} ps", delay.ps));
  }
  return schedule(now_ + delay, std::move(h));
}

EventQueue::Handle EventQueue::schedule_tagged_after(SimTime delay, uint64_t tag) {
  if (delay.ps < 0) {
    throw std::logic_error(fmt::format("EventQueue::schedule_after: negative delay {} ps", delay.ps));
  }
  return schedule_tagged(now_ + delay, tag);
}

void EventQueue::free_slot(uint32_t slot) {
  slot_seq_[slot] = 0;
  free_slots_.push_back(slot);
  --live_;
}

bool EventQueue::cancel(Handle h) {
  if (!h) return false;
  // The heap entry stays until it surfaces or the heap is compacted (lazy deletion).
  if (h.slot >= slot_seq_.size() || slot_seq_[h.slot] != h.id) return false;
  handlers_[h.slot] = nullptr;  // releases what the handler holds now, as erasing it did
  free_slot(h.slot);
  compact_if_sparse();
  return true;
}

void EventQueue::pop_top() {
  std::pop_heap(heap_.begin(), heap_.end(), Later{});
  heap_.pop_back();
}

void EventQueue::compact_if_sparse() {
  // Rebuilding costs O(n) and happens only after n/2 cancels since the last rebuild, so it adds
  // O(1) amortized per cancel and bounds the garbage (e.g. a flow network's superseded
  // completion events far in the future).
  if (heap_.size() < 64 || heap_.size() <= 2 * live_) return;
  std::erase_if(heap_, [this](const Entry& e) { return !live(e); });
  std::make_heap(heap_.begin(), heap_.end(), Later{});
}

bool EventQueue::step() {
  pop_cancelled();
  if (heap_.empty()) return false;
  const Entry e = heap_.front();
  std::pop_heap(heap_.begin(), heap_.end(), Later{});
  heap_.pop_back();
  now_ = e.at;
  ++processed_;
  if (!handlers_[e.slot]) {
    const uint64_t tag = tags_[e.slot];
    free_slot(e.slot);
    sink_->on_event(tag);
    return true;
  }
  Handler h = std::move(handlers_[e.slot]);
  handlers_[e.slot] = nullptr;
  free_slot(e.slot);
  h();
  return true;
}

void EventQueue::run() {
  while (step()) {
  }
}

SimTime EventQueue::next_time() {
  pop_cancelled();
  return heap_.empty() ? SimTime::max() : heap_.front().at;
}

void EventQueue::advance_error(SimTime t) const {
  if (t < now_) {
    throw std::logic_error(fmt::format("EventQueue::advance_to: time {} ps is before now ({} ps)", t.ps, now_.ps));
  }
  throw std::logic_error(fmt::format("EventQueue::advance_to: an event is pending before {} ps", t.ps));
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
