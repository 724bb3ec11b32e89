#include "adapters/io/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace tessera::adapters {
namespace {

// Closes a descriptor when it goes out of scope.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Close(); }
  int get() const { return fd_; }
  int* out() { return &fd_; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

absl::Status SystemError(const std::string& program, const char* call, int err) {
  return absl::InternalError(absl::StrCat("running ", program, ": ", call, ": ", strerror(err)));
}

// This process's environment with `extra` over it, as posix_spawn wants it.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& extra) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = strchr(*e, '=');
    if (eq != nullptr) vars[std::string(*e, eq - *e)] = eq + 1;
  }
  for (const auto& [name, value] : extra) vars[name] = value;
  std::vector<std::string> out;
  out.reserve(vars.size());
  for (const auto& [name, value] : vars) out.push_back(absl::StrCat(name, "=", value));
  return out;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  p.reserve(strings.size() + 1);
  for (std::string& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

// Spawns the child with stdin from /dev/null and stdout/stderr into `out_w`/`err_w`.
absl::StatusOr<pid_t> Spawn(const ProcessSpec& spec, int out_w, int err_w) {
  const std::string& program = spec.argv[0];
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_w, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_w, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigset_t all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::vector<std::string> args = spec.argv;
  std::vector<std::string> env = ChildEnvironment(spec.env);
  std::vector<char*> argv = Pointers(args);
  std::vector<char*> envp = Pointers(env);
  pid_t pid = -1;
  // posix_spawnp looks a name without '/' up in this process's PATH.
  int err = posix_spawnp(&pid, program.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  switch (err) {
    case 0:
      return pid;
    case ENOENT:
      return absl::NotFoundError(absl::StrCat(
          program, ": not found", program.find('/') == std::string::npos ? " in PATH" : ""));
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(absl::StrCat(program, ": not allowed to run it"));
    default:
      return SystemError(program, "posix_spawn", err);
  }
}

// Reads what is there on `fd` into `into`; false at the end of the stream.
bool Drain(int fd, std::string* into) {
  char buf[8192];
  ssize_t n = read(fd, buf, sizeof(buf));
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return false;
  into->append(buf, static_cast<size_t>(n));
  return true;
}

}  // namespace

std::string ProcessResult::Outcome() const {
  return signal != 0 ? absl::StrCat("killed by signal ", signal)
                     : absl::StrCat("exit status ", exit_code);
}

absl::StatusOr<ProcessResult> RunProcess(const ProcessSpec& spec, const Clock& clock) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return absl::InvalidArgumentError("no program to run");
  }
  const std::string& program = spec.argv[0];
  Fd out_r;
  Fd out_w;
  Fd err_r;
  Fd err_w;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return SystemError(program, "pipe2", errno);
  *out_r.out() = p[0];
  *out_w.out() = p[1];
  if (pipe2(p, O_CLOEXEC) != 0) return SystemError(program, "pipe2", errno);
  *err_r.out() = p[0];
  *err_w.out() = p[1];
  absl::StatusOr<pid_t> pid = Spawn(spec, out_w.get(), err_w.get());
  if (!pid.ok()) return pid.status();
  out_w.Close();  // the child holds its copies; the streams end when it (and its children) exit
  err_w.Close();

  ProcessResult result;
  const absl::Time deadline = clock.Now() + spec.timeout;
  absl::Status stopped;  // why the group was killed, when it was
  bool out_open = true;
  bool err_open = true;
  while ((out_open || err_open) && stopped.ok()) {
    absl::Duration left = deadline - clock.Now();
    if (left <= absl::ZeroDuration()) {
      stopped = absl::DeadlineExceededError(
          absl::StrCat(program, ": no answer within ", absl::FormatDuration(spec.timeout)));
      break;
    }
    pollfd fds[2] = {{.fd = out_open ? out_r.get() : -1, .events = POLLIN, .revents = 0},
                     {.fd = err_open ? err_r.get() : -1, .events = POLLIN, .revents = 0}};
    // At most 100 ms at a time, so the deadline is kept by `clock` rather than by poll's own.
    int wait_ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 100));
    int ready = poll(fds, 2, wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      stopped = SystemError(program, "poll", errno);
      break;
    }
    if (out_open && fds[0].revents != 0) out_open = Drain(out_r.get(), &result.out);
    if (err_open && fds[1].revents != 0) err_open = Drain(err_r.get(), &result.err);
    if (result.out.size() > spec.max_output_bytes || result.err.size() > spec.max_output_bytes) {
      stopped = absl::ResourceExhaustedError(absl::StrCat(
          program, ": printed more than ", spec.max_output_bytes, " bytes on one stream"));
    }
  }
  if (!stopped.ok()) kill(-*pid, SIGKILL);
  int status = 0;
  while (waitpid(*pid, &status, 0) < 0) {
    if (errno != EINTR) return SystemError(program, "waitpid", errno);
  }
  if (!stopped.ok()) return stopped;
  if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  } else {
    result.exit_code = WEXITSTATUS(status);
  }
  return result;
}

}  // namespace tessera::adapters
