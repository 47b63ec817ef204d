#pragma once
// What the demo and the sweep share to redo only the stages whose inputs changed, and to
// say where they are:
//   StageLog      "[demo 03:12] stage: message" lines on stderr, timed from the command's start;
//   stamps        a stage's output is trusted when its stamp file (e.g. DIR/data.key, RUN.key)
//                 holds the key of the inputs it was made from: the SHA-256 of their JSON;
//   JSON outputs  read strictly (core/json_file.h: a key given twice is refused) or null when
//                 missing or unreadable, which is an unfinished stage: it is redone.
// A stage removes its stamp before it starts and writes it when it has finished, so a stage
// cut short by a crash is never taken for a finished one.
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

namespace gatedlm {

class StageLog {
 public:
  explicit StageLog(std::string tool);  // "demo", "sweep": the lines' prefix
  void restart();                       // the clock starts now (the constructor starts it too)
  double elapsed_s() const;
  void say(const std::string& message) const;                            // "[tool mm:ss] message"
  void say(const std::string& stage, const std::string& message) const;  // "[tool mm:ss] stage: message"

 private:
  std::string tool_;
  std::chrono::steady_clock::time_point start_;
};

// The key of a stage's inputs: SHA-256 (hex) of their JSON text.
std::string stage_key(const nlohmann::json& inputs);
// A stamp file's first line; "" when it is missing or unreadable.
std::string read_stamp(const std::string& path);
bool stamp_matches(const std::string& path, const std::string& key);
void write_stamp(const std::string& path, const std::string& key);  // atomically
void remove_stamp(const std::string& path);                         // before the stage starts

// The file's JSON (core/json_file.h's strict parse), or null when the file is missing or is
// not valid JSON (cut short by a crash, a key given twice).
nlohmann::json read_json_or_null(const std::string& path);
// Writes text atomically unless the file already holds exactly that text (its time stamp
// then stays as it was).
void write_if_changed(const std::string& path, const std::string& text);

}  // namespace gatedlm
