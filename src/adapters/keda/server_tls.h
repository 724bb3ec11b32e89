// TLS for the scaler's gRPC server whose key material is read again from its files when asked
// (ServeScaler asks every `tls.reloadInterval`): a certificate or client CA renewed on disk
// (cert-manager rewriting the Secret the pod mounts) is served from the next handshake, with no
// restart (connections already open keep theirs); files that do not load (a key that is not the
// certificate's, a torn write) are refused with the reason and the last good ones stay in use.
// gRPC's own FileWatcherCertificateProvider hands files over unchecked: given a certificate file
// that held a key, the server closed new connections while it was there (gRPC 1.51, measured).
//
// Built on gRPC core's certificate-config fetcher, which core calls at each handshake: the
// fetcher hands over only material that Reload() has checked.
//
// Example:
//   TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<ServerTls> tls,
//                            ServerTls::Create("/tls/tls.crt", "/tls/tls.key", "/tls/ca.crt"));
//   builder.AddListeningPort(listen, tls->credentials(), &port);
//   ...
//   ServerTls::Reloaded r = tls->Reload();  // every reload interval; log r.message if not kSame
#pragma once

#include <grpc/grpc_security.h>
#include <grpcpp/security/server_credentials.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "adapters/net/tls_files.h"
#include "base/mutex.h"

namespace tessera::adapters {

class ServerTls {
 public:
  // Reads and checks the files (TlsFiles::Load; `client_ca_file` empty: no client certificate
  // asked for, else one signed by it is required).
  static absl::StatusOr<std::unique_ptr<ServerTls>> Create(const std::string& cert_file,
                                                           const std::string& key_file,
                                                           const std::string& client_ca_file);
  ~ServerTls();
  ServerTls(const ServerTls&) = delete;
  ServerTls& operator=(const ServerTls&) = delete;

  // For ServerBuilder::AddListeningPort. This object must outlive every server built with them.
  std::shared_ptr<grpc::ServerCredentials> credentials() const { return credentials_; }

  // The files served, for what metrics show of them (AppendTlsMetrics); shared, so that a
  // metrics scrape may read them after the server is gone.
  std::shared_ptr<const TlsFiles> files() const { return files_; }

  using Outcome = TlsFiles::Outcome;
  using Reloaded = TlsFiles::Reloaded;
  // Reads the files again (TlsFiles::Reload): what loads is served from the next handshake.
  Reloaded Reload() { return files_->Reload(); }

 private:
  explicit ServerTls(std::shared_ptr<TlsFiles> files) : files_(std::move(files)) {}
  // gRPC core's fetcher: the current material if it is newer than what core has.
  static grpc_ssl_certificate_config_reload_status Fetch(
      void* self, grpc_ssl_server_certificate_config** config);

  const std::shared_ptr<TlsFiles> files_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  Mutex mu_;
  int64_t handed_version_ ABSL_GUARDED_BY(mu_) = 0;  // the TlsFiles version core last took up
};

}  // namespace tessera::adapters
