// The admission webhook's cost per pod created (the API server waits for it on every CREATE of a
// pod, sharing or not): a ReplicaSet's pod as the API server sends it, with a vLLM container, a
// sidecar of another image and an init container, answered with its JSON Patch, without the
// HTTPS hop. Arg 0: the env only; 1: with the MPS daemons (volumes, mounts, the user mark, the
// sidecar left outside MPS); 2: a pod that asks for no share (let through unchanged).
#include <string>

#include "adapters/k8s/admission.h"
#include "benchmark/benchmark.h"
#include "nlohmann/json.hpp"

namespace tessera::adapters {
namespace {

using nlohmann::json;

std::string ReviewBody(bool share) {
  auto env_from = [](const char* name, const char* path) {
    return json{{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
  };
  json vllm = {{"name", "vllm"},
               {"image", "vllm/vllm-openai:v0.6.3"},
               {"args", json::array({"--model=/models/chat-small", "--max-model-len=8192",
                                     "--gpu-memory-utilization=$(TESSERA_GPU_MEMORY_FRACTION)"})},
               {"env", json::array({env_from("POD_NAME", "metadata.name"),
                                    {{"name", "HF_HUB_OFFLINE"}, {"value", "1"}}})},
               {"ports", json::array({{{"name", "http"}, {"containerPort", 8000}}})},
               {"resources", {{"requests", {{"cpu", "4"}, {"memory", "32Gi"}}}}},
               {"volumeMounts",
                json::array({{{"name", "kube-api-access-x7k2p"},
                              {"readOnly", true},
                              {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"}},
                             {{"name", "models"}, {"mountPath", "/models"}, {"readOnly", true}}})},
               {"terminationMessagePath", "/dev/termination-log"},
               {"imagePullPolicy", "IfNotPresent"}};
  json sidecar = {{"name", "metrics-proxy"},
                  {"image", "nginx:1.27"},
                  {"env", json::array({{{"name", "LISTEN"}, {"value", "9100"}}})},
                  {"resources", json::object()}};
  json init = {{"name", "fetch-weights"},
               {"image", "ghcr.io/tessera/tessera:latest"},
               {"args", json::array({"fetch", "s3://models/chat-small/", "--to=/models"})},
               {"volumeMounts", json::array({{{"name", "models"}, {"mountPath", "/models"}}})}};
  json annotations = json::object();
  if (share) {
    annotations = {{"tessera.io/gpu-memory", "30Gi"}, {"tessera.io/gpu-compute", "0.2"}};
  }
  json pod = {
      {"metadata",
       {{"generateName", "chat-small-7d9f8b6c5-"},
        {"namespace", "inference"},
        {"labels", {{"app", "chat-small"}, {"pod-template-hash", "7d9f8b6c5"}}},
        {"annotations", annotations},
        {"ownerReferences", json::array({{{"apiVersion", "apps/v1"},
                                          {"kind", "ReplicaSet"},
                                          {"name", "chat-small-7d9f8b6c5"},
                                          {"uid", "5b7a3c1e-0d4f-4e2a-9b8c-7f6e5d4c3b2a"},
                                          {"controller", true}}})}}},
      {"spec",
       {{"initContainers", json::array({init})},
        {"containers", json::array({vllm, sidecar})},
        {"volumes",
         json::array({{{"name", "kube-api-access-x7k2p"}, {"projected", {{"defaultMode", 420}}}},
                      {{"name", "models"}, {"emptyDir", json::object()}}})},
        {"restartPolicy", "Always"},
        {"schedulerName", "default-scheduler"},
        {"priority", 0}}}};
  json review = {
      {"apiVersion", "admission.k8s.io/v1"},
      {"kind", "AdmissionReview"},
      {"request",
       {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
        {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
        {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
        {"namespace", "inference"},
        {"operation", "CREATE"},
        {"userInfo", {{"username", "system:serviceaccount:kube-system:replicaset-controller"}}},
        {"object", pod},
        {"dryRun", false}}}};
  return review.dump();
}

void BM_AdmissionReviewPod(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  const std::string body = ReviewBody(mode != 2);
  AdmissionOptions options;
  if (mode == 1) options.mps_directory = "/run/tessera/mps";
  for (auto _ : state) {
    absl::StatusOr<std::string> reply = ReviewAdmission(body, options);
    if (!reply.ok()) {
      state.SkipWithError(std::string(reply.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(reply);
  }
}
BENCHMARK(BM_AdmissionReviewPod)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tessera::adapters
