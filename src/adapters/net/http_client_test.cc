#include "adapters/net/http_client.h"

#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "adapters/net/test_certs.h"
#include "adapters/net/test_http_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;

// TlsOptions::server_name: a server reached at 127.0.0.1 whose certificate names only
// kube-apiserver.test is verified for that name, while the connection and the Host header stay
// with the URL's host; without it, the certificate does not match the address.
TEST(Fetch, VerifiesTheServerForTheTlsServerName) {
  testing::TestCerts pki("DNS:kube-apiserver.test");
  ASSERT_TRUE(pki.ok()) << pki.error();
  std::mutex mu;
  std::string host;
  testing::LocalHttpsServer https(
      [&](httplib::SSLServer& s) {
        s.Get("/api", [&](const httplib::Request& req, httplib::Response& res) {
          std::lock_guard<std::mutex> l(mu);
          host = req.get_header_value("Host");
          res.set_content("{}", "application/json");
        });
      },
      pki.server_cert().c_str(), pki.server_key().c_str());
  const std::string url = absl::StrCat("https://127.0.0.1:", https.port(), "/api");
  HttpRequest req;
  req.url = url;
  req.tls.ca_file = pki.ca();
  absl::StatusOr<HttpResponse> by_address = Fetch(req);
  EXPECT_EQ(by_address.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(by_address.status().message(), HasSubstr(url));

  req.tls.server_name = "kube-apiserver.test";
  absl::StatusOr<HttpResponse> by_name = Fetch(req);
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->status, 200);
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(host, absl::StrCat("127.0.0.1:", https.port()));
  }
  // Another name the certificate does not hold fails as the address did.
  req.tls.server_name = "other.test";
  EXPECT_EQ(Fetch(req).status().code(), absl::StatusCode::kUnavailable);
  // A name that is no host is refused before anything is sent.
  req.tls.server_name = "a b";
  EXPECT_EQ(Fetch(req).status().code(), absl::StatusCode::kInvalidArgument);
}

// A TCP socket listening at a free port of 127.0.0.1, closed on destruction.
class LoopbackListener {
 public:
  LoopbackListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(listen(fd_, 4), 0);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
  }
  ~LoopbackListener() { close(fd_); }
  LoopbackListener(const LoopbackListener&) = delete;
  LoopbackListener& operator=(const LoopbackListener&) = delete;

  int port() const { return port_; }
  // The next connection, within 5 s; -1 when none comes.
  int Accept() const {
    pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, 5000) != 1) return -1;
    return accept(fd_, nullptr, nullptr);
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Appends what `read_some` reads (bytes into the buffer, <= 0 at the end) to `*head` until it
// holds a whole HTTP request head.
void ReadHead(const std::function<int(char*, int)>& read_some, std::string* head) {
  char buf[4096];
  while (head->find("\r\n\r\n") == std::string::npos) {
    int n = read_some(buf, sizeof(buf));
    if (n <= 0) return;
    head->append(buf, n);
  }
}

// Reads from plain socket `fd` for ReadHead.
std::function<int(char*, int)> FromSocket(int fd) {
  return [fd](char* buf, int size) { return static_cast<int>(read(fd, buf, size)); };
}

// Through a proxy, the tunnel (CONNECT) goes to the URL's host, not to the TLS server name,
// which need not resolve anywhere (client-go dials the server's address the same way). This
// proxy records the request and refuses it.
TEST(Fetch, TunnelsToTheUrlsHostWhenGivenATlsServerName) {
  LoopbackListener listener;
  std::string request;
  std::thread proxy([&] {
    int c = listener.Accept();
    if (c < 0) return;
    ReadHead(FromSocket(c), &request);
    const std::string refusal = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n";
    EXPECT_EQ(write(c, refusal.data(), refusal.size()), static_cast<ssize_t>(refusal.size()));
    close(c);
  });
  HttpRequest req;
  req.url = "https://127.0.0.1:6443/api";
  req.proxy = absl::StrCat("http://127.0.0.1:", listener.port());
  req.tls.server_name = "kubernetes.default.svc";
  req.timeout_ms = 5000;
  EXPECT_FALSE(Fetch(req).ok());
  proxy.join();
  EXPECT_THAT(request, ::testing::StartsWith("CONNECT 127.0.0.1:6443 HTTP/1.1\r\n"));
}

// Reads exactly n bytes from fd into *out; false at the end of the stream or on an error.
bool ReadExactly(int fd, size_t n, std::string* out) {
  char buf[512];
  while (n > 0) {
    ssize_t got = read(fd, buf, std::min(n, sizeof(buf)));
    if (got <= 0) return false;
    out->append(buf, got);
    n -= got;
  }
  return true;
}

// A socks5:// proxy (a kubeconfig's proxy-url, often `ssh -D` to a bastion) is given the
// server's name, not an address resolved here, as client-go's dialer does: the name may resolve
// only behind the bastion (kube.invalid resolves nowhere). This SOCKS5 server (RFC 1928, no
// authentication) records the CONNECT request and then answers the tunnelled HTTP request
// itself.
TEST(Fetch, GivesASocks5ProxyTheServersNameToResolve) {
  LoopbackListener listener;
  std::string greeting, connect, http;
  std::thread proxy([&] {
    int c = listener.Accept();
    if (c < 0) return;
    auto send = [&](const std::string& bytes) {
      EXPECT_EQ(write(c, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    };
    // VER NMETHODS METHODS...; then VER CMD RSV ATYP ADDR PORT, ADDR a name (ATYP 3: its
    // length, then the name) or an IPv4 address (ATYP 1: four bytes).
    if (!ReadExactly(c, 2, &greeting) ||
        !ReadExactly(c, static_cast<unsigned char>(greeting[1]), &greeting)) {
      close(c);
      return;
    }
    send(std::string("\x05\x00", 2));
    if (ReadExactly(c, 4, &connect)) {
      const int type = static_cast<unsigned char>(connect[3]);
      std::string length;
      if (type == 3 && ReadExactly(c, 1, &length)) connect += length;
      const size_t address = type == 3 ? static_cast<unsigned char>(length[0]) : 4;
      if (ReadExactly(c, address + 2, &connect)) {
        send(std::string("\x05\x00\x00\x01\x7f\x00\x00\x01\x19\x2b", 10));
        ReadHead(FromSocket(c), &http);
        send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
      }
    }
    close(c);
  });
  HttpRequest req;
  req.url = "http://kube.invalid:6443/api";
  req.proxy = absl::StrCat("socks5://127.0.0.1:", listener.port());
  req.timeout_ms = 5000;
  absl::StatusOr<HttpResponse> r = Fetch(req);
  proxy.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "{}");
  ASSERT_GE(greeting.size(), 3u);
  EXPECT_EQ(greeting[0], 5);
  // CONNECT to the name kube.invalid (12 bytes), port 6443.
  EXPECT_EQ(connect,
            std::string("\x05\x01\x00\x03\x0c", 5) + "kube.invalid" + std::string("\x19\x2b", 2));
  EXPECT_THAT(http, ::testing::StartsWith("GET /api HTTP/1.1\r\n"));
  EXPECT_THAT(http, HasSubstr("Host: kube.invalid:6443\r\n"));
}

// A one-connection-at-a-time https:// forward proxy on 127.0.0.1 (its certificate from `pki`):
// Serve() accepts one connection, completes the TLS handshake, records the request head
// (CONNECT ...) and refuses it with 502. Nothing is recorded when the client gives up on the
// handshake.
class TlsConnectProxy {
 public:
  explicit TlsConnectProxy(const testing::TestCerts& pki)
      : ctx_(SSL_CTX_new(TLS_server_method()), SSL_CTX_free) {
    EXPECT_EQ(SSL_CTX_use_certificate_chain_file(ctx_.get(), pki.server_cert().c_str()), 1);
    EXPECT_EQ(SSL_CTX_use_PrivateKey_file(ctx_.get(), pki.server_key().c_str(), SSL_FILETYPE_PEM),
              1);
  }

  std::string url() const { return absl::StrCat("https://127.0.0.1:", listener_.port()); }

  // The request head of the next connection; "" when its handshake fails.
  std::string Serve() {
    int c = listener_.Accept();
    if (c < 0) return "";
    std::unique_ptr<SSL, void (*)(SSL*)> ssl(SSL_new(ctx_.get()), SSL_free);
    SSL_set_fd(ssl.get(), c);
    std::string request;
    if (SSL_accept(ssl.get()) == 1) {
      ReadHead([&](char* buf, int size) { return SSL_read(ssl.get(), buf, size); }, &request);
      const std::string refusal = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n";
      SSL_write(ssl.get(), refusal.data(), static_cast<int>(refusal.size()));
      SSL_shutdown(ssl.get());
    }
    close(c);
    return request;
  }

 private:
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx_;
  LoopbackListener listener_;
};

// An https:// proxy is verified as client-go verifies it: with the cluster's TLS settings (the
// kubeconfig's CA, or none with insecure-skip-tls-verify), not with the system's CAs, which do
// not hold a private CA.
TEST(Fetch, VerifiesAnHttpsProxyWithTheClustersTlsSettings) {
  testing::TestCerts pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  TlsConnectProxy proxy(pki);
  auto through = [&](const TlsOptions& tls) {
    std::string request;
    std::thread serve([&] { request = proxy.Serve(); });
    HttpRequest req;
    req.url = "https://127.0.0.1:6443/api";
    req.proxy = proxy.url();
    req.tls = tls;
    req.timeout_ms = 5000;
    EXPECT_FALSE(Fetch(req).ok());  // the proxy refuses every tunnel
    serve.join();
    return request;
  };
  TlsOptions cluster;
  cluster.ca_file = pki.ca();
  EXPECT_THAT(through(cluster), ::testing::StartsWith("CONNECT 127.0.0.1:6443 HTTP/1.1\r\n"));
  TlsOptions other;
  other.ca_file = pki.other_ca();
  EXPECT_EQ(through(other), "");
  other.insecure_skip_verify = true;
  EXPECT_THAT(through(other), ::testing::StartsWith("CONNECT 127.0.0.1:6443 HTTP/1.1\r\n"));
}

// A body beyond max_response_bytes is an error, whether its length is announced
// (Content-Length) or not (chunked), and the transfer stops there.
TEST(Fetch, RefusesAResponseLargerThanTheBound) {
  const std::string body(4096, 'x');
  testing::LocalHttpServer server([&body](httplib::Server& s) {
    s.Get("/sized", [&body](const httplib::Request&, httplib::Response& res) {
      res.set_content(body, "text/plain");
    });
    s.Get("/chunked", [&body](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/plain", [&body](size_t, httplib::DataSink& sink) {
        for (int i = 0; i < 64; ++i) {
          if (!sink.write(body.data(), 64)) return false;
        }
        sink.done();
        return true;
      });
    });
  });
  for (const char* path : {"/sized", "/chunked"}) {
    HttpRequest req;
    req.url = server.url(path);
    absl::StatusOr<HttpResponse> r = Fetch(req);  // the default bound (64 MiB)
    ASSERT_TRUE(r.ok()) << path << ": " << r.status();
    EXPECT_EQ(r->body, body) << path;
    req.max_response_bytes = 4096;  // exactly the body: still fine
    r = Fetch(req);
    ASSERT_TRUE(r.ok()) << path << ": " << r.status();
    req.max_response_bytes = 1000;
    r = Fetch(req);
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << path;
    EXPECT_THAT(r.status().message(),
                HasSubstr(absl::StrCat("GET ", req.url, ": response larger than 1000 bytes")));
  }
}

// Streaming (a watch): a 2xx body reaches on_data piece by piece, past max_response_bytes, and
// is not collected; another status's body is collected as usual; on_data returning false, or
// `cancel`, stops the request (Cancelled) without waiting for the body or the timeout.
TEST(Fetch, StreamsA2xxBodyAndStopsWhenAsked) {
  std::atomic<bool> serving{true};
  testing::LocalHttpServer server([&serving](httplib::Server& s) {
    s.Get("/stream", [&serving](const httplib::Request& req, httplib::Response& res) {
      const bool endless = req.has_param("endless");
      res.set_chunked_content_provider(
          "application/json", [endless, &serving](size_t offset, httplib::DataSink& sink) {
            if (!endless && offset >= 3000) {
              sink.done();
              return true;
            }
            if (endless && offset >= 3000) {  // then idle, as a quiet watch is
              std::this_thread::sleep_for(std::chrono::milliseconds(20));
              return serving.load();
            }
            return sink.write("0123456789\n", 11);
          });
    });
    s.Get("/denied", [](const httplib::Request&, httplib::Response& res) {
      res.status = 403;
      res.set_content(R"({"kind":"Status","message":"forbidden"})", "application/json");
    });
  });
  std::string got;
  HttpRequest req;
  req.url = server.url("/stream");
  req.max_response_bytes = 100;
  req.on_data = [&got](absl::string_view piece) {
    got.append(piece.data(), piece.size());
    return true;
  };
  absl::StatusOr<HttpResponse> r = Fetch(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "");
  EXPECT_GE(got.size(), 3000u);
  EXPECT_EQ(got.substr(0, 22), "0123456789\n0123456789\n");

  req.url = server.url("/denied");
  r = Fetch(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(r->body, R"({"kind":"Status","message":"forbidden"})");

  req.url = server.url("/stream");
  req.on_data = [](absl::string_view) { return false; };
  r = Fetch(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();

  std::atomic<bool> cancel{false};
  req.url = server.url("/stream?endless=1");
  req.on_data = [](absl::string_view) { return true; };
  req.cancel = &cancel;
  req.timeout_ms = 60000;
  std::thread stopper([&cancel] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel = true;
  });
  auto start = std::chrono::steady_clock::now();
  r = Fetch(req);
  stopper.join();
  serving = false;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace tessera::adapters
