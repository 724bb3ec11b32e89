#include "adapters/keda/scaledobject_check.h"

#include <string>

#include "adapters/io/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;

ScalerConfig PairingConfig(const std::string& extra = "") {
  absl::StatusOr<ScalerConfig> c =
      DecodeScalerConfig("scaler.yaml", R"(apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
prometheus: {url: "http://127.0.0.1:9090"}
)" + extra + R"(services:
  - name: chat-small
    server: vllm
    model: chat-small
    maxReplicas: 20
  - name: embed
    server: vllm
    model: embed
    minReplicas: 2
    maxReplicas: 200
)");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

// The findings' "where: message" lines, errors first marked.
std::vector<std::string> Lines(const PairingReport& r) {
  std::vector<std::string> out;
  for (const PairingFinding& f : r.findings) {
    out.push_back((f.error ? "error " : "warning ") + f.where + ": " + f.message);
  }
  return out;
}

TEST(ScaledObjectCheck, TheShippedScaledObjectPairsWithTheShippedConfigWithNothingToSay) {
  const std::string dir = std::string(TESSERA_SOURCE_DIR) + "/deploy/scaler/";
  absl::StatusOr<std::string> config_text = ReadFile(dir + "scaler.yaml");
  absl::StatusOr<std::string> so = ReadFile(dir + "scaledobject.yaml");
  ASSERT_TRUE(config_text.ok() && so.ok());
  absl::StatusOr<ScalerConfig> config = DecodeScalerConfig("scaler.yaml", *config_text);
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<PairingReport> r = CheckScaledObjects(*config, "scaledobject.yaml", *so);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->objects.size(), 1u);
  EXPECT_EQ(r->objects[0].object, "default/chat-small");
  EXPECT_EQ(r->objects[0].service, "chat-small");
  EXPECT_THAT(Lines(*r), ::testing::IsEmpty());
}

// A ScaledObject written with KEDA's defaults (no behavior, no fallback behavior, no
// pollingInterval or cooldownPeriod) against a service that scales to zero: it works, and each
// default that changes Tessera's decisions is named where it is (or would be) written.
TEST(ScaledObjectCheck, KedasDefaultsAreNamedWithWhatTheyChange) {
  absl::StatusOr<PairingReport> r = CheckScaledObjects(PairingConfig(), "so.yaml", R"(
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: chat, namespace: ml}
spec:
  scaleTargetRef: {name: chat-small}
  fallback: {failureThreshold: 3, replicas: 2}
  triggers:
    - type: external
      metadata: {scalerAddress: "tessera-scaler:9095", service: chat-small}
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->errors(), 0);
  EXPECT_THAT(
      Lines(*r),
      ::testing::ElementsAre(
          HasSubstr("warning so.yaml:6:3: spec.cooldownPeriod: 300 s (KEDA's default): KEDA "
                    "scales to zero this long after Tessera's IsActive turned false"),
          HasSubstr("warning so.yaml:6:3: spec.pollingInterval: 30 s (KEDA's default): at zero "
                    "KEDA asks IsActive this often"),
          HasSubstr("warning so.yaml:7:13: spec.fallback: behavior static (KEDA's default): "
                    "while Tessera answers UNAVAILABLE (Prometheus down or stale) KEDA sets "
                    "exactly fallback.replicas (2)"),
          HasSubstr("warning so.yaml:6:3: spec.advanced.horizontalPodAutoscalerConfig.behavior."
                    "scaleDown: 300 s "
                    "(HPA's default): HPA holds its highest recommendation this long"),
          // HPA's default 100% or 4 pods per sync is Tessera's step, but Tessera decides every
          // pollInterval (5 s) and its steps compound within the sync.
          HasSubstr("behavior.scaleUp: HPA lets one sync go from 1 to 5 replicas where Tessera "
                    "may decide 20 within it (3 decisions, pollInterval 5s) (scaleUpStep 4, "
                    "scaleUpRatio 1)")));
}

TEST(ScaledObjectCheck, WhatBreaksThePairingIsAnErrorAtItsField) {
  absl::StatusOr<PairingReport> r = CheckScaledObjects(
      PairingConfig("tls: {certFile: /tls/tls.crt, keyFile: /tls/tls.key, clientCAFile: "
                    "/tls/ca.crt}\n"),
      "so.yaml", R"(apiVersion: v1
kind: List
items:
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: chat}
  - apiVersion: keda.sh/v1alpha1
    kind: ScaledObject
    metadata: {name: chat}
    spec:
      pollingInterval: 10
      cooldownPeriod: 30
      fallback: {failureThreshold: 3, replicas: 2, behavior: currentReplicasIfHigher}
      triggers:
        - type: external
          metricType: Value
          metadata: {service: chat-large}
  - apiVersion: keda.sh/v1alpha1
    kind: ScaledObject
    metadata: {name: queue-worker, namespace: jobs}
    spec:
      triggers: [{type: rabbitmq, metadata: {queueName: q}}]
)");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->objects.size(), 2u);
  EXPECT_EQ(r->objects[0].service, "chat-large");
  EXPECT_EQ(r->objects[1].object, "jobs/queue-worker");
  EXPECT_EQ(r->objects[1].service, "");  // not paired: nothing said of it
  const std::vector<std::string> lines = Lines(*r);
  EXPECT_THAT(lines[0], HasSubstr("error so.yaml:17:31: items[1].spec.triggers[0].metadata."
                                  "service: service \"chat-large\" is not in the scaler's config "
                                  "(its services: chat-small, embed)"));
  EXPECT_THAT(lines[1], HasSubstr("error so.yaml:16:23: items[1].spec.triggers[0].metricType: "
                                  "Value: Tessera's metric is the replica count with target 1"));
  EXPECT_THAT(lines[2], HasSubstr("metadata.scalerAddress: missing"));
  EXPECT_THAT(lines[3], HasSubstr("metadata.enableTLS: the scaler serves TLS"));
  EXPECT_THAT(lines[4], HasSubstr("authenticationRef: missing: the scaler asks for client "
                                  "certificates"));
  EXPECT_EQ(r->errors(), 5);
}

// Against a service's own knobs: its floor, its ceiling, and HPA rules slower than its steps.
TEST(ScaledObjectCheck, TheServicesFloorCeilingAndStepsAgainstHpas) {
  absl::StatusOr<PairingReport> r = CheckScaledObjects(PairingConfig(), "so.yaml", R"(
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: embed}
spec:
  minReplicaCount: 3
  maxReplicaCount: 50
  fallback: {failureThreshold: 3, replicas: 2, behavior: currentReplicas}
  advanced:
    horizontalPodAutoscalerConfig:
      behavior:
        scaleUp:
          stabilizationWindowSeconds: 60
          policies: [{type: Pods, value: 2, periodSeconds: 60}]
        scaleDown:
          stabilizationWindowSeconds: 0
          selectPolicy: Min
          policies: [{type: Percent, value: 100, periodSeconds: 15}, {type: Pods, value: 1, periodSeconds: 15}]
  triggers:
    - type: external-push
      metadata: {scalerAddress: "tessera-scaler:9095", service: embed}
    - type: cpu
      metricType: Utilization
      metadata: {value: "60"}
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->errors(), 0);
  EXPECT_THAT(
      Lines(*r),
      ::testing::ElementsAre(
          HasSubstr("spec.triggers[1]: another trigger (cpu): HPA scales to the highest"),
          HasSubstr("spec.minReplicaCount: 3: above the service's minReplicas 2"),
          HasSubstr("spec.maxReplicaCount: 50: below the service's maxReplicas 200"),
          HasSubstr("scaleUp.stabilizationWindowSeconds: 60 s: HPA waits this long"),
          // From its floor of 2 on: 4 -> 6 in HPA's 60 s period, 4 -> 8 -> 16 -> 32 by Tessera.
          HasSubstr("scaleUp: HPA lets one sync go from 4 to 6 replicas (its policies' period 60 "
                    "s) where Tessera may decide 32 within it"),
          // selectPolicy Min: the policy changing least, a pod per sync; Tessera releases 2.
          HasSubstr("scaleDown: HPA lets one sync go from 4 down to 3 replicas where Tessera may "
                    "decide 2 within it")));
}

TEST(ScaledObjectCheck, InputThatHoldsNoScaledObjectOrIsNotYamlIsRefused) {
  EXPECT_THAT(
      CheckScaledObjects(PairingConfig(), "d.yaml", "apiVersion: apps/v1\nkind: Deployment\n")
          .status()
          .message(),
      HasSubstr("d.yaml: no ScaledObject (apiVersion keda.sh/v1alpha1, kind ScaledObject)"));
  EXPECT_THAT(CheckScaledObjects(PairingConfig(), "b.yaml", "a: [1, 2\n").status().message(),
              HasSubstr("b.yaml:"));
  // A malformed field is an error at it; the rest is still checked.
  absl::StatusOr<PairingReport> r = CheckScaledObjects(PairingConfig(), "so.yaml", R"(
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: chat}
spec:
  minReplicaCount: lots
  pollingInterval: 10
  cooldownPeriod: 30
  fallback: {failureThreshold: 3, replicas: 2, behavior: currentReplicasIfHighest}
  advanced: {horizontalPodAutoscalerConfig: {behavior: {scaleDown: {stabilizationWindowSeconds: 0}}}}
  triggers:
    - type: external
      metadata: {scalerAddress: "tessera-scaler:9095", service: chat-small}
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Lines(*r),
              ::testing::ElementsAre(
                  HasSubstr("error so.yaml:6:20: spec.minReplicaCount: expected an integer"),
                  HasSubstr("error so.yaml:9:58: spec.fallback.behavior: "
                            "currentReplicasIfHighest: expected static, currentReplicas, "
                            "currentReplicasIfHigher or currentReplicasIfLower"),
                  HasSubstr("scaleUp: HPA lets one sync go from 1 to 5")));
}

TEST(ScaledObjectCheck, ASelectPolicyHpaDoesNotHaveIsAnError) {
  absl::StatusOr<PairingReport> r = CheckScaledObjects(PairingConfig(), "so.yaml", R"(
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: chat}
spec:
  pollingInterval: 10
  cooldownPeriod: 30
  advanced:
    horizontalPodAutoscalerConfig:
      behavior:
        scaleDown: {stabilizationWindowSeconds: 0, selectPolicy: max}
  triggers:
    - type: external
      metadata: {scalerAddress: "tessera-scaler:9095", service: chat-small}
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->errors(), 1);
  EXPECT_THAT(Lines(*r), ::testing::Contains(HasSubstr(
                             "error so.yaml:11:66: spec.advanced.horizontalPodAutoscalerConfig."
                             "behavior.scaleDown.selectPolicy: \"max\": expected Max, Min or "
                             "Disabled")));
}

}  // namespace
}  // namespace tessera::adapters
