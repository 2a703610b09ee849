// How `racksim validate` runs a case that names an HLO module (`replay: FILE.hlo.gz` with
// `system:` and optional `gpus:`) without depending on the HLO importer: the importer sets the
// hook (for example from its command's registration), and validate calls it. The hook returns
// the same JSON report as `racksim run --json` (at least the fields the case measures) and
// throws input::InputError for invalid input. Until it is set, such a case is reported as
// "replay not available". validate runs cases on several threads, so the hook may be called
// from more than one thread at once: it must not share mutable state between calls.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace racksim::workflow {

// hlo: path of the module as resolved against the suite file; system: preset name; gpus: the
// case's `gpus:` or 0 when the case did not give one (the importer's default); sets: the case's
// `set:` overrides as KEY.PATH=VALUE (e.g. system.calibration=h200).
using ReplayHook = std::function<nlohmann::json(const std::string& hlo, const std::string& system, int gpus,
                                                const std::vector<std::string>& sets)>;

void set_replay_hook(ReplayHook hook);  // thread-safe; an empty function unsets it
ReplayHook replay_hook();               // a copy; empty when none is set

}  // namespace racksim::workflow
