#pragma once
// The one way gatedlm runs a child process (gnuplot for the report, npm for the demo's
// corpora): an argv vector (no shell), optional text on its stdin, its stdout and stderr
// captured (or both sent to a log file), a timeout, and errors that name the program.
//
//   SubprocessSpec spec({"gnuplot", "data/report.gp"});
//   spec.cwd = dir;
//   SubprocessResult r = run_subprocess(spec);
//   if (!r.ok()) fail("gnuplot ", r.describe(), ":\n", r.err);
//
// Or run_subprocess_checked, which throws that error itself.
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gatedlm {

struct SubprocessSpec {
  SubprocessSpec() = default;
  explicit SubprocessSpec(std::vector<std::string> args) : argv(std::move(args)) {}

  // argv[0] is the program: a path when it contains '/', else a name looked up on PATH.
  std::vector<std::string> argv;
  // Text written to the child's stdin (then closed); none: stdin is /dev/null.
  std::optional<std::string> stdin_text;
  std::string cwd;       // the child's working directory; empty: this process's
  std::string log_path;  // non-empty: stdout and stderr both go to this file (truncated), not captured
  double timeout_s = 0;  // > 0: SIGTERM after this many seconds, SIGKILL 2 s later; 0: no limit
};

struct SubprocessResult {
  std::string program;     // argv[0] as given
  int exit_status = -1;    // the status it exited with; -1 when a signal ended it
  int signal = 0;          // the signal that ended it (0: it exited)
  bool timed_out = false;  // it ran past timeout_s and was killed
  std::string out, err;    // what it wrote (empty with log_path)

  bool ok() const { return !timed_out && signal == 0 && exit_status == 0; }
  // "exited with status 3", "was killed by signal 9 (Killed)", "timed out after 5 s".
  std::string describe(double timeout_s = 0) const;
  // The shell's convention in one number: the exit status, 128 + signal, 124 on a timeout.
  int shell_status() const;
};

// The absolute path `name` would run as (PATH lookup unless it contains '/'), or "" when
// there is no such executable file.
std::string find_program(const std::string& name);

// Runs the child to its end. Throws gatedlm::Error naming the program when it cannot be
// started (not found on PATH, not executable, bad cwd or log path); a child that starts
// and then fails is reported in the result, not thrown.
SubprocessResult run_subprocess(const SubprocessSpec& spec);

// run_subprocess, and throws gatedlm::Error unless the child exited 0: the message names
// the program, says how it ended and ends with the last ~2000 bytes of its stderr (or of
// its log file).
SubprocessResult run_subprocess_checked(const SubprocessSpec& spec);

}  // namespace gatedlm
