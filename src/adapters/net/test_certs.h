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
    std::ofstream(dir_ + "/server.ext")
        << "subjectAltName=" << server_alt_names << "\nextendedKeyUsage=serverAuth\n";
    std::ofstream(dir_ + "/client.ext") << "extendedKeyUsage=clientAuth\n";
    const std::string script = absl::StrCat(
        "set -e; cd '", dir_, "'; ",
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 "
        "-subj /CN=tessera-test-ca; ",
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.crt "
        "-days 2 -subj /CN=tessera-other-ca; ",
        "for who in server client; do ",
        "openssl req -newkey rsa:2048 -nodes -keyout $who.key -out $who.csr -subj /CN=$who; ",
        "openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $who.crt "
        "-days 2 -extfile $who.ext; done");
    std::ofstream(dir_ + "/make.sh") << script << "\n";
    const std::string command =
        absl::StrCat("bash '", dir_, "/make.sh' >'", dir_, "/openssl.log' 2>&1");
    if (std::system(command.c_str()) != 0) {
      std::ifstream log(dir_ + "/openssl.log");
      error_ = absl::StrCat("openssl failed: ", std::string(std::istreambuf_iterator<char>(log),
                                                            std::istreambuf_iterator<char>()));
    }
  }

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  std::string ca() const { return dir_ + "/ca.crt"; }
  std::string other_ca() const { return dir_ + "/other-ca.crt"; }
  std::string server_cert() const { return dir_ + "/server.crt"; }
  std::string server_key() const { return dir_ + "/server.key"; }
  std::string client_cert() const { return dir_ + "/client.crt"; }
  std::string client_key() const { return dir_ + "/client.key"; }

 private:
  ScratchDir scratch_{"pki"};  // removed with the object
  const std::string dir_ = scratch_.path();
  std::string error_;
};

}  // namespace tessera::adapters::testing
