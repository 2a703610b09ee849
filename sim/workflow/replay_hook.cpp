#include "sim/workflow/replay_hook.h"

#include <mutex>

namespace racksim::workflow {

namespace {
std::mutex& hook_mutex() {
  static std::mutex m;
  return m;
}
ReplayHook& hook_slot() {
  static ReplayHook h;
  return h;
}
}  // namespace

void set_replay_hook(ReplayHook hook) {
  std::lock_guard<std::mutex> lock(hook_mutex());
  hook_slot() = std::move(hook);
}

ReplayHook replay_hook() {
  std::lock_guard<std::mutex> lock(hook_mutex());
  return hook_slot();
}

}  // namespace racksim::workflow
