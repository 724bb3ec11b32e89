// A TLS server's key material from its files, for the servers that serve a renewal without a
// restart (the scaler's gRPC server, the admission webhook): TlsFiles::Load reads and checks the
// files at start, so that a wrong path or file stops the server at once with what is wrong;
// Reload() reads them again, takes up what loads and refuses what does not (a key beside the
// wrong certificate, a torn write), so the last good material stays in use. The checks are also
// offered on their own.
//
// Example:
//   TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<TlsFiles> files,
//                            TlsFiles::Load("/tls/tls.crt", "/tls/tls.key", "/tls/ca.crt"));
//   TlsFiles::Reloaded r = files->Reload();  // later; log r.message unless kSame
//   TlsFiles::Material m = files->current();
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace tessera::adapters {

class TlsFiles {
 public:
  struct Material {
    std::string cert_pem;  // the chain, the server's own certificate first
    std::string key_pem;
    std::string ca_pem;    // "" without a client CA file
    absl::Time not_after;  // when the server's certificate expires
    int64_t version = 1;   // 1 at Load, one more at each renewal
  };
  // Reads and checks the files (`ca_file` empty: none). NotFound or PermissionDenied (ReadFile's)
  // or InvalidArgument naming the file and what is wrong (CheckCertificateAndKeyPem,
  // CheckCaBundlePem).
  static absl::StatusOr<std::unique_ptr<TlsFiles>> Load(const std::string& cert_file,
                                                        const std::string& key_file,
                                                        const std::string& ca_file);

  enum class Outcome { kSame, kRenewed, kRefused };
  struct Reloaded {
    Outcome outcome = Outcome::kSame;
    std::string message;  // for kRenewed and kRefused: a line for the log, naming the files
  };
  // Reads the files again. Contents unlike the current ones that load become current
  // (kRenewed); ones that do not are refused (kRefused, with the reason; the current ones stay).
  // The same contents again are kSame, refused or not, so each change of the files is reported
  // once. Thread-safe.
  Reloaded Reload();

  // The material in use. Thread-safe.
  Material current() const;
  // current().version without the copy: whether the material changed. Thread-safe.
  int64_t version() const;

  // What a server's metrics show of its TLS: when the certificate in use expires, and how many
  // changes of the files Reload() took up (renewed) or refused. Thread-safe.
  struct Stats {
    absl::Time not_after;
    int64_t renewed = 0;
    int64_t refused = 0;
  };
  Stats stats() const;

 private:
  TlsFiles(std::string cert_file, std::string key_file, std::string ca_file, Material material);

  const std::string cert_file_;
  const std::string key_file_;
  const std::string ca_file_;
  mutable Mutex mu_;
  Material current_ ABSL_GUARDED_BY(mu_);
  // What the files held when last refused (or why they could not be read), so that the same
  // failure is reported once.
  std::string refused_ ABSL_GUARDED_BY(mu_);
  int64_t renewals_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refusals_ ABSL_GUARDED_BY(mu_) = 0;
};

// Appends to `out`, in Prometheus' text format, PREFIX_tls_certificate_expiry_timestamp_seconds
// (a gauge) and PREFIX_tls_reloads_total{outcome="renewed"|"refused"} (a counter) from
// files->stats(). Both families are always declared, so that alerts on them check against a
// server without TLS too. Without `files` (no TLS, or not loaded yet) the counters are 0 and the
// expiry has no sample (a 0 would read as expired). `served` ends the expiry's help ("When the
// certificate ..."), `read` says when the files are read.
void AppendTlsMetrics(std::string* out, const std::string& prefix, const TlsFiles* files,
                      const std::string& served, const std::string& read);

// OK when `cert_pem` holds a PEM certificate chain (the leaf first) and `key_pem` an unencrypted
// PEM private key that is the leaf's. Otherwise InvalidArgument naming the file (`cert_name`,
// `key_name`) and what is wrong: no certificate, a torn block, no key (or an encrypted one), or a
// key that is not the certificate's. Never includes the key's contents.
absl::Status CheckCertificateAndKeyPem(const std::string& cert_pem, const std::string& key_pem,
                                       const std::string& cert_name, const std::string& key_name);

// OK when `pem` holds at least one PEM certificate and nothing else that fails to parse;
// otherwise InvalidArgument naming the file.
absl::Status CheckCaBundlePem(const std::string& pem, const std::string& name);

// When the first certificate in `cert_pem` expires (its notAfter); InvalidArgument when there is
// no certificate to read it from.
absl::StatusOr<absl::Time> CertificateNotAfter(const std::string& cert_pem);

}  // namespace tessera::adapters
