#include "sim/workflow/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace racksim::workflow {

int hardware_jobs() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

void parallel_for(std::size_t n, int jobs, const std::function<void(std::size_t)>& fn, const ProgressFn& progress,
                  int progress_interval_ms, const InOrderFn& in_order) {
  if (n == 0) {
    if (progress) progress(0, 0);
    return;
  }
  const std::size_t workers = std::min<std::size_t>(n, static_cast<std::size_t>(std::max(1, jobs)));
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex m;
  std::condition_variable cv;
  std::size_t done = 0;
  std::exception_ptr failure;
  // Items finished, for the in-order callback: finished[i] once fn(i) has returned.
  std::vector<char> finished;
  std::size_t emitted = 0;
  if (in_order) finished.assign(n, 0);

  auto work = [&] {
    for (;;) {
      if (stop.load(std::memory_order_relaxed)) return;
      const std::size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) return;
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!failure) failure = std::current_exception();
        stop = true;
      }
      {
        std::lock_guard<std::mutex> lock(m);
        ++done;
        if (in_order) finished[i] = 1;
      }
      cv.notify_one();
    }
  };

  std::vector<std::thread> pool;
  pool.reserve(workers);
  for (std::size_t w = 0; w < workers; ++w) pool.emplace_back(work);
  // Hands the finished prefix to in_order, outside the lock; a throw stops the pool.
  auto emit = [&](std::unique_lock<std::mutex>& lock) {
    while (in_order && !stop && emitted < n && finished[emitted]) {
      const std::size_t i = emitted++;
      lock.unlock();
      try {
        in_order(i);
      } catch (...) {
        lock.lock();
        if (!failure) failure = std::current_exception();
        stop = true;
        return;
      }
      lock.lock();
    }
  };
  {
    std::unique_lock<std::mutex> lock(m);
    while (done < n && !stop) {
      cv.wait_for(lock, std::chrono::milliseconds(std::max(1, progress_interval_ms)));
      emit(lock);
      if (progress && !stop) {
        const std::size_t d = done;
        lock.unlock();
        progress(d, n);
        lock.lock();
      }
    }
    emit(lock);
  }
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  if (progress) progress(done, n);
}

}  // namespace racksim::workflow
