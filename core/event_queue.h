// Deterministic discrete-event queue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/time.h"

namespace racksim::sim {

// Runs handlers in order of (time, insertion sequence): ties run FIFO, so the same input always
// gives the same order. Binary heap with lazy deletion for cancels: O(log n) per operation
// (amortized; the heap is compacted when cancelled entries outnumber live ones).
// Handlers may schedule and cancel other events while running.
// Handlers live in reusable slots of a vector (no allocation per event once the queue has grown,
// for handlers that fit std::function's small buffer: up to two pointers' worth of captures).
class EventQueue {
 public:
  using Handler = std::function<void()>;
  // Opaque; id 0 means "no event". Ids are never reused, so a stale handle cannot cancel a
  // later event.
  struct Handle {
    uint64_t id = 0;    // the event's sequence number
    uint32_t slot = 0;  // where its handler is kept
    explicit operator bool() const { return id != 0; }
  };

  // Throws std::logic_error if at < now(), std::invalid_argument if h is empty.
  Handle schedule(SimTime at, Handler h);

  // Where events scheduled with a tag go: one virtual call with the tag the driver chose (e.g. an
  // op id and what to do with it), for a driver that schedules an event per op and would otherwise
  // build, move and destroy a std::function for each. Ordered with the other events as usual.
  class Sink {
   public:
    virtual void on_event(uint64_t tag) = 0;

   protected:
    ~Sink() = default;
  };
  // The sink must outlive the tagged events.
  void set_sink(Sink* sink) { sink_ = sink; }
  // schedule(), delivering `tag` to the sink. Throws std::logic_error if at < now() or no sink is set.
  Handle schedule_tagged(SimTime at, uint64_t tag);
  // now() + delay, as schedule_after.
  Handle schedule_tagged_after(SimTime delay, uint64_t tag);
  // now() + delay; delay must be >= 0. Throws std::overflow_error if the sum overflows.
  Handle schedule_after(SimTime delay, Handler h);
  // True if the event was pending (it will now never run); false if it already ran, was already
  // cancelled, or the handle is empty.
  bool cancel(Handle h);
  // No pending (non-cancelled) events.
  bool empty() const { return live_ == 0; }
  // Time of the event being run or last run (or set by run_until).
  SimTime now() const { return now_; }
  // Runs the next event; false if none.
  bool step();
  // Runs until no events remain.
  void run();
  // Runs every event with time <= t (including ones scheduled meanwhile), then sets now() = t.
  // Throws std::logic_error if t < now().
  void run_until(SimTime t);
  // Time of the next pending event (SimTime::max() if none); does not run it.
  SimTime next_time();
  // Sets now() to t without running anything. Throws std::logic_error if t < now() or an event
  // is pending before t. For a driver that interleaves its own time-ordered work with the queue.
  void advance_to(SimTime t) {  // inline: a replay calls it once per event it runs itself
    pop_cancelled();
    if (t < now_ || (!heap_.empty() && heap_.front().at < t)) advance_error(t);
    now_ = t;
  }
  std::size_t pending() const { return live_; }
  // For a driver that keeps events of its own (a FlowNetwork without its own queue events): the
  // sequence number an event scheduled now would get, consumed as if it had been scheduled; and the
  // next pending event's time and sequence (false if none). Events order by (time, sequence).
  uint64_t reserve_seq() { return next_seq_++; }
  // Inline: a replay asks once per event it runs.
  bool peek(SimTime& at, uint64_t& seq) {
    pop_cancelled();
    if (heap_.empty()) return false;
    at = heap_.front().at;
    seq = heap_.front().seq;
    return true;
  }
  uint64_t events_processed() const { return processed_; }

 private:
  struct Entry {
    SimTime at;
    uint64_t seq;   // also the handle id
    uint32_t slot;  // handler slot; the entry is live while slot_seq_[slot] == seq
  };
  // std heap algorithms build a max-heap; "later" as less-than puts the earliest on top.
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.at != b.at ? a.at > b.at : a.seq > b.seq;
    }
  };

  // Drops cancelled entries from the top of the heap (inline: none, almost always).
  void pop_cancelled() {
    while (!heap_.empty() && !live(heap_.front())) pop_top();
  }
  void pop_top();
  [[noreturn]] void advance_error(SimTime t) const;
  void compact_if_sparse();

  uint32_t take_slot(SimTime at, uint64_t seq);  // a free slot for an event at `at`, pushed on the heap
  bool live(const Entry& e) const { return slot_seq_[e.slot] == e.seq; }
  void free_slot(uint32_t slot);

  std::vector<Entry> heap_;          // may hold cancelled entries
  std::vector<Handler> handlers_;    // by slot; empty for a tagged event
  std::vector<uint64_t> tags_;       // by slot: a tagged event's tag
  Sink* sink_ = nullptr;
  std::vector<uint64_t> slot_seq_;   // by slot: the pending event's seq, 0 when free
  std::vector<uint32_t> free_slots_;
  std::size_t live_ = 0;             // pending (not cancelled) events
  SimTime now_{};
  uint64_t next_seq_ = 1;
  uint64_t processed_ = 0;
};

}  // namespace racksim::sim
