#include "core/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/error.h"

namespace gatedlm {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kKillGraceSeconds = 2.0;  // SIGTERM, then SIGKILL this long after
constexpr size_t kErrorTailBytes = 2000;

// A file descriptor closed when it goes out of scope.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd&& other) noexcept : fd(other.fd) { other.fd = -1; }
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd = other.fd;
      other.fd = -1;
    }
    return *this;
  }
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

struct Pipe {
  Fd read, write;
};

Pipe make_pipe(const std::string& program) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) fail(program, ": cannot start (pipe: ", std::strerror(errno), ")");
  Pipe p;
  p.read.fd = fds[0];
  p.write.fd = fds[1];
  return p;
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// Writing the stdin of a child that has already exited raises SIGPIPE, which would end
// this process: block it in this thread while the child runs (writes then fail with
// EPIPE), and swallow one that became pending before restoring the mask.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeBlock() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec zero{0, 0};
      ::sigtimedwait(&pipe_, nullptr, &zero);
    }
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  const sigset_t& old_mask() const { return old_; }

 private:
  sigset_t pipe_{}, old_{};
  bool was_pending_ = false;
};

// What the child reports through the exec pipe when it cannot become the program.
struct ChildFailure {
  int stage = 0;  // 1: chdir, 2: exec
  int error = 0;  // errno
};

// The child's side between fork and exec: only async-signal-safe calls.
[[noreturn]] void become_program(const char* path, char* const* argv, int in, int out, int err, const char* cwd,
                                 int report, const sigset_t& mask) {
  ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  ::dup2(in, 0);
  ::dup2(out, 1);
  ::dup2(err, 2);
  ChildFailure failure;
  if (cwd && ::chdir(cwd) != 0) {
    failure = {1, errno};
  } else {
    ::execv(path, argv);
    failure = {2, errno};
  }
  [[maybe_unused]] const ssize_t n = ::write(report, &failure, sizeof failure);
  ::_exit(127);
}

// The child's three standard streams as the parent prepares them.
struct ChildStreams {
  Pipe in, out, err;
  Fd devnull, log;
  int child_in() const { return in.read.fd >= 0 ? in.read.fd : devnull.fd; }
  int child_out() const { return log.fd >= 0 ? log.fd : out.write.fd; }
  int child_err() const { return log.fd >= 0 ? log.fd : err.write.fd; }
};

ChildStreams prepare_streams(const SubprocessSpec& spec) {
  const std::string& program = spec.argv[0];
  ChildStreams s;
  if (spec.stdin_text) {
    s.in = make_pipe(program);
  } else {
    s.devnull.fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (s.devnull.fd < 0) fail(program, ": cannot start (/dev/null: ", std::strerror(errno), ")");
  }
  if (!spec.log_path.empty()) {
    s.log.fd = ::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (s.log.fd < 0) fail(program, ": cannot open its log file ", spec.log_path, " (", std::strerror(errno), ")");
  } else {
    s.out = make_pipe(program);
    s.err = make_pipe(program);
  }
  return s;
}

// Reads what is there on fd into `into`; false at end of file (or an error).
bool drain(int fd, std::string& into) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, static_cast<size_t>(n));
      if (static_cast<size_t>(n) < sizeof buf) return true;
    } else if (n == 0) {
      return false;
    } else {
      return errno == EINTR || errno == EAGAIN;
    }
  }
}

// The parent's side of a started child: feeds stdin, collects stdout and stderr, enforces
// the timeout and reaps it.
class ChildWatch {
 public:
  ChildWatch(pid_t pid, ChildStreams& streams, const SubprocessSpec& spec, SubprocessResult& result)
      : pid_(pid), streams_(streams), spec_(spec), result_(result), start_(Clock::now()) {
    if (spec.stdin_text) stdin_left_ = *spec.stdin_text;
    streams_.in.read.reset();
    streams_.out.write.reset();
    streams_.err.write.reset();
    streams_.log.reset();
    for (const Fd* fd : {&streams_.in.write, &streams_.out.read, &streams_.err.read})
      if (fd->fd >= 0) ::fcntl(fd->fd, F_SETFL, ::fcntl(fd->fd, F_GETFL) | O_NONBLOCK);
    if (stdin_left_.empty()) streams_.in.write.reset();
  }

  void run() {
    while (!reaped_) {
      if (streams_open()) pump(poll_wait_ms());
      else wait_for_exit(poll_wait_ms());
      enforce_timeout();
    }
    // Reaped while a pipe is open only after a timeout: keep what is already there.
    if (streams_.out.read.fd >= 0) drain(streams_.out.read.fd, result_.out);
    if (streams_.err.read.fd >= 0) drain(streams_.err.read.fd, result_.err);
  }

 private:
  bool streams_open() const {
    return streams_.in.write.fd >= 0 || streams_.out.read.fd >= 0 || streams_.err.read.fd >= 0;
  }

  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  // How long to block: until the timeout, -1 for none. A child already signalled is
  // checked every 20 ms: it is reaped as soon as it ends, though a grandchild it started
  // may still hold its pipes open.
  int poll_wait_ms() const {
    if (spec_.timeout_s <= 0) return -1;
    if (result_.timed_out) return 20;
    const double left = spec_.timeout_s - elapsed();
    return left <= 0 ? 0 : static_cast<int>(left * 1000) + 1;
  }

  void pump(int wait_ms) {
    pollfd fds[3];
    int n = 0;
    if (streams_.in.write.fd >= 0) fds[n++] = {streams_.in.write.fd, POLLOUT, 0};
    if (streams_.out.read.fd >= 0) fds[n++] = {streams_.out.read.fd, POLLIN, 0};
    if (streams_.err.read.fd >= 0) fds[n++] = {streams_.err.read.fd, POLLIN, 0};
    if (::poll(fds, static_cast<nfds_t>(n), wait_ms) <= 0) {
      if (result_.timed_out) wait_for_exit(0);
      return;
    }
    for (int k = 0; k < n; ++k) {
      if (fds[k].revents == 0) continue;
      if (fds[k].fd == streams_.in.write.fd) feed_stdin();
      else if (fds[k].fd == streams_.out.read.fd && !drain(fds[k].fd, result_.out)) streams_.out.read.reset();
      else if (fds[k].fd == streams_.err.read.fd && !drain(fds[k].fd, result_.err)) streams_.err.read.reset();
    }
    if (result_.timed_out) wait_for_exit(0);
  }

  void feed_stdin() {
    const ssize_t n = ::write(streams_.in.write.fd, stdin_left_.data(), stdin_left_.size());
    if (n > 0) stdin_left_.erase(0, static_cast<size_t>(n));
    if ((n < 0 && errno != EINTR && errno != EAGAIN) || stdin_left_.empty()) streams_.in.write.reset();
  }

  // Reaps the child if it has ended, waiting up to wait_ms (-1: until it does).
  void wait_for_exit(int wait_ms) {
    const auto until = Clock::now() + std::chrono::milliseconds(wait_ms < 0 ? 0 : wait_ms);
    for (;;) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, wait_ms < 0 ? 0 : WNOHANG);
      if (r == pid_) {
        record(status);
        return;
      }
      if (r < 0 && errno != EINTR) fail(result_.program, ": waiting for it failed (", std::strerror(errno), ")");
      if (wait_ms >= 0 && Clock::now() >= until) return;
      if (wait_ms >= 0) ::poll(nullptr, 0, 5);
    }
  }

  void record(int status) {
    reaped_ = true;
    if (WIFEXITED(status)) result_.exit_status = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) result_.signal = WTERMSIG(status);
  }

  void enforce_timeout() {
    if (reaped_ || spec_.timeout_s <= 0) return;
    const double t = elapsed();
    if (!result_.timed_out && t >= spec_.timeout_s) {
      result_.timed_out = true;
      ::kill(pid_, SIGTERM);
    } else if (result_.timed_out && !killed_ && t >= spec_.timeout_s + kKillGraceSeconds) {
      killed_ = true;
      ::kill(pid_, SIGKILL);
    }
  }

  pid_t pid_;
  ChildStreams& streams_;
  const SubprocessSpec& spec_;
  SubprocessResult& result_;
  Clock::time_point start_;
  std::string stdin_left_;
  bool reaped_ = false, killed_ = false;
};

std::string tail_of(std::string s) {
  if (s.size() > kErrorTailBytes) s = "..." + s.substr(s.size() - kErrorTailBytes);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::string SubprocessResult::describe(double timeout_s) const {
  if (timed_out)
    return timeout_s > 0 ? cat("timed out after ", timeout_s, " s") : std::string("timed out");
  if (signal != 0) return cat("was killed by signal ", signal, " (", strsignal(signal), ")");
  return cat("exited with status ", exit_status);
}

int SubprocessResult::shell_status() const {
  if (timed_out) return 124;
  if (signal != 0) return 128 + signal;
  return exit_status;
}

std::string find_program(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return is_executable_file(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
  }
  return "";
}

SubprocessResult run_subprocess(const SubprocessSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) fail("run_subprocess: no program given");
  const std::string& program = spec.argv[0];
  std::string path = find_program(program);
  if (path.empty())
    fail(program, ": ", program.find('/') != std::string::npos ? "no such executable file" : "not found on PATH");
  path = std::filesystem::absolute(path).string();  // a relative path would be resolved in spec.cwd
  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  ChildStreams streams = prepare_streams(spec);
  Pipe report = make_pipe(program);
  SigpipeBlock sigpipe;
  const pid_t pid = ::fork();
  if (pid < 0) fail(program, ": cannot start (fork: ", std::strerror(errno), ")");
  if (pid == 0)
    become_program(path.c_str(), argv.data(), streams.child_in(), streams.child_out(), streams.child_err(),
                   spec.cwd.empty() ? nullptr : spec.cwd.c_str(), report.write.fd, sigpipe.old_mask());
  report.write.reset();
  ChildFailure failure;
  ssize_t got;
  while ((got = ::read(report.read.fd, &failure, sizeof failure)) < 0 && errno == EINTR) {
  }
  if (got == static_cast<ssize_t>(sizeof failure)) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (failure.stage == 1)
      fail(program, ": cannot start in directory ", spec.cwd, " (", std::strerror(failure.error), ")");
    fail(program, ": cannot run ", path, " (", std::strerror(failure.error), ")");
  }
  SubprocessResult result;
  result.program = program;
  ChildWatch(pid, streams, spec, result).run();
  return result;
}

SubprocessResult run_subprocess_checked(const SubprocessSpec& spec) {
  SubprocessResult r = run_subprocess(spec);
  if (r.ok()) return r;
  std::string said = r.err;
  if (!spec.log_path.empty()) {
    std::ifstream log(spec.log_path, std::ios::binary);
    said.assign(std::istreambuf_iterator<char>(log), std::istreambuf_iterator<char>());
  }
  said = tail_of(said);
  fail(r.program, " ", r.describe(spec.timeout_s), said.empty() ? "" : (spec.log_path.empty() ? ":\n" : cat(" (log ", spec.log_path, "):\n")), said);
}

}  // namespace gatedlm
