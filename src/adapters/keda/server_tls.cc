#include "adapters/keda/server_tls.h"

#include <grpc/grpc.h>

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "adapters/io/files.h"
#include "adapters/net/tls_files.h"
#include "base/status.h"

namespace tessera::adapters {
namespace {

// grpc::ServerCredentials over a core grpc_server_credentials (gRPC's C++ API has no public
// wrapper for the fetcher-based SSL credentials). Owns one reference to `creds`.
class CoreServerCredentials final : public grpc::ServerCredentials {
 public:
  explicit CoreServerCredentials(grpc_server_credentials* creds) : creds_(creds) {}
  ~CoreServerCredentials() override { grpc_server_credentials_release(creds_); }
  CoreServerCredentials(const CoreServerCredentials&) = delete;
  CoreServerCredentials& operator=(const CoreServerCredentials&) = delete;

  void SetAuthMetadataProcessor(const std::shared_ptr<grpc::AuthMetadataProcessor>&) override {
    std::abort();  // not used by Tessera; an auth processor here would be silently ignored
  }

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    return grpc_server_add_http2_port(server, addr.c_str(), creds_);
  }

  grpc_server_credentials* creds_;
};

struct Material {
  std::string cert;
  std::string key;
  std::string ca;
};

// The three files as they are now.
absl::StatusOr<Material> Read(const std::string& cert_file, const std::string& key_file,
                              const std::string& ca_file) {
  Material m;
  TESSERA_ASSIGN_OR_RETURN(m.cert, ReadFile(cert_file));
  TESSERA_ASSIGN_OR_RETURN(m.key, ReadFile(key_file));
  if (!ca_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(m.ca, ReadFile(ca_file));
  }
  return m;
}

absl::Status Check(const Material& m, const std::string& cert_file, const std::string& key_file,
                   const std::string& ca_file) {
  TESSERA_RETURN_IF_ERROR(CheckCertificateAndKeyPem(m.cert, m.key, cert_file, key_file));
  if (!ca_file.empty()) TESSERA_RETURN_IF_ERROR(CheckCaBundlePem(m.ca, ca_file));
  return absl::OkStatus();
}

}  // namespace

ServerTls::ServerTls(std::string cert_file, std::string key_file, std::string client_ca_file)
    : cert_file_(std::move(cert_file)),
      key_file_(std::move(key_file)),
      client_ca_file_(std::move(client_ca_file)) {}

ServerTls::~ServerTls() = default;

absl::StatusOr<std::unique_ptr<ServerTls>> ServerTls::Create(const std::string& cert_file,
                                                             const std::string& key_file,
                                                             const std::string& client_ca_file) {
  TESSERA_ASSIGN_OR_RETURN(Material m, Read(cert_file, key_file, client_ca_file));
  TESSERA_RETURN_IF_ERROR(Check(m, cert_file, key_file, client_ca_file));
  TESSERA_ASSIGN_OR_RETURN(absl::Time not_after, CertificateNotAfter(m.cert));
  std::unique_ptr<ServerTls> tls(new ServerTls(cert_file, key_file, client_ca_file));
  {
    MutexLock lock(&tls->mu_);
    tls->cert_pem_ = std::move(m.cert);
    tls->key_pem_ = std::move(m.key);
    tls->ca_pem_ = std::move(m.ca);
    tls->not_after_ = not_after;
    tls->version_ = 1;
  }
  grpc_ssl_server_credentials_options* options =
      grpc_ssl_server_credentials_create_options_using_config_fetcher(
          client_ca_file.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                 : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY,
          &ServerTls::Fetch, tls.get());
  grpc_server_credentials* creds = grpc_ssl_server_credentials_create_with_options(options);
  if (creds == nullptr) return absl::InternalError("gRPC refused the TLS server options");
  tls->credentials_ = std::make_shared<CoreServerCredentials>(creds);
  return tls;
}

ServerTls::Reloaded ServerTls::Reload() {
  absl::StatusOr<Material> m = Read(cert_file_, key_file_, client_ca_file_);
  absl::Status checked = m.ok() ? Check(*m, cert_file_, key_file_, client_ca_file_) : m.status();
  absl::StatusOr<absl::Time> not_after =
      checked.ok() ? CertificateNotAfter(m->cert) : absl::StatusOr<absl::Time>(checked);
  if (!not_after.ok()) checked = not_after.status();
  // What the files hold now (or why they cannot be read), to compare with what was last refused.
  const std::string seen =
      m.ok() ? absl::StrCat(m->cert.size(), ":", m->cert, m->key.size(), ":", m->key, m->ca)
             : std::string(m.status().message());
  MutexLock lock(&mu_);
  if (m.ok() && m->cert == cert_pem_ && m->key == key_pem_ && m->ca == ca_pem_) {
    refused_.clear();
    return {};
  }
  if (!checked.ok()) {
    if (seen == refused_) return {};
    refused_ = seen;
    return {Outcome::kRefused,
            absl::StrCat("TLS: the files changed but do not load; the certificate served so far "
                         "stays in use: ",
                         checked.message())};
  }
  refused_.clear();
  cert_pem_ = std::move(m->cert);
  key_pem_ = std::move(m->key);
  ca_pem_ = std::move(m->ca);
  not_after_ = *not_after;
  ++version_;
  return {
      Outcome::kRenewed,
      absl::StrCat("TLS: serving the renewed ", cert_file_,
                   client_ca_file_.empty() ? "" : absl::StrCat(" and trusting ", client_ca_file_),
                   " from the next connection")};
}

absl::Time ServerTls::not_after() const {
  MutexLock lock(&mu_);
  return not_after_;
}

grpc_ssl_certificate_config_reload_status ServerTls::Fetch(
    void* self, grpc_ssl_server_certificate_config** config) {
  auto* tls = static_cast<ServerTls*>(self);
  MutexLock lock(&tls->mu_);
  if (tls->handed_version_ == tls->version_) return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_UNCHANGED;
  grpc_ssl_pem_key_cert_pair pair{tls->key_pem_.c_str(), tls->cert_pem_.c_str()};
  // Core asserts that a fetched config has client roots, even when no client certificate is
  // asked for; then the server's own chain stands in, and nothing is ever verified against it.
  const std::string& roots = tls->ca_pem_.empty() ? tls->cert_pem_ : tls->ca_pem_;
  *config = grpc_ssl_server_certificate_config_create(roots.c_str(), &pair, 1);
  tls->handed_version_ = tls->version_;
  return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW;
}

}  // namespace tessera::adapters
