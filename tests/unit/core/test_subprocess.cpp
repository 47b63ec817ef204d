// core/subprocess.h against real child processes: exit statuses, captured streams, stdin,
// a log file, a working directory, a missing program, a signal and a timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "core/subprocess.h"

namespace gatedlm {
namespace {

namespace fs = std::filesystem;

std::string error_of(const SubprocessSpec& spec, bool checked) {
  try {
    if (checked) run_subprocess_checked(spec);
    else run_subprocess(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Subprocess, TrueSucceedsAndFalseReportsItsStatus) {
  const SubprocessResult t = run_subprocess(SubprocessSpec({"true"}));
  EXPECT_TRUE(t.ok());
  EXPECT_EQ(t.exit_status, 0);
  EXPECT_EQ(t.program, "true");

  const SubprocessResult f = run_subprocess(SubprocessSpec({"false"}));
  EXPECT_FALSE(f.ok());
  EXPECT_EQ(f.exit_status, 1);
  EXPECT_EQ(f.signal, 0);
  EXPECT_EQ(f.describe(), "exited with status 1");
  EXPECT_EQ(f.shell_status(), 1);
}

TEST(Subprocess, CapturesStdoutAndStderrApartWithTheExitStatus) {
  const SubprocessResult r =
      run_subprocess(SubprocessSpec({"sh", "-c", "echo to-out; echo to-err >&2; exit 3"}));
  EXPECT_EQ(r.out, "to-out\n");
  EXPECT_EQ(r.err, "to-err\n");
  EXPECT_EQ(r.exit_status, 3);
}

TEST(Subprocess, FeedsStdinLargerThanAPipeBufferWhileReadingStdout) {
  std::string text;
  for (int i = 0; text.size() < (1u << 20); ++i) text += "line " + std::to_string(i) + "\n";
  SubprocessSpec spec({"cat"});
  spec.stdin_text = text;
  const SubprocessResult r = run_subprocess(spec);
  ASSERT_TRUE(r.ok()) << r.describe() << r.err;
  EXPECT_EQ(r.out, text);
}

TEST(Subprocess, AChildThatIgnoresItsStdinDoesNotEndThisProcess) {
  // `true` exits without reading: writing the rest would raise SIGPIPE, which must not kill us.
  SubprocessSpec spec({"true"});
  spec.stdin_text = std::string(1 << 20, 'x');
  const SubprocessResult r = run_subprocess(spec);
  EXPECT_TRUE(r.ok());
  const SubprocessResult n = run_subprocess(SubprocessSpec({"sh", "-c", "test -t 0 || cat"}));
  EXPECT_TRUE(n.ok());
  EXPECT_EQ(n.out, "");  // without stdin_text, stdin is /dev/null
}

TEST(Subprocess, LogFileTakesBothStreamsAndCwdIsTheChildsDirectory) {
  const fs::path dir = fs::path(::testing::TempDir()) / "subprocess_cwd";
  fs::create_directories(dir);
  const fs::path log = dir / "child.log";
  SubprocessSpec spec({"sh", "-c", "pwd; echo to-err >&2"});
  spec.cwd = dir.string();
  spec.log_path = log.string();
  const SubprocessResult r = run_subprocess(spec);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.out, "");
  std::ifstream in(log);
  const std::string logged((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(logged, fs::canonical(dir).string() + "\nto-err\n");
  fs::remove_all(dir);
}

TEST(Subprocess, ARelativeProgramPathIsThisProcesssNotTheChildsDirectory) {
  const fs::path dir = fs::path(::testing::TempDir()) / "subprocess_relative";
  fs::create_directories(dir / "elsewhere");
  {
    std::ofstream script(dir / "say.sh");
    script << "#!/bin/sh\necho said\n";
  }
  fs::permissions(dir / "say.sh", fs::perms::owner_all);
  const fs::path before = fs::current_path();
  fs::current_path(dir);
  SubprocessSpec spec({"./say.sh"});
  spec.cwd = "elsewhere";
  const SubprocessResult r = run_subprocess(spec);
  fs::current_path(before);
  EXPECT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.out, "said\n");
  fs::remove_all(dir);
}

TEST(Subprocess, AMissingProgramOrDirectoryIsAnErrorNamingIt) {
  const std::string missing = error_of(SubprocessSpec({"gatedlm-no-such-program-xyz"}), false);
  EXPECT_NE(missing.find("gatedlm-no-such-program-xyz"), std::string::npos) << missing;
  EXPECT_NE(missing.find("not found on PATH"), std::string::npos) << missing;
  EXPECT_EQ(find_program("gatedlm-no-such-program-xyz"), "");
  EXPECT_FALSE(find_program("sh").empty());

  const std::string by_path = error_of(SubprocessSpec({"/nonexistent/dir/prog"}), false);
  EXPECT_NE(by_path.find("/nonexistent/dir/prog"), std::string::npos) << by_path;

  SubprocessSpec in_missing_dir({"true"});
  in_missing_dir.cwd = "/nonexistent/cwd";
  const std::string bad_cwd = error_of(in_missing_dir, false);
  EXPECT_NE(bad_cwd.find("/nonexistent/cwd"), std::string::npos) << bad_cwd;
  EXPECT_NE(bad_cwd.find("true"), std::string::npos) << bad_cwd;

  EXPECT_NE(error_of(SubprocessSpec(), false), "");
}

TEST(Subprocess, CheckedRunThrowsWithTheProgramItsStatusAndItsStderr) {
  const std::string e = error_of(SubprocessSpec({"sh", "-c", "echo it-broke >&2; exit 5"}), true);
  EXPECT_NE(e.find("sh exited with status 5"), std::string::npos) << e;
  EXPECT_NE(e.find("it-broke"), std::string::npos) << e;
  EXPECT_EQ(error_of(SubprocessSpec({"true"}), true), "");
}

TEST(Subprocess, ASignalThatEndsTheChildIsReported) {
  const SubprocessResult r = run_subprocess(SubprocessSpec({"sh", "-c", "kill -9 $$"}));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.signal, 9);
  EXPECT_EQ(r.shell_status(), 137);
  EXPECT_NE(r.describe().find("signal 9"), std::string::npos);
}

TEST(Subprocess, TimeoutEndsTheChildEvenWhenAGrandchildHoldsItsPipes) {
  // The limit is 0.3 s; the children would run 60 s. Returning at all (well before that)
  // shows the timeout acted; the bound asserted is generous.
  const auto start = std::chrono::steady_clock::now();
  SubprocessSpec sleeper({"sleep", "60"});
  sleeper.timeout_s = 0.3;
  const SubprocessResult direct = run_subprocess(sleeper);
  EXPECT_TRUE(direct.timed_out);
  EXPECT_FALSE(direct.ok());
  EXPECT_EQ(direct.shell_status(), 124);
  EXPECT_EQ(direct.describe(0.3), "timed out after 0.3 s");

  // sh runs sleep as its child (the `; echo` keeps it from exec'ing), which keeps stdout open.
  SubprocessSpec shell_spec({"sh", "-c", "echo started; sleep 20; echo never"});
  shell_spec.timeout_s = 0.3;
  const SubprocessResult shell = run_subprocess(shell_spec);
  EXPECT_TRUE(shell.timed_out);
  EXPECT_EQ(shell.out, "started\n");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);

  const std::string e = error_of(sleeper, true);
  EXPECT_NE(e.find("sleep timed out after 0.3 s"), std::string::npos) << e;
}

}  // namespace
}  // namespace gatedlm
