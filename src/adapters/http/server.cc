#include "adapters/http/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "adapters/net/http_client.h"

namespace tessera::adapters {
namespace {

constexpr size_t kMaxHeaderBytes = 64 << 10;

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 507:
      return "Insufficient Storage";
    default:
      return "Status";
  }
}

void WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t w = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    off += static_cast<size_t>(w);
  }
}

std::string Render(const HttpReply& r) {
  return absl::StrCat("HTTP/1.1 ", r.status, " ", Reason(r.status),
                      "\r\nContent-Type: ", r.content_type, "\r\nContent-Length: ", r.body.size(),
                      "\r\nConnection: close\r\n\r\n", r.body);
}

}  // namespace

absl::StatusOr<bool> ParseHttpRequest(const std::string& bytes, HttpCall* call, size_t max_body) {
  size_t end = bytes.find("\r\n\r\n");
  if (end == std::string::npos) {
    if (bytes.size() > kMaxHeaderBytes) return absl::OutOfRangeError("request header too large");
    return false;
  }
  if (end > kMaxHeaderBytes) return absl::OutOfRangeError("request header too large");
  std::vector<absl::string_view> lines =
      absl::StrSplit(absl::string_view(bytes).substr(0, end), "\r\n");
  std::vector<absl::string_view> first = absl::StrSplit(lines[0], ' ');
  if (first.size() != 3 || first[0].empty() || first[1].empty() || first[1][0] != '/' ||
      !absl::StartsWith(first[2], "HTTP/1.")) {
    return absl::InvalidArgumentError("malformed request line");
  }
  *call = HttpCall();
  call->method = std::string(first[0]);
  for (char c : call->method) {
    if (!absl::ascii_isupper(c)) return absl::InvalidArgumentError("malformed method");
  }
  absl::string_view target = first[1];
  size_t q = target.find('?');
  auto path = UrlUnescape(target.substr(0, q));
  if (!path.ok()) return path.status();
  call->path = *path;
  if (q != absl::string_view::npos) {
    for (absl::string_view kv : absl::StrSplit(target.substr(q + 1), '&', absl::SkipEmpty())) {
      size_t eq = kv.find('=');
      auto k = UrlUnescape(kv.substr(0, eq), true);
      auto v = UrlUnescape(eq == absl::string_view::npos ? "" : kv.substr(eq + 1), true);
      if (!k.ok()) return k.status();
      if (!v.ok()) return v.status();
      call->query[*k] = *v;
    }
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos || colon == 0) {
      return absl::InvalidArgumentError("malformed header line");
    }
    call->headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  if (call->headers.contains("transfer-encoding")) {
    return absl::FailedPreconditionError("chunked request bodies are not accepted");
  }
  size_t length = 0;
  if (auto it = call->headers.find("content-length"); it != call->headers.end()) {
    if (!absl::SimpleAtoi(it->second, &length)) {
      return absl::InvalidArgumentError("bad Content-Length");
    }
    if (length > max_body) return absl::OutOfRangeError("request body too large");
  }
  if (bytes.size() - (end + 4) < length) return false;
  call->body = bytes.substr(end + 4, length);
  return true;
}

HttpServer::HttpServer(Handler handler, int max_connections)
    : handler_(std::move(handler)), max_connections_(max_connections) {}

HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Listen(const std::string& address) {
  int fd = -1;
  if (absl::StartsWith(address, "unix://")) {
    std::string path = address.substr(7);
    sockaddr_un sa{};
    if (path.empty() || path[0] != '/' || path.size() >= sizeof(sa.sun_path)) {
      return absl::InvalidArgumentError(absl::StrCat("listen ", address,
                                                     ": expected unix:///ABSOLUTE/PATH under ",
                                                     sizeof(sa.sun_path), " bytes"));
    }
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    unlink(path.c_str());  // a stale socket from an earlier run
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
      std::string err = std::strerror(errno);
      if (fd >= 0) close(fd);
      return absl::UnavailableError(absl::StrCat("listen ", address, ": ", err));
    }
    chmod(path.c_str(), 0660);
    socket_files_.push_back(path);
  } else {
    size_t colon = address.rfind(':');
    int port = 0;
    if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
        port < 0 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("listen ", address, ": expected HOST:PORT or unix:///PATH"));
    }
    std::string host = address.substr(0, colon);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    if (host.empty() || host == "0.0.0.0") {
      sa.sin_addr.s_addr = htonl(INADDR_ANY);
    } else if (inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &sa.sin_addr) !=
               1) {
      return absl::InvalidArgumentError(
          absl::StrCat("listen ", address, ": expected an IPv4 address"));
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
      std::string err = std::strerror(errno);
      if (fd >= 0) close(fd);
      return absl::UnavailableError(absl::StrCat("listen ", address, ": ", err));
    }
    socklen_t len = sizeof(sa);
    getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
  }
  if (listen(fd, 512) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("listen ", address, ": ", std::strerror(errno)));
  }
  listen_fds_.push_back(fd);
  acceptors_.emplace_back([this, fd] { AcceptLoop(fd); });
  return absl::OkStatus();
}

void HttpServer::AcceptLoop(int fd) {
  while (!stopping_) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    int c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    std::unique_lock<std::mutex> lock(mu_);
    if (active_ >= max_connections_) {
      lock.unlock();
      WriteAll(c, Render({503, "text/plain", "too many connections\n"}));
      close(c);
      continue;
    }
    ++active_;
    lock.unlock();
    std::thread([this, c] {
      Serve(c);
      std::lock_guard<std::mutex> l(mu_);
      if (--active_ == 0) idle_.notify_all();
    }).detach();
  }
}

void HttpServer::Serve(int fd) {
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string buf;
  HttpCall call;
  bool sent_continue = false;
  char tmp[16384];
  for (;;) {
    absl::StatusOr<bool> done = ParseHttpRequest(buf, &call);
    if (!done.ok()) {
      int status = done.status().code() == absl::StatusCode::kOutOfRange           ? 413
                   : done.status().code() == absl::StatusCode::kFailedPrecondition ? 411
                                                                                   : 400;
      WriteAll(fd, Render({status, "application/json",
                           absl::StrCat("{\"error\": \"", done.status().message(), "\"}\n")}));
      close(fd);
      return;
    }
    if (*done) break;
    // Clients such as curl hold a larger body back until told to send it.
    if (size_t end = buf.find("\r\n\r\n");
        !sent_continue && end != std::string::npos &&
        absl::StrContains(absl::AsciiStrToLower(absl::string_view(buf).substr(0, end)),
                          "\r\nexpect: 100-continue")) {
      WriteAll(fd, "HTTP/1.1 100 Continue\r\n\r\n");
      sent_continue = true;
    }
    ssize_t r = recv(fd, tmp, sizeof(tmp), 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      close(fd);
      return;
    }
    buf.append(tmp, static_cast<size_t>(r));
  }
  HttpReply reply;
  try {
    reply = handler_(call);
  } catch (const std::exception& e) {
    reply = {500, "application/json", absl::StrCat("{\"error\": \"internal error\"}\n")};
  }
  if (call.method == "HEAD") reply.body.clear();
  WriteAll(fd, Render(reply));
  shutdown(fd, SHUT_WR);
  close(fd);
}

void HttpServer::Stop() {
  if (stopping_.exchange(true)) return;
  for (std::thread& t : acceptors_) t.join();
  for (int fd : listen_fds_) close(fd);
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return active_ == 0; });
  for (const std::string& p : socket_files_) unlink(p.c_str());
}

}  // namespace tessera::adapters
