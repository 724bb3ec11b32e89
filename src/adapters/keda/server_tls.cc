#include "adapters/keda/server_tls.h"

#include <grpc/grpc.h>

#include <cstdlib>
#include <utility>

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

}  // namespace

ServerTls::~ServerTls() = default;

absl::StatusOr<std::unique_ptr<ServerTls>> ServerTls::Create(const std::string& cert_file,
                                                             const std::string& key_file,
                                                             const std::string& client_ca_file) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<TlsFiles> files,
                           TlsFiles::Load(cert_file, key_file, client_ca_file));
  std::unique_ptr<ServerTls> tls(new ServerTls(std::move(files)));
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

grpc_ssl_certificate_config_reload_status ServerTls::Fetch(
    void* self, grpc_ssl_server_certificate_config** config) {
  auto* tls = static_cast<ServerTls*>(self);
  MutexLock lock(&tls->mu_);
  if (tls->handed_version_ == tls->files_->version()) {
    return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_UNCHANGED;
  }
  const TlsFiles::Material m = tls->files_->current();
  grpc_ssl_pem_key_cert_pair pair{m.key_pem.c_str(), m.cert_pem.c_str()};
  // Core asserts that a fetched config has client roots, even when no client certificate is
  // asked for; then the server's own chain stands in, and nothing is ever verified against it.
  const std::string& roots = m.ca_pem.empty() ? m.cert_pem : m.ca_pem;
  *config = grpc_ssl_server_certificate_config_create(roots.c_str(), &pair, 1);
  tls->handed_version_ = m.version;
  return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW;
}

}  // namespace tessera::adapters
