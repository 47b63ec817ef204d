#pragma once
// Runs the gatedlm binary from tests: synchronously (exit code + combined output) or in
// the background (to be signalled).
#include <sys/types.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace gatedlm::testing {

struct CliResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

CliResult run_gatedlm(const std::vector<std::string>& args);
pid_t spawn_gatedlm(const std::vector<std::string>& args, const std::string& log_path);
// The same for another program (argv[0] = program, e.g. mpirun running gatedlm).
CliResult run_program(const std::string& program, const std::vector<std::string>& args);
pid_t spawn_program(const std::string& program, const std::vector<std::string>& args, const std::string& log_path);
int wait_exit_code(pid_t pid);  // 128 + signal for a signalled process
// Waits until the process `pid` has used `cpu_s` seconds of CPU (user + system, from
// /proc/PID/stat): the event "it is at work", which holds on a loaded machine too, where a
// wall-clock sleep may end before the work has begun. False when the process ended or
// `timeout_s` passed first.
bool wait_until_busy(pid_t pid, double cpu_s, double timeout_s = 120);

// Sets (or, with value null, removes) an environment variable for the binaries a test
// starts while it lives; the old value comes back afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { had_ ? ::setenv(name_, old_.c_str(), 1) : ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace gatedlm::testing
