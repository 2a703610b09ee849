#include "core/dtype.h"

namespace racksim::sim {

std::string to_string(Dtype d) { return std::string(name_in(kDtypeNames, d)); }

std::optional<Dtype> dtype_from_string(std::string_view s) { return parse_in(kDtypeNames, s); }

}  // namespace racksim::sim
