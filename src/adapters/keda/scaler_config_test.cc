#include "adapters/keda/scaler_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ScalerConfig, TheIssuesExampleAndDefaults) {
  absl::StatusOr<ScalerConfig> c =
      DecodeScalerConfig("scaler.yaml", R"(apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
prometheus: {url: "http://127.0.0.1:9090", timeout: 2s, pollInterval: 5s}
services:
  - name: chat-small
    queueQuery: 'sum(vllm:num_requests_waiting{model_name="chat-small"})'
    utilizationQuery: 'avg(DCGM_FI_DEV_GPU_UTIL{pod=~"chat-small-.*"}) / 100'
    targetQueuePerReplica: 4
    targetUtilization: 0.75
    minReplicas: 0
    maxReplicas: 20
    idleTimeout: 10m
    coldStart: 60s
  - name: embed
    server: triton
    model: e5
    deployment: embed
    namespace: search
  - name: agents
    server: sglang
    model: Qwen/Qwen3-8B
)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->poll_interval, absl::Seconds(5));
  const ServiceConfig& s = c->services[0];
  EXPECT_EQ(s.policy.max_replicas, 20);
  EXPECT_EQ(s.policy.idle_timeout, absl::Minutes(10));
  EXPECT_EQ(s.running_query, "");
  // The Deployment defaults to the service's name (kube-state-metrics for its replicas).
  EXPECT_EQ(s.ready_query,
            "sum(kube_deployment_status_replicas_available{namespace=\"default\",deployment=\"chat-"
            "small\"})");
  EXPECT_EQ(s.utilization_query, "avg(DCGM_FI_DEV_GPU_UTIL{pod=~\"chat-small-.*\"}) / 100");
  const ServiceConfig* e = c->Find("embed");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->queue_query, "sum(nv_inference_pending_request_count{model=\"e5\"})");
  EXPECT_EQ(
      e->ready_query,
      "sum(kube_deployment_status_replicas_available{namespace=\"search\",deployment=\"embed\"})");
  EXPECT_THAT(e->utilization_query, HasSubstr("DCGM_FI_DEV_GPU_UTIL"));
  EXPECT_EQ(e->policy.scale_down_quantile, 1);  // the window's highest, as HPA's
  // SGLang: its scheduler's gauges and finished-request counter, by model_name.
  const ServiceConfig* g = c->Find("agents");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->queue_query, "sum(sglang:num_queue_reqs{model_name=\"Qwen/Qwen3-8B\"})");
  EXPECT_EQ(g->running_query, "sum(sglang:num_running_reqs{model_name=\"Qwen/Qwen3-8B\"})");
  EXPECT_EQ(g->throughput_query,
            "sum(rate(sglang:num_requests_total{model_name=\"Qwen/Qwen3-8B\"}[1m]))");
  EXPECT_EQ(g->ready_query,
            "sum(kube_deployment_status_replicas_available{namespace=\"default\",deployment="
            "\"agents\"})");
}

TEST(ScalerConfig, ErrorsNameTheLineAndField) {
  auto err = [](const std::string& services) {
    return DecodeScalerConfig("s.yaml",
                              "apiVersion: tessera.io/v1alpha1\nkind: ScalerConfig\n"
                              "prometheus: {url: 'http://p:9090'}\nservices:\n" +
                                  services)
        .status();
  };
  EXPECT_THAT(err("  - {name: a, server: vllm, deployment: a, targetUtilization: 1.5}").message(),
              HasSubstr("s.yaml:5"));
  EXPECT_THAT(err("  - {name: a, server: vllm, deployment: a, idleTimeout: soon}").message(),
              HasSubstr("idleTimeout"));
  EXPECT_THAT(err("  - {name: a, server: ollama}").message(),
              HasSubstr("expected vllm, triton, tgi or sglang"));
  EXPECT_THAT(err("  - {name: a, server: vllm, deployment: ''}").message(),
              HasSubstr("readyQuery is required"));
  EXPECT_THAT(err("  - {name: a, deployment: a}").message(), HasSubstr("queueQuery is required"));
  EXPECT_THAT(err("  - {name: a, server: vllm, deployment: a, colour: blue}").message(),
              HasSubstr("colour"));
  EXPECT_THAT(err("  - {name: a, server: vllm, deployment: a}\n  - {name: a, server: vllm, "
                  "deployment: b}")
                  .message(),
              HasSubstr("unique"));
  EXPECT_THAT(
      err("  - {name: a, server: vllm, deployment: a, minReplicas: 5, maxReplicas: 2}").message(),
      HasSubstr("maxReplicas"));
  EXPECT_FALSE(DecodeScalerConfig("s.yaml", "kind: Fleet\n").ok());
  EXPECT_THAT(err("  - {name: a, server: vllm, deployment: a, scaleDownQuantile: 0}").message(),
              AllOf(HasSubstr("s.yaml:5"), HasSubstr("scaleDownQuantile"), HasSubstr("0.01 to 1")));
}

TEST(ScalerConfig, AScaleDownQuantileIsRead) {
  absl::StatusOr<ScalerConfig> c = DecodeScalerConfig(
      "s.yaml",
      "apiVersion: tessera.io/v1alpha1\nkind: ScalerConfig\nprometheus: {url: 'http://p:9090'}\n"
      "services:\n  - {name: a, server: vllm, deployment: a, scaleDownWindow: 20m, "
      "scaleDownQuantile: 0.85}\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->services[0].policy.scale_down_quantile, 0.85);
  EXPECT_EQ(c->services[0].policy.scale_down_window, absl::Minutes(20));
}

TEST(ScalerConfig, SeasonalPeriodsAreAListAndAnEmptyOneTurnsTheRuleOff) {
  auto service = [](const std::string& knobs) {
    return DecodeScalerConfig("s.yaml",
                              "apiVersion: tessera.io/v1alpha1\nkind: ScalerConfig\n"
                              "prometheus: {url: 'http://p:9090'}\nservices:\n"
                              "  - {name: a, server: vllm, deployment: a" +
                                  knobs + "}\n");
  };
  absl::StatusOr<ScalerConfig> c = service("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->services[0].policy.seasonal_periods,
            (std::vector<absl::Duration>{absl::Hours(1), absl::Hours(24)}));
  EXPECT_EQ(c->services[0].policy.seasonal_repeats, 3);
  c = service(", seasonalPeriods: [30m, 168h], seasonalRepeats: 2");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->services[0].policy.seasonal_periods,
            (std::vector<absl::Duration>{absl::Minutes(30), absl::Hours(168)}));
  EXPECT_EQ(c->services[0].policy.seasonal_repeats, 2);
  c = service(", seasonalPeriods: []");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->services[0].policy.seasonal_periods.empty());
  EXPECT_THAT(service(", seasonalPeriods: [1h, hourly]").status().message(),
              HasSubstr("expected a duration"));
  EXPECT_THAT(service(", seasonalPeriods: 1h").status().message(), HasSubstr("s.yaml:5"));
  EXPECT_THAT(service(", seasonalPeriods: [90s]").status().message(),
              HasSubstr("seasonalPeriods: expected durations of whole minutes"));
  EXPECT_THAT(service(", seasonalRepeats: 0").status().message(), HasSubstr("seasonalRepeats"));
}

absl::StatusOr<ScalerConfig> WithPrometheus(const std::string& prometheus) {
  return DecodeScalerConfig("s.yaml",
                            "apiVersion: tessera.io/v1alpha1\nkind: ScalerConfig\n" + prometheus +
                                "services:\n  - {name: a, queueQuery: q, readyQuery: r}\n");
}

TEST(ScalerConfig, PollIntervalAndTimeoutBounds) {
  EXPECT_TRUE(WithPrometheus("prometheus: {url: 'http://p:9090', pollInterval: 100ms}\n").ok());
  absl::Status fast =
      WithPrometheus("prometheus: {url: 'http://p:9090', pollInterval: 5ms}\n").status();
  EXPECT_THAT(fast.message(), HasSubstr("s.yaml:3"));
  EXPECT_THAT(fast.message(), HasSubstr("pollInterval: expected at least 100ms"));
  EXPECT_THAT(
      WithPrometheus("prometheus: {url: 'http://p:9090', timeout: 0s}\n").status().message(),
      HasSubstr("timeout: expected above 0"));
}

// queryOffset: 0 by default; bounded; and no service may call a decision stale before the next
// one comes (it is queryOffset old when made).
TEST(ScalerConfig, QueryOffsetBoundedAndWithinEveryServicesStaleAfter) {
  absl::StatusOr<ScalerConfig> c = WithPrometheus("prometheus: {url: 'http://p:9090'}\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->query_offset, absl::ZeroDuration());
  c = WithPrometheus("prometheus: {url: 'http://p:9090', queryOffset: 2s}\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->query_offset, absl::Seconds(2));
  for (const char* bad : {"-1s", "6m"}) {  // a duration; from 0s to 5m
    absl::Status s =
        WithPrometheus(absl::StrCat("prometheus: {url: 'http://p:9090', queryOffset: ", bad, "}\n"))
            .status();
    EXPECT_THAT(s.message(), HasSubstr("s.yaml:3")) << bad;
    EXPECT_THAT(s.message(), HasSubstr("prometheus.queryOffset: expected ")) << bad;
  }
  // staleAfter defaults to 60s: 55 s + 5 s reaches it.
  absl::Status stale =
      WithPrometheus("prometheus: {url: 'http://p:9090', queryOffset: 55s}\n").status();
  EXPECT_THAT(stale.message(), HasSubstr("s.yaml:5"));
  EXPECT_THAT(stale.message(),
              HasSubstr("staleAfter: expected above prometheus.queryOffset + pollInterval (1m)"));
  EXPECT_TRUE(WithPrometheus("prometheus: {url: 'http://p:9090', queryOffset: 54s}\n").ok());
}

TEST(ScalerConfig, BackfillIsOnByDefaultAndItsTimeoutBounded) {
  absl::StatusOr<ScalerConfig> c = WithPrometheus("prometheus: {url: 'http://p:9090'}\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->backfill);
  EXPECT_EQ(c->prometheus.range_timeout_ms, 30000);
  c = WithPrometheus("prometheus: {url: 'http://p:9090', backfill: false, backfillTimeout: 2m}\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->backfill);
  EXPECT_EQ(c->prometheus.range_timeout_ms, 120000);
  EXPECT_THAT(
      WithPrometheus("prometheus: {url: 'http://p:9090', backfill: yes}\n").status().message(),
      HasSubstr("prometheus.backfill: expected true or false"));
  EXPECT_THAT(WithPrometheus("prometheus: {url: 'http://p:9090', backfillTimeout: 0s}\n")
                  .status()
                  .message(),
              HasSubstr("backfillTimeout: expected above 0 and at most 10m"));
  EXPECT_THAT(WithPrometheus("prometheus: {url: 'http://p:9090', backfillTimeout: 1h}\n")
                  .status()
                  .message(),
              HasSubstr("backfillTimeout: expected above 0 and at most 10m"));
}

TEST(ScalerConfig, PrometheusBehindAuthenticationAndTls) {
  absl::StatusOr<ScalerConfig> c = WithPrometheus(R"(prometheus:
  url: https://thanos-querier.openshift-monitoring.svc:9091
  bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
  headers: {X-Scope-OrgID: team-a}
  tls: {caFile: /etc/prom/ca.crt, certFile: /etc/prom/tls.crt, keyFile: /etc/prom/tls.key}
)");
  ASSERT_TRUE(c.ok()) << c.status();
  const PromConfig& p = c->prometheus;
  EXPECT_EQ(p.url, "https://thanos-querier.openshift-monitoring.svc:9091");
  EXPECT_EQ(p.timeout_ms, 2000);
  EXPECT_EQ(p.bearer_token_file, "/var/run/secrets/kubernetes.io/serviceaccount/token");
  EXPECT_EQ(p.headers, std::vector<std::string>{"X-Scope-OrgID: team-a"});
  EXPECT_EQ(p.tls.ca_file, "/etc/prom/ca.crt");
  EXPECT_EQ(p.tls.client_key_file, "/etc/prom/tls.key");
  EXPECT_FALSE(p.tls.insecure_skip_verify);
  // None of those files is here: all named, so the scaler refuses to start.
  std::vector<std::string> bad = c->UnreadableFiles();
  ASSERT_EQ(bad.size(), 4u);
  EXPECT_THAT(bad[0], HasSubstr("prometheus.bearerTokenFile: "));
  EXPECT_THAT(bad[0], HasSubstr("serviceaccount/token"));

  c = WithPrometheus(R"(prometheus:
  url: http://prom:9090
  basicAuth: {username: tessera, passwordFile: /etc/prom/password}
)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->prometheus.basic_username, "tessera");
  EXPECT_EQ(c->prometheus.basic_password_file, "/etc/prom/password");

  auto err = [](const std::string& prometheus) {
    absl::StatusOr<ScalerConfig> r = WithPrometheus(prometheus);
    return r.ok() ? std::string("decoded") : std::string(r.status().message());
  };
  EXPECT_THAT(err("prometheus:\n  url: http://p\n  bearerTokenFile: /t\n"
                  "  basicAuth: {username: u, passwordFile: /p}\n"),
              HasSubstr("s.yaml:6:14: prometheus.basicAuth: give either bearerTokenFile or "
                        "basicAuth, not both"));
  EXPECT_THAT(
      err("prometheus:\n  url: http://p\n  basicAuth: {username: 'a:b', passwordFile: /p}\n"),
      HasSubstr("username: expected a user name without ':'"));
  EXPECT_THAT(err("prometheus:\n  url: http://p\n  headers: {'X Tenant': a}\n"),
              HasSubstr("\"X Tenant\": expected an HTTP header name"));
  EXPECT_THAT(err("prometheus:\n  url: http://p\n  headers: {X-Tenant: \"a\\r\\nEvil: 1\"}\n"),
              HasSubstr("X-Tenant: a header value must be one line"));
  EXPECT_THAT(err("prometheus:\n  url: http://p\n  bearerTokenFile: /t\n"
                  "  headers: {authorization: Bearer x}\n"),
              HasSubstr("Authorization comes from the credentials given here"));
  // Amazon Managed Service for Prometheus: the workspace's URL, requests signed for a region.
  c = WithPrometheus(R"(prometheus:
  url: https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0a1b2c3d/
  sigv4: {region: us-west-2}
)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->prometheus.url,
            "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0a1b2c3d");
  EXPECT_EQ(c->prometheus.sigv4_region, "us-west-2");
  EXPECT_TRUE(c->UnreadableFiles().empty());
  EXPECT_THAT(err("prometheus:\n  url: http://p\n  sigv4: {region: US West}\n"),
              HasSubstr("s.yaml:5:19: prometheus.sigv4.region: expected an AWS region such as "
                        "us-west-2, found \"US West\""));
  EXPECT_THAT(err("prometheus:\n  url: http://p\n  sigv4: {}\n"),
              HasSubstr("prometheus.sigv4.region"));
  EXPECT_TRUE(c->prometheus.sigv4_role_arn.empty());
  // A workspace in another account: queried as a role there.
  c = WithPrometheus(
      "prometheus:\n  url: http://p\n  sigv4: {region: us-west-2, roleArn: "
      "'arn:aws:iam::111122223333:role/monitoring/amp-query'}\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->prometheus.sigv4_role_arn, "arn:aws:iam::111122223333:role/monitoring/amp-query");
  for (const char* bad : {"x", "arn:aws:iam::1111:role/r", "arn:aws:iam::111122223333:user/u",
                          "arn:aws:s3:::bucket", "arn:aws:iam::111122223333:role/"}) {
    EXPECT_THAT(err(absl::StrCat("prometheus:\n  url: http://p\n  sigv4: {region: us-west-2, "
                                 "roleArn: '",
                                 bad, "'}\n")),
                HasSubstr(absl::StrCat("prometheus.sigv4.roleArn: expected an IAM role ARN such as "
                                       "arn:aws:iam::111122223333:role/amp-query, found \"",
                                       bad, "\"")));
  }
  EXPECT_THAT(err("prometheus:\n  url: http://p\n  bearerTokenFile: /t\n"
                  "  sigv4: {region: us-west-2}\n"),
              HasSubstr("s.yaml:6:10: prometheus.sigv4: give one of bearerTokenFile, basicAuth, "
                        "sigv4, googleWorkloadIdentity and azureWorkloadIdentity; found "
                        "bearerTokenFile too"));
  // Google Cloud Managed Service for Prometheus and Azure Monitor: a token from the pod's
  // cloud identity.
  c = WithPrometheus(R"(prometheus:
  url: https://monitoring.googleapis.com/v1/projects/my-project/location/global/prometheus
  googleWorkloadIdentity: {}
)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->prometheus.cloud_identity, CloudIdentity::kGoogle);
  c = WithPrometheus(R"(prometheus:
  url: https://my-workspace-a1b2.eastus.prometheus.monitor.azure.com
  azureWorkloadIdentity: {}
)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->prometheus.cloud_identity, CloudIdentity::kAzure);
  EXPECT_EQ(c->prometheus.cloud_scope, "https://prometheus.monitor.azure.com/.default");
  c = WithPrometheus(R"(prometheus:
  url: https://w.chinaeast2.prometheus.monitor.azure.cn
  azureWorkloadIdentity: {scope: "https://prometheus.monitor.azure.cn/.default"}
)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->prometheus.cloud_scope, "https://prometheus.monitor.azure.cn/.default");
  EXPECT_THAT(err("prometheus:\n  url: http://p\n  googleWorkloadIdentity: {}\n"
                  "  azureWorkloadIdentity: {}\n"),
              HasSubstr("prometheus.azureWorkloadIdentity: give one of"));
  EXPECT_THAT(err("prometheus:\n  url: http://p\n  googleWorkloadIdentity: {project: x}\n"),
              HasSubstr("project"));
  EXPECT_THAT(err("prometheus:\n  url: http://p\n  googleWorkloadIdentity: true\n"),
              HasSubstr("prometheus.googleWorkloadIdentity"));
  EXPECT_THAT(err("prometheus:\n  url: http://p\n  azureWorkloadIdentity: {scope: 'a b'}\n"),
              HasSubstr("prometheus.azureWorkloadIdentity.scope: expected one OAuth scope"));
  EXPECT_THAT(err("prometheus:\n  url: http://p\n  sigv4: {region: us-west-2}\n"
                  "  headers: {Authorization: Bearer x}\n"),
              HasSubstr("Authorization comes from the credentials given here"));
  EXPECT_THAT(err("prometheus:\n  url: http://p\n  tls: {caFile: /ca}\n"),
              HasSubstr("prometheus.tls: applies to an https:// url only"));
  EXPECT_THAT(err("prometheus:\n  url: https://p\n  tls: {certFile: /c}\n"),
              HasSubstr("certFile and keyFile go together"));
  EXPECT_THAT(err("prometheus:\n  url: https://p\n  tls: {insecureSkipVerify: maybe}\n"),
              HasSubstr("insecureSkipVerify: expected true or false"));
  EXPECT_THAT(err("prometheus:\n  url: https://u:pw@p:9090/prom\n"),
              HasSubstr("prometheus.url: credentials in the URL are not accepted"));
  EXPECT_THAT(err("prometheus:\n  url: https://p\n  bearerToken: abc\n"),
              HasSubstr("bearerToken"));  // a token inline in the config is not accepted
}

}  // namespace
}  // namespace tessera::adapters
