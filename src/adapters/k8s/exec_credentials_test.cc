// Kubeconfig exec credential plugins: the stanza as LoadKubeconfig reads it, the plugin's answer
// as ParseExecCredential reads it, and KubeClient running a real plugin (a shell script) against
// a local API server stand-in that accepts one token at a time, or a client certificate.
#include "adapters/k8s/exec_credentials.h"

#include <httplib.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "adapters/io/files.h"
#include "adapters/io/test_scratch_dir.h"
#include "adapters/k8s/kube_client.h"
#include "adapters/net/test_certs.h"
#include "adapters/net/test_http_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const absl::Time kExecNow = absl::FromUnixSeconds(1796968000);  // 2026-12-11T05:46:40Z

std::string ExecTestDir() { return testing::NewScratchDir("exec"); }

// A kubeconfig whose user `u` authenticates with `exec_stanza` (YAML flow or block, indented
// under `exec:`), against `server`.
std::string ExecKubeconfig(const std::string& server, const std::string& exec_stanza,
                           const std::string& cluster_extra = "") {
  return absl::StrCat("apiVersion: v1\nkind: Config\ncurrent-context: a\nclusters:\n- name: c\n",
                      "  cluster:\n    server: ", server, "\n", cluster_extra,
                      "contexts:\n- name: a\n  context: {cluster: c, user: u}\n",
                      "users:\n- name: u\n  user:\n    exec:\n", exec_stanza);
}

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime(absl::RFC3339_sec, t, absl::UTCTimeZone());
}

TEST(ExecCredentials, KubeconfigStanzaAndWhatThePluginIsGiven) {
  std::string dir = ExecTestDir();
  std::ofstream(dir + "/config") << ExecKubeconfig(
      "https://10.0.0.1:6443", R"(      apiVersion: client.authentication.k8s.io/v1
      command: ./bin/get-token
      args: [--cluster, prod]
      env:
      - {name: AWS_PROFILE, value: ops}
      interactiveMode: Never
      provideClusterInfo: true
      installHint: |
        get-token is needed.
        apt-get install get-token
)",
      R"(    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
    proxy-url: socks5://bastion:1080
    tls-server-name: kubernetes.default.svc
    extensions:
    - name: other
      extension: {ignored: 1}
    - name: client.authentication.k8s.io/exec
      extension: {audience: 06e3fbd18de8, port: 443, quoted: "443", on: true, none: null, ratio: 0.5, list: [1, a]}
)");
  absl::StatusOr<KubeConfig> c = LoadKubeconfig(dir + "/config");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->exec.has_value());
  const ExecPlugin& p = *c->exec;
  EXPECT_EQ(p.user, "u");
  EXPECT_EQ(p.command, dir + "/./bin/get-token");  // relative to the kubeconfig, as client-go
  EXPECT_EQ(p.args, (std::vector<std::string>{"--cluster", "prod"}));
  ASSERT_EQ(p.env.size(), 1u);
  EXPECT_EQ(p.env[0], std::make_pair(std::string("AWS_PROFILE"), std::string("ops")));
  EXPECT_EQ(p.api_version, kExecCredentialV1);
  EXPECT_EQ(p.install_hint, "get-token is needed.\napt-get install get-token\n");
  EXPECT_EQ(p.exec_info, nlohmann::json::parse(R"({
    "apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
    "spec": {"interactive": false, "cluster": {
      "server": "https://10.0.0.1:6443",
      "certificate-authority-data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==",
      "proxy-url": "socks5://bastion:1080",
      "tls-server-name": "kubernetes.default.svc",
      "config": {"audience": "06e3fbd18de8", "port": 443, "quoted": "443", "on": true,
                 "none": null, "ratio": 0.5, "list": [1, "a"]}}}})"));
  EXPECT_TRUE(c->token.empty());
  EXPECT_EQ(c->proxy_url, "socks5://bastion:1080");
  EXPECT_EQ(c->tls_server_name, "kubernetes.default.svc");

  // Without provideClusterInfo, v1beta1 (interactiveMode defaults to IfAvailable), a bare name.
  std::ofstream(dir + "/beta") << ExecKubeconfig(
      "https://10.0.0.1:6443",
      "      {apiVersion: client.authentication.k8s.io/v1beta1, command: aws, args: [eks, "
      "get-token, --cluster-name, prod]}\n");
  c = LoadKubeconfig(dir + "/beta");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->exec->command, "aws");
  EXPECT_EQ(c->exec->exec_info, nlohmann::json::parse(R"({
    "apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
    "spec": {"interactive": false}})"));
}

TEST(ExecCredentials, StanzasTesseraCannotHonourAreRefusedWithTheirLineAndField) {
  std::string dir = ExecTestDir();
  const std::string v1 = "apiVersion: client.authentication.k8s.io/v1";
  struct Case {
    std::string stanza;
    std::string message;
  };
  const Case cases[] = {
      {"      {command: aws}\n", "config:15:7: users[0].user.exec.apiVersion: required field"},
      {"      {" + v1 + ", command: aws}\n",
       "users[0].user.exec.interactiveMode: required with client.authentication.k8s.io/v1"},
      {"      {" + v1 + ", command: kubelogin, interactiveMode: Always}\n",
       "interactiveMode: Always: this plugin needs a terminal"},
      {"      {" + v1 + ", command: aws, interactiveMode: Sometimes}\n",
       "expected Never, IfAvailable or Always, found \"Sometimes\""},
      {"      {apiVersion: client.authentication.k8s.io/v1alpha1, command: aws}\n",
       "found \"client.authentication.k8s.io/v1alpha1\" (removed in Kubernetes 1.24)"},
      {"      {" + v1 + ", command: aws, interactiveMode: Never, env: [{name: A}]}\n",
       "users[0].user.exec.env[0].value: required field"},
      {"      {" + v1 + ", command: aws, interactiveMode: Never, arg: [x]}\n", "arg"},
      {"      {" + v1 + ", command: '', interactiveMode: Never}\n", "expected a program"},
  };
  for (const Case& c : cases) {
    std::ofstream(dir + "/config", std::ios::trunc) << ExecKubeconfig("https://x", c.stanza);
    EXPECT_THAT(std::string(LoadKubeconfig(dir + "/config").status().message()),
                HasSubstr(c.message))
        << c.stanza;
  }
  // A cluster config of a billion values in a few lines of aliases is refused, not built.
  std::string laughs =
      "    extensions:\n    - name: client.authentication.k8s.io/exec\n"
      "      extension:\n        a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    laughs += absl::StrCat("        a", i, ": &a", i, " [");
    for (int j = 0; j < 10; ++j) absl::StrAppend(&laughs, j > 0 ? ", " : "", "*a", i - 1);
    laughs += "]\n";
  }
  std::ofstream(dir + "/config", std::ios::trunc) << ExecKubeconfig(
      "https://x",
      "      {" + v1 + ", command: aws, interactiveMode: Never, provideClusterInfo: true}\n",
      laughs);
  EXPECT_THAT(std::string(LoadKubeconfig(dir + "/config").status().message()),
              HasSubstr("too large for an exec plugin's cluster config"));
  // Beside a token: which would be used is not obvious, so neither is.
  std::ofstream(dir + "/config", std::ios::trunc)
      << ExecKubeconfig("https://x", "      {" + v1 + ", command: aws, interactiveMode: Never}\n")
      << "    token: abc\n";
  EXPECT_THAT(LoadKubeconfig(dir + "/config").status().message(),
              HasSubstr("exec together with a token; give the user one way to authenticate"));
}

TEST(ExecCredentials, AnswersAreCheckedAndNeverQuoted) {
  const std::string v1 = kExecCredentialV1;
  auto parse = [&](const std::string& status, const std::string& version = kExecCredentialV1) {
    return ParseExecCredential(
        v1,
        absl::StrCat(R"({"apiVersion":")", version, R"(","kind":"ExecCredential",)", status, "}"),
        kExecNow);
  };
  absl::StatusOr<ExecCredential> c = parse(
      R"("status":{"token":"k8s-aws-v1.s3cr3t","expirationTimestamp":"2026-12-11T06:00:40Z"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->token, "k8s-aws-v1.s3cr3t");
  EXPECT_EQ(c->expiration, kExecNow + absl::Minutes(14));
  c = parse(R"("status":{"token":"t"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->expiration, absl::InfiniteFuture());  // kept until the API server refuses it
  c = parse(R"("status":{"clientCertificateData":"CERT","clientKeyData":"KEY"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->client_cert_pem, "CERT");
  EXPECT_EQ(c->client_key_pem, "KEY");

  const std::pair<absl::Status, std::string> refused[] = {
      {parse(R"("status":{"token":"s3cr3t"})", kExecCredentialV1Beta1).status(),
       "it answered apiVersion \"client.authentication.k8s.io/v1beta1\"; the kubeconfig asks for "
       "\"client.authentication.k8s.io/v1\""},
      {ParseExecCredential(v1, R"({"apiVersion":")" + v1 + R"(","kind":"Secret","status":{}})",
                           kExecNow)
           .status(),
       "it answered kind \"Secret\"; expected \"ExecCredential\""},
      {parse(R"("spec":{})").status(), "its ExecCredential has no status object"},
      {parse(R"("status":{})").status(),
       "holds neither status.token nor status.clientCertificateData"},
      {parse(R"("status":{"token":["s3cr3t"]})").status(),
       "status.token: expected a string, found array"},
      {parse(R"("status":{"clientCertificateData":"s3cr3t"})").status(),
       "status.clientCertificateData without status.clientKeyData"},
      {parse(R"("status":{"clientKeyData":"s3cr3t"})").status(),
       "status.clientKeyData without status.clientCertificateData"},
      {parse(R"("status":{"token":"s3cr3t","expirationTimestamp":"tomorrow"})").status(),
       "status.expirationTimestamp: expected an RFC 3339 time, found \"tomorrow\""},
      {parse(R"("status":{"token":"s3cr3t","expirationTimestamp":"2026-12-11T05:46:40Z"})")
           .status(),
       "status.expirationTimestamp 2026-12-11T05:46:40Z is not after now (2026-12-11T05:46:40Z)"},
      {ParseExecCredential(v1, "s3cr3t\n", kExecNow).status(),
       "its output (7 bytes) is not a JSON object; expected an ExecCredential"},
      {ParseExecCredential(v1, std::string(200, '[') + std::string(200, ']'), kExecNow).status(),
       "nested too deep"},
  };
  for (const auto& [status, expected] : refused) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(expected));
    EXPECT_THAT(std::string(status.message()), Not(HasSubstr("s3cr3t")));
  }
}

// An API server stand-in: GET /api/v1/nodes answers 200 to `Bearer accepted`, 401 otherwise.
class TokenCheckingApi {
 public:
  TokenCheckingApi()
      : server_([this](httplib::Server& s) {
          s.Get("/api/v1/nodes", [this](const httplib::Request& req, httplib::Response& res) {
            std::lock_guard<std::mutex> l(mu_);
            ++requests_;
            if (req.get_header_value("Authorization") != "Bearer " + accepted_) {
              res.status = 401;
              res.set_content(R"({"kind":"Status","status":"Failure","message":"Unauthorized",)"
                              R"("reason":"Unauthorized","code":401})",
                              "application/json");
              return;
            }
            res.set_content(R"({"kind":"NodeList","items":[]})", "application/json");
          });
        }) {}
  void Accept(const std::string& token) {
    std::lock_guard<std::mutex> l(mu_);
    accepted_ = token;
  }
  int requests() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }
  std::string url() const { return server_.url(); }

 private:
  std::mutex mu_;
  std::string accepted_;
  int requests_ = 0;
  testing::LocalHttpServer server_;  // last: it serves until destroyed, before the rest
};

// A plugin that logs each run, keeps what it was given in KUBERNETES_EXEC_INFO, and prints
// $DIR/answer.json, or fails as a credential helper whose login expired while $DIR/fail exists.
void WritePlugin(const std::string& dir) {
  std::ofstream(dir + "/plugin") << R"(#!/bin/sh
echo run >> "$DIR/runs"
printf '%s' "$KUBERNETES_EXEC_INFO" > "$DIR/info"
if [ -f "$DIR/fail" ]; then
  echo "Refreshing credentials..." >&2
  echo "error: the SSO session has expired; run aws sso login" >&2
  exit 255
fi
cat "$DIR/answer.json"
)";
  std::filesystem::permissions(dir + "/plugin", std::filesystem::perms::owner_all);
}

int Runs(const std::string& dir) {
  std::ifstream in(dir + "/runs");
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

void Answer(const std::string& dir, const nlohmann::json& status) {
  std::ofstream(dir + "/answer.json", std::ios::trunc) << nlohmann::json{
      {"apiVersion", kExecCredentialV1},
      {"kind", "ExecCredential"},
      {"status", status}}.dump();
}

TEST(ExecCredentials, KubeClientRunsThePluginOnlyWhenItsTokenIsDueOrRefused) {
  std::string dir = ExecTestDir();
  WritePlugin(dir);
  TokenCheckingApi api;
  std::ofstream(dir + "/config") << ExecKubeconfig(
      api.url(), absl::StrCat("      apiVersion: client.authentication.k8s.io/v1\n",
                              "      command: ./plugin\n      interactiveMode: Never\n",
                              "      env: [{name: DIR, value: '", dir, "'}]\n"));
  absl::StatusOr<KubeConfig> cfg = LoadKubeconfig(dir + "/config");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  SimulatedClock clock(kExecNow);
  KubeClient kube(*cfg, &clock);
  auto get = [&] { return kube.Get("/api/v1/nodes"); };

  // One run for a token valid for an hour, used by every request meanwhile.
  Answer(dir, {{"token", "tok-1"}, {"expirationTimestamp", Rfc3339(kExecNow + absl::Hours(1))}});
  api.Accept("tok-1");
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<KubeResponse> r = get();
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->status, 200) << r->body;
    clock.Advance(absl::Minutes(1));
  }
  EXPECT_EQ(Runs(dir), 1);
  absl::StatusOr<std::string> info = ReadFile(dir + "/info");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(nlohmann::json::parse(*info),
            nlohmann::json::parse(R"({"apiVersion": "client.authentication.k8s.io/v1",
              "kind": "ExecCredential", "spec": {"interactive": false}})"));

  // Five minutes before it expires, a new one, run once for requests from many threads at once
  // (the others wait for that run rather than each running the plugin).
  clock.SetTime(kExecNow + absl::Minutes(55));
  Answer(dir, {{"token", "tok-2"}, {"expirationTimestamp", Rfc3339(clock.Now() + absl::Hours(1))}});
  api.Accept("tok-2");
  std::atomic<int> ok_answers{0};
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        absl::StatusOr<KubeResponse> r = get();
        if (r.ok() && r->status == 200) ++ok_answers;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok_answers.load(), 40);
  EXPECT_EQ(Runs(dir), 2);

  // Revoked before it expires: the 401 has the plugin run again and the request sent again.
  Answer(dir, {{"token", "tok-3"}, {"expirationTimestamp", Rfc3339(clock.Now() + absl::Hours(1))}});
  api.Accept("tok-3");
  int before = api.requests();
  absl::StatusOr<KubeResponse> retried = get();
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->status, 200);
  EXPECT_EQ(api.requests(), before + 2);
  EXPECT_EQ(Runs(dir), 3);

  // Revoked again, and the plugin's login has expired: the error names the plugin, the user and
  // the plugin's last line on stderr. It is not run again for 10 s (kRetryAfterFailure).
  std::ofstream(dir + "/fail") << "";
  api.Accept("tok-4");
  absl::Status failed = get().status();
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable) << failed;
  EXPECT_EQ(failed.message(),
            absl::StrCat("exec plugin ", dir,
                         "/./plugin of kubeconfig user \"u\": exit status 255: "
                         "error: the SSO session has expired; run aws sso login"));
  EXPECT_EQ(Runs(dir), 4);
  EXPECT_EQ(get().status(), failed);
  EXPECT_EQ(Runs(dir), 4);

  // Logged in again; a token without an expirationTimestamp is kept until refused.
  std::filesystem::remove(dir + "/fail");
  Answer(dir, {{"token", "tok-4"}});
  clock.Advance(absl::Seconds(10));
  ASSERT_EQ(get()->status, 200);
  clock.Advance(absl::Hours(10));
  ASSERT_EQ(get()->status, 200);
  EXPECT_EQ(Runs(dir), 5);

  // A refusal the plugin cannot cure comes back as the API's 401 after one more run.
  api.Accept("tok-5");
  absl::StatusOr<KubeResponse> refused = get();
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->status, 401);
  EXPECT_EQ(Runs(dir), 6);

  // A plugin that is not installed: the kubeconfig's installHint says what to do.
  KubeConfig missing = *cfg;
  missing.exec->command = "tessera-no-such-credential-plugin";
  missing.exec->install_hint = "Install it:\n  apt-get install\tplugin\n";
  KubeClient without(missing, &clock);
  EXPECT_EQ(without.Get("/api/v1/nodes").status().message(),
            "exec plugin tessera-no-such-credential-plugin of kubeconfig user \"u\": "
            "tessera-no-such-credential-plugin: not found in PATH (installHint: Install it: "
            "apt-get install plugin)");
}

TEST(ExecCredentials, AClientCertificateFromThePluginOpensAnMtlsApiServer) {
  testing::TestCerts pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  // Requires a client certificate signed by the CA.
  testing::LocalHttpsServer https(
      [](httplib::SSLServer& s) {
        s.Get("/api/v1/nodes", [](const httplib::Request&, httplib::Response& res) {
          res.set_content(R"({"kind":"NodeList","items":[]})", "application/json");
        });
      },
      pki.server_cert().c_str(), pki.server_key().c_str(), pki.ca().c_str());
  ASSERT_TRUE(https.valid());

  std::string dir = ExecTestDir();
  WritePlugin(dir);
  absl::StatusOr<std::string> cert = ReadFile(pki.client_cert());
  absl::StatusOr<std::string> key = ReadFile(pki.client_key());
  ASSERT_TRUE(cert.ok() && key.ok());
  Answer(dir, {{"clientCertificateData", *cert}, {"clientKeyData", *key}});
  std::ofstream(dir + "/config") << ExecKubeconfig(
      https.url(),
      absl::StrCat("      apiVersion: client.authentication.k8s.io/v1\n",
                   "      command: ./plugin\n      interactiveMode: Never\n",
                   "      provideClusterInfo: true\n", "      env: [{name: DIR, value: '", dir,
                   "'}]\n"),
      absl::StrCat("    certificate-authority: ", pki.ca(), "\n"));
  absl::StatusOr<KubeConfig> cfg = LoadKubeconfig(dir + "/config");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  SimulatedClock clock(kExecNow);
  KubeClient kube(*cfg, &clock);
  absl::StatusOr<KubeResponse> r = kube.Get("/api/v1/nodes");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  // The plugin was given the cluster, its CA as base64 of the file's PEM.
  absl::StatusOr<std::string> info = ReadFile(dir + "/info");
  absl::StatusOr<std::string> ca = ReadFile(pki.ca());
  ASSERT_TRUE(info.ok() && ca.ok());
  nlohmann::json given = nlohmann::json::parse(*info);
  EXPECT_EQ(given["spec"]["cluster"]["server"], https.url());
  EXPECT_EQ(given["spec"]["cluster"]["certificate-authority-data"], absl::Base64Escape(*ca));
  // Without the plugin's certificate the server refuses the handshake.
  KubeConfig anonymous = *cfg;
  anonymous.exec.reset();
  EXPECT_EQ(KubeClient(anonymous, &clock).Get("/api/v1/nodes").status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tessera::adapters
