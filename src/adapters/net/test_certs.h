// Test helper: a throw-away PKI made with the openssl command line in a fresh temporary
// directory (removed on destruction): a CA, a server certificate for localhost and 127.0.0.1
// (or the subjectAltName given), and a client certificate (clientAuth), all signed by the CA, plus
// a second CA that signed none of them.
//
// Example:
//   TestCerts pki;
//   ASSERT_TRUE(pki.ok()) << pki.error();
//   httplib::SSLServer https(pki.server_cert().c_str(), pki.server_key().c_str());
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "adapters/io/test_scratch_dir.h"

namespace tessera::adapters::testing {

class TestCerts {
 public:
  explicit TestCerts(const std::string& server_alt_names = "DNS:localhost,IP:127.0.0.1") {
    std::ofstream(dir() + "/server.ext")
        << "subjectAltName=" << server_alt_names << "\nextendedKeyUsage=serverAuth\n";
    std::ofstream(dir() + "/client.ext") << "extendedKeyUsage=clientAuth\n";
    const std::string script = absl::StrCat(
        "set -e; cd '", dir(), "'; ",
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 "
        "-subj /CN=tessera-test-ca; ",
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.crt "
        "-days 2 -subj /CN=tessera-other-ca; ",
        "for who in server client; do ",
        "openssl req -newkey rsa:2048 -nodes -keyout $who.key -out $who.csr -subj /CN=$who; ",
        "openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $who.crt "
        "-days 2 -extfile $who.ext; done");
    std::ofstream(dir() + "/make.sh") << script << "\n";
    const std::string command =
        absl::StrCat("bash '", dir(), "/make.sh' >'", dir(), "/openssl.log' 2>&1");
    if (std::system(command.c_str()) != 0) {
      std::ifstream log(dir() + "/openssl.log");
      error_ = absl::StrCat("openssl failed: ", std::string(std::istreambuf_iterator<char>(log),
                                                            std::istreambuf_iterator<char>()));
    }
  }

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  std::string ca() const { return dir() + "/ca.crt"; }
  std::string other_ca() const { return dir() + "/other-ca.crt"; }
  std::string server_cert() const { return dir() + "/server.crt"; }
  std::string server_key() const { return dir() + "/server.key"; }
  std::string client_cert() const { return dir() + "/client.crt"; }
  std::string client_key() const { return dir() + "/client.key"; }

 private:
  const std::string& dir() const { return scratch_.path(); }

  ScratchDir scratch_{"pki"};  // removed with the object
  std::string error_;
};

}  // namespace tessera::adapters::testing
