#include "adapters/keda/scaler_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

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
  EXPECT_THAT(err("  - {name: a, server: sglang}").message(), HasSubstr("vllm, triton or tgi"));
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
}

}  // namespace
}  // namespace tessera::adapters
