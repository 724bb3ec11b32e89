#include "adapters/io/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/memory.h"

namespace tessera::adapters {
namespace fs = std::filesystem;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  if (fs::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, expected a file"));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  // Sized once from the file's length, where it has one (a FIFO, /dev/stdin or a file still
  // growing is read to its end all the same): a trace of hundreds of MB is copied once, not
  // through a stream's doubling buffer and then out of it.
  std::string out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    out.reserve(static_cast<size_t>(st.st_size));
    AdviseHugePages(out.data(), out.capacity());  // faults once per 2 MiB
  }
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat(path, ": read error: ", std::strerror(err)));
    }
  }
  ::close(fd);
  return out;
}

absl::string_view WithoutUtf8Bom(absl::string_view text) {
  absl::ConsumePrefix(&text, "\xEF\xBB\xBF");
  return text;
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return std::string(absl::StripAsciiWhitespace(*text));
}

void OutputDir::Add(std::string relative_path, std::string content, bool executable) {
  files_[std::move(relative_path)] = File{std::move(content), executable};
}

namespace {

absl::Status WriteDurably(const fs::path& path, const std::string& content, bool executable) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, executable ? 0755 : 0644);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat(path.string(), ": cannot create: ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      int err = errno;
      ::close(fd);
      return absl::InternalError(
          absl::StrCat(path.string(), ": write failed: ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    return absl::InternalError(
        absl::StrCat(path.string(), ": flush failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// The temporary sibling WriteFileAtomically writes first, and CheckWritable probes.
fs::path TempSibling(const fs::path& path) {
  fs::path tmp = path;
  tmp += ".tmp";
  return tmp;
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path_in, const std::string& content) {
  fs::path path(path_in);
  const fs::path tmp = TempSibling(path);
  if (absl::Status s = WriteDurably(tmp, content, false); !s.ok()) {
    return s;
  }
  std::error_code ec;
  // A file replaced keeps its permission bits (a config kept private stays private).
  if (const fs::file_status was = fs::status(path, ec); !ec && fs::is_regular_file(was)) {
    fs::permissions(tmp, was.permissions(), fs::perm_options::replace, ec);
    if (ec) {
      fs::remove(tmp, ec);
      return absl::InternalError(
          absl::StrCat(path_in, ": cannot keep its permissions: ", ec.message()));
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return absl::InternalError(absl::StrCat(path_in, ": cannot write: ", ec.message()));
  }
  return absl::OkStatus();
}

absl::Status CheckWritable(const std::string& path_in) {
  if (path_in.empty()) {
    return absl::InvalidArgumentError("output path is empty");
  }
  fs::path path(path_in);
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(path_in, ": is a directory, expected a file"));
  }
  fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (!fs::exists(dir, ec)) {
    return absl::NotFoundError(absl::StrCat(path_in, ": no such directory ", dir.string()));
  }
  if (!fs::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_in, ": ", dir.string(), " is not a directory"));
  }
  const fs::path tmp = TempSibling(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  const bool created = fd >= 0;
  if (!created && errno == EEXIST) {
    fd = ::open(tmp.c_str(), O_WRONLY | O_CLOEXEC);
  }
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat(tmp.string(), ": cannot create: ", std::strerror(errno)));
  }
  ::close(fd);
  if (created) {
    ::unlink(tmp.c_str());
  }
  return absl::OkStatus();
}

absl::Status OutputDir::Commit(const std::string& dir_in) const {
  fs::path dir = fs::path(dir_in).lexically_normal();
  if (dir.filename().empty()) {
    dir = dir.parent_path();
  }
  for (const auto& [rel, file] : files_) {
    fs::path p(rel);
    if (p.is_absolute() || absl::StrContains(rel, "..") || rel.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("refusing output path \"", rel, "\""));
    }
  }
  std::error_code ec;
  fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  fs::create_directories(parent, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat(parent.string(), ": cannot create: ", ec.message()));
  }
  std::string tmpl = (parent / (dir.filename().string() + ".tmp-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrCat(tmpl, ": cannot create: ", std::strerror(errno)));
  }
  fs::path tmp(tmpl);
  auto cleanup = [&](absl::Status s) {
    std::error_code ignore;
    fs::remove_all(tmp, ignore);
    return s;
  };
  ::chmod(tmp.c_str(), 0755);
  for (const auto& [rel, file] : files_) {
    fs::path target = tmp / rel;
    fs::create_directories(target.parent_path(), ec);
    if (ec) {
      return cleanup(absl::InternalError(
          absl::StrCat(target.parent_path().string(), ": cannot create: ", ec.message())));
    }
    if (absl::Status s = WriteDurably(target, file.content, file.executable); !s.ok()) {
      return cleanup(s);
    }
  }
  // Swap into place: move an existing directory aside, rename the new one, drop the old.
  fs::path old;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) {
      return cleanup(absl::FailedPreconditionError(
          absl::StrCat(dir.string(), ": exists and is not a directory")));
    }
    old = parent / (dir.filename().string() + ".old-" +
                    tmp.filename().string().substr(tmp.filename().string().size() - 6));
    fs::rename(dir, old, ec);
    if (ec) {
      return cleanup(
          absl::InternalError(absl::StrCat(dir.string(), ": cannot replace: ", ec.message())));
    }
  }
  fs::rename(tmp, dir, ec);
  if (ec) {
    std::error_code ignore;
    if (!old.empty()) {
      fs::rename(old, dir, ignore);
    }
    return cleanup(
        absl::InternalError(absl::StrCat(dir.string(), ": cannot create: ", ec.message())));
  }
  if (!old.empty()) {
    fs::remove_all(old, ec);
  }
  return absl::OkStatus();
}

}  // namespace tessera::adapters
