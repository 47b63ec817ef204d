#include "io/named_config.h"

#include <filesystem>
#include <vector>

#include "core/error.h"

namespace gatedlm::io {

namespace fs = std::filesystem;

std::string find_named_config(const std::string& command, const std::string& subdir, const std::string& name) {
  if (name.empty()) fail(command, ": empty --preset");
  if (fs::is_regular_file(name)) return name;
  std::vector<fs::path> candidates;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const std::string file = name + ".json";
  const fs::path rel = fs::path("configs") / subdir / file;
  if (!ec) {
    candidates.push_back(exe.parent_path().parent_path() / rel);
    candidates.push_back(exe.parent_path().parent_path().parent_path() / rel);
  }
  candidates.push_back(rel);
  for (const auto& c : candidates)
    if (fs::is_regular_file(c)) return c.lexically_normal().string();
  std::string tried;
  for (const auto& c : candidates) tried += "\n  " + c.lexically_normal().string();
  fail(command, ": no preset \"", name, "\" (a JSON file, or NAME for configs/", subdir, "/NAME.json; looked at:",
       tried, ")");
}

}  // namespace gatedlm::io
