#pragma once
// What `gatedlm demo` is asked to do (demo/demo.h), read by its stages too.
#include <cstdint>
#include <string>

namespace gatedlm::demo {

struct DemoOptions {
  std::string preset = "small";  // a name in configs/demo/ or a JSON file
  double minutes = 0;            // whole-demo budget; 0 = the preset's
  int64_t steps = 0;             // fixed steps per model (0 = from the preset or the time budget)
  std::string corpus;            // text file or directory; empty = the State of the Union (npm)
  std::string heldout;           // text file; empty = Moby-Dick (npm); "none" = skip
  std::string out = "runs/demo";
  std::string cache;  // corpus cache; empty = default_cache_dir()
  bool fresh = false;
  std::string command_line;  // recorded in results.json
};

}  // namespace gatedlm::demo
