#include "cli_runner.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace gatedlm::testing {

namespace {

[[noreturn]] void exec_program(std::string binary, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(binary.data());
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(binary.c_str(), argv.data());
  std::perror("execv");
  ::_exit(127);
}

}  // namespace

pid_t spawn_gatedlm(const std::vector<std::string>& args, const std::string& log_path) {
  return spawn_program(GATEDLM_BINARY, args, log_path);
}

pid_t spawn_program(const std::string& program, const std::vector<std::string>& args, const std::string& log_path) {
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    exec_program(program, args);
  }
  return pid;
}

int wait_exit_code(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

namespace {

// CPU seconds a process has used; negative once it is gone (or reaped).
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t name_end = stat.rfind(')');  // the command name may hold spaces
  if (name_end == std::string::npos) return -1;
  std::istringstream fields(stat.substr(name_end + 1));
  std::string state;
  fields >> state;
  if (state == "Z" || state == "X") return -1;
  std::string skip;
  for (int field = 4; field < 14; ++field) fields >> skip;  // ppid .. cmajflt
  long long utime = 0, stime = 0;
  fields >> utime >> stime;
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace

bool wait_until_busy(pid_t pid, double cpu_s, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    const double used = cpu_seconds(pid);
    if (used < 0) return false;
    if (used >= cpu_s) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling the event, not timing it
  }
}

CliResult run_gatedlm(const std::vector<std::string>& args) { return run_program(GATEDLM_BINARY, args); }

CliResult run_program(const std::string& program, const std::vector<std::string>& args) {
  char log_template[] = "/tmp/gatedlm_cli_XXXXXX";
  int fd = ::mkstemp(log_template);
  ::close(fd);
  const int code = wait_exit_code(spawn_program(program, args, log_template));
  std::string output;
  if (FILE* f = std::fopen(log_template, "r")) {
    std::array<char, 4096> buf;
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) output.append(buf.data(), n);
    std::fclose(f);
  }
  ::unlink(log_template);
  // In a sanitized build (scripts/test.sh --sanitize) a report from the program is a
  // failure even where the test expects a non-zero exit (a refusal) and finds its words.
  for (const char* report : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error: "})
    if (output.find(report) != std::string::npos)
      ADD_FAILURE() << program << " reported \"" << report << "\":\n" << output;
  return {code, output};
}

}  // namespace gatedlm::testing
