#include "sim/workflow/util.h"

#include <cctype>
#include <filesystem>

namespace racksim::workflow {

namespace fs = std::filesystem;

std::string relative_to(const std::string& file, const std::string& rel) {
  const fs::path p(rel);
  if (p.is_absolute()) return rel;
  const fs::path dir = fs::path(file).parent_path();
  return dir.empty() ? rel : (dir / p).lexically_normal().string();
}

std::string flow_yaml(const YAML::Node& n) {
  YAML::Emitter e;
  e.SetMapFormat(YAML::Flow);
  e.SetSeqFormat(YAML::Flow);
  e << n;
  return e.c_str();
}

bool is_key_path(const std::string& key) {
  bool ok = !key.empty() && key.front() != '.' && key.back() != '.' && key.find("..") == std::string::npos;
  for (char c : key) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
  return ok;
}

}  // namespace racksim::workflow
