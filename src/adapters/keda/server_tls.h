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

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace tessera::adapters {

class ServerTls {
 public:
  // Reads and checks the files (`client_ca_file` empty: no client certificate asked for; else
  // one signed by it is required). InvalidArgument, NotFound or PermissionDenied naming the file
  // and what is wrong when they do not load.
  static absl::StatusOr<std::unique_ptr<ServerTls>> Create(const std::string& cert_file,
                                                           const std::string& key_file,
                                                           const std::string& client_ca_file);
  ~ServerTls();
  ServerTls(const ServerTls&) = delete;
  ServerTls& operator=(const ServerTls&) = delete;

  // For ServerBuilder::AddListeningPort. This object must outlive every server built with them.
  std::shared_ptr<grpc::ServerCredentials> credentials() const { return credentials_; }

  // When the certificate served now expires (what Create or the last renewal read).
  absl::Time not_after() const;

  enum class Outcome { kSame, kRenewed, kRefused };
  struct Reloaded {
    Outcome outcome = Outcome::kSame;
    std::string message;  // for kRenewed and kRefused: a line for the log, naming the files
  };
  // Reads the files again. Contents unlike the served ones that load are served from the next
  // handshake (kRenewed); ones that do not are refused (kRefused, with the reason; the served
  // ones stay). The same contents again are kSame, refused or not, so each change of the files
  // is reported once. Thread-safe.
  Reloaded Reload();

 private:
  ServerTls(std::string cert_file, std::string key_file, std::string client_ca_file);
  // gRPC core's fetcher: the checked material if it is newer than what core has.
  static grpc_ssl_certificate_config_reload_status Fetch(
      void* self, grpc_ssl_server_certificate_config** config);

  const std::string cert_file_;
  const std::string key_file_;
  const std::string client_ca_file_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  mutable Mutex mu_;
  // The checked material, and its version (1 at Create); what core last took up.
  std::string cert_pem_ ABSL_GUARDED_BY(mu_);
  std::string key_pem_ ABSL_GUARDED_BY(mu_);
  std::string ca_pem_ ABSL_GUARDED_BY(mu_);
  absl::Time not_after_ ABSL_GUARDED_BY(mu_);
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t handed_version_ ABSL_GUARDED_BY(mu_) = 0;
  // The contents last refused, so that the same failure is reported once per change of files.
  std::string refused_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::adapters
