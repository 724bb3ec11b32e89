// Runs a helper program and collects what it prints: for the credential plugins a kubeconfig
// names (`aws eks get-token`, `gke-gcloud-auth-plugin`, `kubelogin`), which the scheduler
// extender runs to get its Kubernetes API credentials.
//
// The child gets no terminal: stdin is /dev/null, stdout and stderr are captured (each up to a
// bound), its signal mask and dispositions are reset to the defaults (a child inherits the
// calling thread's blocked signals and the signals this process ignores, such as the SIGPIPE
// that network libraries ignore), and it runs in a process group of its own,
// so that a timeout kills whatever it started too. Its environment is this process's plus
// `env`, which overrides variables of the same name.
//
// Example:
//   ProcessSpec spec{.argv = {"aws", "eks", "get-token", "--cluster-name", "prod"}};
//   absl::StatusOr<ProcessResult> r = RunProcess(spec, clock);
//   if (r.ok() && r->Succeeded()) Parse(r->out);
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace tessera::adapters {

struct ProcessSpec {
  // argv[0] is the program: a path when it holds a '/', else looked up in PATH.
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;  // added to this process's environment
  absl::Duration timeout = absl::Seconds(30);
  size_t max_output_bytes = size_t{1} << 20;  // for stdout and for stderr, each
};

struct ProcessResult {
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  std::string out;
  std::string err;
  bool Succeeded() const { return signal == 0 && exit_code == 0; }
  // "exit status 3" or "killed by signal 9".
  std::string Outcome() const;
};

// Runs `spec` to its end. Errors (the program itself never ran to an end): NotFound when the
// program does not exist (or is not in PATH), PermissionDenied when it may not be run,
// DeadlineExceeded after `timeout` as measured on `clock` (the process group is killed),
// ResourceExhausted when it prints more than `max_output_bytes` on either stream (likewise),
// Internal for a failing system call. The messages name the program, never what it printed.
absl::StatusOr<ProcessResult> RunProcess(const ProcessSpec& spec, const Clock& clock);

}  // namespace tessera::adapters
