// RunProcess against real programs (sh, cat, sleep, head), with a clock that moves a fixed step
// each time it is read, so timeouts do not depend on the wall clock.
#include "adapters/io/subprocess.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include "adapters/io/test_scratch_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;

// Each Now() is `step` after the one before.
class SubprocessTestClock final : public Clock {
 public:
  explicit SubprocessTestClock(absl::Duration step) : step_(step) {}
  absl::Time Now() const override { return absl::UnixEpoch() + step_ * reads_++; }

 private:
  const absl::Duration step_;
  mutable std::atomic<int64_t> reads_{0};
};

ProcessSpec ProgramSpec(const std::string& program) {
  ProcessSpec spec;
  if (!program.empty()) spec.argv = {program};
  return spec;
}

ProcessSpec ShellSpec(const std::string& script) {
  ProcessSpec spec;
  spec.argv = {"sh", "-c", script, "script"};
  return spec;
}

TEST(RunProcess, OutputErrorsExitStatusAndEnvironment) {
  SubprocessTestClock clock(absl::Milliseconds(1));
  ProcessSpec spec = ShellSpec(
      "printf 'out %s|%s|%s' \"$1\" \"$TESSERA_TEST_ADDED\" \"$HOME\"; cat; echo oops >&2; exit 3");
  spec.argv.push_back("arg one");
  spec.env = {{"TESSERA_TEST_ADDED", "added"}, {"HOME", "/overridden"}};
  absl::StatusOr<ProcessResult> r = RunProcess(spec, clock);
  ASSERT_TRUE(r.ok()) << r.status();
  // stdin is /dev/null: cat ends at once, adding nothing.
  EXPECT_EQ(r->out, "out arg one|added|/overridden");
  EXPECT_EQ(r->err, "oops\n");
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_FALSE(r->Succeeded());
  EXPECT_EQ(r->Outcome(), "exit status 3");
  // This process's environment is passed on (PATH found sh above; a variable of ours shows).
  setenv("TESSERA_TEST_INHERITED", "yes", 1);
  r = RunProcess(ShellSpec("printf %s \"$TESSERA_TEST_INHERITED\""), clock);
  unsetenv("TESSERA_TEST_INHERITED");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, "yes");
  EXPECT_TRUE(r->Succeeded());
}

TEST(RunProcess, TheChildGetsDefaultSignalHandlingWhateverThisThreadBlocks) {
  // A thread that blocks SIGTERM (or a process that ignores it) would pass that on to the child,
  // which then could not be stopped; the child starts with the defaults.
  sigset_t term;
  sigset_t before;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, &before);
  SubprocessTestClock clock(absl::Milliseconds(1));
  absl::StatusOr<ProcessResult> r = RunProcess(ShellSpec("kill -TERM $$; sleep 5"), clock);
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->signal, SIGTERM);
  EXPECT_EQ(r->Outcome(), "killed by signal 15");
}

TEST(RunProcess, ProgramsThatCannotRun) {
  SubprocessTestClock clock(absl::Milliseconds(1));
  absl::Status missing = RunProcess(ProgramSpec("tessera-no-such-plugin"), clock).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "tessera-no-such-plugin: not found in PATH");
  EXPECT_EQ(RunProcess(ProgramSpec("/nonexistent/plugin"), clock).status().message(),
            "/nonexistent/plugin: not found");
  const testing::ScratchDir scratch("subprocess");
  const std::string& dir = scratch.path();
  std::ofstream(dir + "/not-executable") << "#!/bin/sh\necho hi\n";
  absl::Status denied = RunProcess(ProgramSpec(dir + "/not-executable"), clock).status();
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied) << denied;
  EXPECT_EQ(RunProcess(ProgramSpec(""), clock).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RunProcess, ATimeoutKillsTheWholeProcessGroup) {
  const testing::ScratchDir scratch("subprocess");
  const std::string pid_file = scratch.path() + "/grandchild.pid";
  // 100 ms a read: the 1 s timeout passes after about 10 reads, whatever the wall clock says.
  SubprocessTestClock clock(absl::Milliseconds(100));
  ProcessSpec spec = ShellSpec("sleep 60 & echo $! > '" + pid_file + "'; wait");
  spec.timeout = absl::Seconds(1);
  absl::Status late = RunProcess(spec, clock).status();
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << late;
  EXPECT_EQ(late.message(), "sh: no answer within 1s");
  // The grandchild (sleep 60) was killed with it: gone, dead (a zombie waiting for init), or
  // with SIGKILL pending (it is delivered when the process next runs: a moment after kill()).
  std::ifstream in(pid_file);
  int grandchild = 0;
  ASSERT_TRUE(in >> grandchild);
  std::ifstream status("/proc/" + std::to_string(grandchild) + "/status");
  std::string state;
  bool kill_pending = false;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("State:", 0) == 0) state = line;
    if (line.rfind("SigPnd:", 0) == 0 || line.rfind("ShdPnd:", 0) == 0) {
      kill_pending |= (std::stoull(line.substr(7), nullptr, 16) >> (SIGKILL - 1)) & 1;
    }
  }
  EXPECT_TRUE(state.empty() || state.find("zombie") != std::string::npos ||
              state.find("dead") != std::string::npos || kill_pending)
      << state;
}

TEST(RunProcess, OutputPastItsBoundStopsTheProgram) {
  SubprocessTestClock clock(absl::Milliseconds(1));
  ProcessSpec spec = ShellSpec("head -c 3000000 /dev/zero; sleep 60");
  spec.max_output_bytes = size_t{1} << 20;
  absl::Status big = RunProcess(spec, clock).status();
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted) << big;
  EXPECT_THAT(big.message(), HasSubstr("more than 1048576 bytes"));
}

}  // namespace
}  // namespace tessera::adapters
