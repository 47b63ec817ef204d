#pragma once
// Runs the gatedlm binary from tests: synchronously (exit code + combined output) or in
// the background (to be signalled).
#include <sys/types.h>

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

}  // namespace gatedlm::testing
