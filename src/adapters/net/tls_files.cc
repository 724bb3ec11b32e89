#include "adapters/net/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <ctime>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "adapters/io/files.h"
#include "base/status.h"

namespace tessera::adapters {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

// For an encrypted key: no passphrase (OpenSSL's default would prompt on the terminal).
int NoPassphrase(char*, int, int, void*) { return 0; }

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The PEM certificates in `pem`, in order; an empty vector when the first does not parse. Sets
// *trailing_garbage when something after the last certificate is not one.
std::vector<Cert> ReadCertificates(const std::string& pem, bool* trailing_garbage) {
  std::vector<Cert> certs;
  Bio bio = MemoryBio(pem);
  *trailing_garbage = false;
  if (bio == nullptr) return certs;
  ERR_clear_error();
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr)) {
    certs.emplace_back(x);
  }
  // The loop ends on the end of the input (no further "-----BEGIN"), or on a block that is no
  // certificate.
  const unsigned long err = ERR_peek_last_error();
  *trailing_garbage =
      err != 0 && !(ERR_GET_LIB(err) == ERR_LIB_PEM && ERR_GET_REASON(err) == PEM_R_NO_START_LINE);
  ERR_clear_error();
  return certs;
}

}  // namespace

absl::Status CheckCertificateAndKeyPem(const std::string& cert_pem, const std::string& key_pem,
                                       const std::string& cert_file, const std::string& key_file) {
  bool garbage = false;
  std::vector<Cert> chain = ReadCertificates(cert_pem, &garbage);
  if (chain.empty() || garbage) {
    return absl::InvalidArgumentError(absl::StrCat(
        cert_file,
        ": expected a PEM certificate chain (-----BEGIN CERTIFICATE----- blocks, the server's "
        "own first), found ",
        chain.empty() ? "none" : "a block after the certificates that is not one"));
  }
  Bio bio = MemoryBio(key_pem);
  ERR_clear_error();
  Key key(bio == nullptr ? nullptr
                         : PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(key_file, ": expected an unencrypted PEM private key"));
  }
  const bool match = X509_check_private_key(chain.front().get(), key.get()) == 1;
  ERR_clear_error();
  if (!match) {
    return absl::InvalidArgumentError(absl::StrCat(
        key_file, ": the private key is not the one of the certificate in ", cert_file));
  }
  return absl::OkStatus();
}

absl::Status CheckCaBundlePem(const std::string& pem, const std::string& ca_file) {
  bool garbage = false;
  std::vector<Cert> certs = ReadCertificates(pem, &garbage);
  if (certs.empty() || garbage) {
    return absl::InvalidArgumentError(absl::StrCat(
        ca_file, ": expected PEM CA certificates (-----BEGIN CERTIFICATE----- blocks), found ",
        certs.empty() ? "none" : "a block that is not one"));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Time> CertificateNotAfter(const std::string& cert_pem) {
  bool garbage = false;
  std::vector<Cert> chain = ReadCertificates(cert_pem, &garbage);
  struct tm when = {};
  if (chain.empty() || ASN1_TIME_to_tm(X509_get0_notAfter(chain.front().get()), &when) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("no PEM certificate to read an expiry from");
  }
  return absl::FromTimeT(timegm(&when));
}

namespace {

// The files' contents; read errors as ReadFile's.
absl::StatusOr<TlsFiles::Material> ReadMaterial(const std::string& cert_file,
                                                const std::string& key_file,
                                                const std::string& ca_file) {
  TlsFiles::Material m;
  TESSERA_ASSIGN_OR_RETURN(m.cert_pem, ReadFile(cert_file));
  TESSERA_ASSIGN_OR_RETURN(m.key_pem, ReadFile(key_file));
  if (!ca_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(m.ca_pem, ReadFile(ca_file));
  }
  return m;
}

bool SameFiles(const TlsFiles::Material& a, const TlsFiles::Material& b) {
  return a.cert_pem == b.cert_pem && a.key_pem == b.key_pem && a.ca_pem == b.ca_pem;
}

// Checks `m` and sets its not_after.
absl::Status Check(TlsFiles::Material& m, const std::string& cert_file, const std::string& key_file,
                   const std::string& ca_file) {
  TESSERA_RETURN_IF_ERROR(CheckCertificateAndKeyPem(m.cert_pem, m.key_pem, cert_file, key_file));
  if (!ca_file.empty()) TESSERA_RETURN_IF_ERROR(CheckCaBundlePem(m.ca_pem, ca_file));
  TESSERA_ASSIGN_OR_RETURN(m.not_after, CertificateNotAfter(m.cert_pem));
  return absl::OkStatus();
}

}  // namespace

TlsFiles::TlsFiles(std::string cert_file, std::string key_file, std::string ca_file,
                   Material material)
    : cert_file_(std::move(cert_file)),
      key_file_(std::move(key_file)),
      ca_file_(std::move(ca_file)),
      current_(std::move(material)) {}

absl::StatusOr<std::unique_ptr<TlsFiles>> TlsFiles::Load(const std::string& cert_file,
                                                         const std::string& key_file,
                                                         const std::string& ca_file) {
  TESSERA_ASSIGN_OR_RETURN(Material m, ReadMaterial(cert_file, key_file, ca_file));
  TESSERA_RETURN_IF_ERROR(Check(m, cert_file, key_file, ca_file));
  return std::unique_ptr<TlsFiles>(new TlsFiles(cert_file, key_file, ca_file, std::move(m)));
}

TlsFiles::Reloaded TlsFiles::Reload() {
  absl::StatusOr<Material> m = ReadMaterial(cert_file_, key_file_, ca_file_);
  {
    MutexLock lock(&mu_);
    if (m.ok() && SameFiles(*m, current_)) {
      refused_.clear();
      return {};
    }
  }
  // Changed (or unreadable): checked outside the lock, which handshakes take.
  absl::Status checked = m.ok() ? Check(*m, cert_file_, key_file_, ca_file_) : m.status();
  const std::string seen =
      m.ok() ? absl::StrCat(m->cert_pem, m->key_pem, m->ca_pem) : std::string(m.status().message());
  MutexLock lock(&mu_);
  if (m.ok() && SameFiles(*m, current_)) {
    return {};  // taken up meanwhile by another caller
  }
  if (!checked.ok()) {
    if (seen == refused_) return {};
    refused_ = seen;
    ++refusals_;
    return {Outcome::kRefused,
            absl::StrCat("TLS: the files changed but do not load; the certificate served so far "
                         "stays in use: ",
                         checked.message())};
  }
  refused_.clear();
  m->version = current_.version + 1;
  current_ = std::move(*m);
  ++renewals_;
  return {Outcome::kRenewed,
          absl::StrCat("TLS: serving the renewed ", cert_file_,
                       ca_file_.empty() ? "" : absl::StrCat(" and trusting ", ca_file_),
                       " from the next connection")};
}

TlsFiles::Material TlsFiles::current() const {
  MutexLock lock(&mu_);
  return current_;
}

int64_t TlsFiles::version() const {
  MutexLock lock(&mu_);
  return current_.version;
}

TlsFiles::Stats TlsFiles::stats() const {
  MutexLock lock(&mu_);
  return {current_.not_after, renewals_, refusals_};
}

void AppendTlsMetrics(std::string* out, const std::string& prefix, const TlsFiles* files,
                      const std::string& served, const std::string& read) {
  const std::string expiry = prefix + "_tls_certificate_expiry_timestamp_seconds";
  const std::string reloads = prefix + "_tls_reloads_total";
  const TlsFiles::Stats stats = files == nullptr ? TlsFiles::Stats{} : files->stats();
  absl::StrAppend(out, "# HELP ", expiry, " When the certificate ", served,
                  " expires (Unix time).\n# TYPE ", expiry, " gauge\n");
  if (files != nullptr) {
    absl::StrAppend(out, expiry, " ", absl::ToUnixSeconds(stats.not_after), "\n");
  }
  absl::StrAppend(out, "# HELP ", reloads, " Changes of the TLS files, ", read,
                  ": renewed (served from the next connection) or refused (they do not load; the "
                  "certificate served so far stays).\n# TYPE ",
                  reloads, " counter\n");
  absl::StrAppend(out, reloads, "{outcome=\"renewed\"} ", stats.renewed, "\n", reloads,
                  "{outcome=\"refused\"} ", stats.refused, "\n");
}

}  // namespace tessera::adapters
