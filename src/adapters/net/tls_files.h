// Start-time checks of a TLS server's key material, for the servers that re-read their files
// later (the scaler's gRPC server, the admission webhook): a certificate renewed on disk is then
// served without a restart, but a path or file that is wrong from the start should stop the
// server at once with what is wrong, not fail every handshake after it reports ready.
//
// Example:
//   TESSERA_RETURN_IF_ERROR(CheckCertificateAndKey("/tls/tls.crt", "/tls/tls.key"));
//   TESSERA_RETURN_IF_ERROR(CheckCaBundle("/tls/ca.crt"));
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::adapters {

// OK when `cert_file` holds a PEM certificate (a chain: the leaf first) and `key_file` a PEM
// private key that is the leaf's. Otherwise InvalidArgument (NotFound, PermissionDenied as
// ReadFile's) naming the file and what is wrong: no certificate, no key (or an encrypted one),
// or a key that is not the certificate's. Never includes the key's contents.
absl::Status CheckCertificateAndKey(const std::string& cert_file, const std::string& key_file);
// The same for contents already read; the names are what messages call them.
absl::Status CheckCertificateAndKeyPem(const std::string& cert_pem, const std::string& key_pem,
                                       const std::string& cert_name, const std::string& key_name);

// OK when `ca_file` holds at least one PEM certificate and nothing else that fails to parse;
// otherwise InvalidArgument (or ReadFile's error) naming the file.
absl::Status CheckCaBundle(const std::string& ca_file);
absl::Status CheckCaBundlePem(const std::string& pem, const std::string& name);

// When the first certificate in `cert_pem` expires (its notAfter); InvalidArgument when there is
// no certificate to read it from.
absl::StatusOr<absl::Time> CertificateNotAfter(const std::string& cert_pem);

}  // namespace tessera::adapters
