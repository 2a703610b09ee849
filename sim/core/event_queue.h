// Deterministic discrete-event queue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "sim/core/time.h"

namespace racksim::sim {

// Runs handlers in order of (time, insertion sequence): ties run FIFO, so the same input always
// gives the same order. Binary heap with lazy deletion for cancels: O(log n) per operation
// (amortized; the heap is compacted when cancelled entries outnumber live ones).
// Handlers may schedule and cancel other events while running.
class EventQueue {
 public:
  using Handler = std::function<void()>;
  // Opaque; id 0 means "no event". Ids are never reused, so a stale handle cannot cancel a
  // later event.
  struct Handle {
    uint64_t id = 0;
    explicit operator bool() const { return id != 0; }
  };

  // Throws std::logic_error if at < now(), std::invalid_argument if h is empty.
  Handle schedule(SimTime at, Handler h);
  // now() + delay; delay must be >= 0. Throws std::overflow_error if the sum overflows.
  Handle schedule_after(SimTime delay, Handler h);
  // True if the event was pending (it will now never run); false if it already ran, was already
  // cancelled, or the handle is empty.
  bool cancel(Handle h);
  // No pending (non-cancelled) events.
  bool empty() const { return handlers_.empty(); }
  // Time of the event being run or last run (or set by run_until).
  SimTime now() const { return now_; }
  // Runs the next event; false if none.
  bool step();
  // Runs until no events remain.
  void run();
  // Runs every event with time <= t (including ones scheduled meanwhile), then sets now() = t.
  // Throws std::logic_error if t < now().
  void run_until(SimTime t);
  std::size_t pending() const { return handlers_.size(); }
  uint64_t events_processed() const { return processed_; }

 private:
  struct Entry {
    SimTime at;
    uint64_t seq;  // also the handle id
  };
  // std heap algorithms build a max-heap; "later" as less-than puts the earliest on top.
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.at != b.at ? a.at > b.at : a.seq > b.seq;
    }
  };

  void pop_cancelled();    // drop cancelled entries from the top of the heap
  void compact_if_sparse();

  std::vector<Entry> heap_;                         // may hold cancelled entries
  std::unordered_map<uint64_t, Handler> handlers_;  // pending events only
  SimTime now_{};
  uint64_t next_seq_ = 1;
  uint64_t processed_ = 0;
};

}  // namespace racksim::sim
