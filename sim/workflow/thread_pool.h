// A small fixed pool of std::threads that runs the items 0..n-1 of an indexed job. Workers
// pull the next index from a shared counter, so the order in which items *finish* depends on
// scheduling, but each result is stored by its index: output order never depends on `jobs`.
#pragma once

#include <cstddef>
#include <functional>

namespace racksim::workflow {

// Called on the calling thread (never a worker) when items finish, at least every
// `progress_interval_ms`, and once at the end, with how many items are done. It may be called
// often: throttle drawing in the callback.
using ProgressFn = std::function<void(std::size_t done, std::size_t total)>;

// Called on the calling thread once per item, in index order, as soon as the item and every
// item before it have finished (a sweep writes its rows through it, so an interrupted run keeps
// the rows it finished, in order).
using InOrderFn = std::function<void(std::size_t index)>;

// Runs fn(i) for every i in [0, n) on `jobs` worker threads (jobs < 1 means 1; never more
// threads than items). The first exception thrown by fn or by `in_order` is rethrown here once
// all workers have stopped; the remaining items are skipped.
void parallel_for(std::size_t n, int jobs, const std::function<void(std::size_t)>& fn,
                  const ProgressFn& progress = {}, int progress_interval_ms = 100, const InOrderFn& in_order = {});

// The number of hardware threads, at least 1.
int hardware_jobs();

}  // namespace racksim::workflow
