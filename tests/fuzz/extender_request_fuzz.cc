// libFuzzer target: the scheduler extender's decoders of untrusted HTTP bodies (ExtenderArgs,
// ExtenderBindingArgs, ExtenderPreemptionArgs, the gpu-assignment annotation, the API server's pod
// and node lists, PodDisruptionBudget lists and pod watch events, the kubeconfig it is given, what
// the kubeconfig's exec credential plugin prints, and the admission webhook's AdmissionReview)
// and the cluster decisions on what they decode must return a value or a Status for any input,
// never crash, hang or leak.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "adapters/k8s/admission.h"
#include "adapters/k8s/exec_credentials.h"
#include "adapters/k8s/extender_protocol.h"
#include "adapters/k8s/kube_client.h"
#include "placement/gpushare/online_cluster.h"
#include "placement/gpushare/tessera_policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  using namespace tessera;
  (void)adapters::DecodeBindingArgs(text);
  (void)adapters::DecodeAssignment(text);
  // The webhook's answer, when there is one, is JSON, and the outcome its metrics count is the
  // answer's: patched when it carries a patch, refused when it does not allow the pod. A patch
  // applies to the pod it was made for (RFC 6902, as the API server applies it). Without and with
  // the MPS daemons' volumes.
  adapters::AdmissionOptions with_mps;
  with_mps.mps_directory = "/run/tessera/mps";
  for (const adapters::AdmissionOptions& options : {adapters::AdmissionOptions{}, with_mps}) {
    adapters::ReviewOutcome outcome = adapters::ReviewOutcome::kUnchanged;
    absl::StatusOr<std::string> reply = adapters::ReviewAdmission(text, options, &outcome);
    if (!reply.ok()) continue;
    nlohmann::json r = nlohmann::json::parse(*reply, nullptr, false);
    if (r.is_discarded() || !r["response"].is_object()) __builtin_trap();
    const nlohmann::json& response = r["response"];
    const bool patched = response.contains("patch");
    const bool refused = response.value("allowed", true) == false;
    if (patched != (outcome == adapters::ReviewOutcome::kPatched) ||
        refused != (outcome == adapters::ReviewOutcome::kRefused)) {
      __builtin_trap();
    }
    if (patched) {
      std::string decoded;
      if (!absl::Base64Unescape(response["patch"].get<std::string>(), &decoded)) __builtin_trap();
      nlohmann::json patch = nlohmann::json::parse(decoded, nullptr, false);
      if (patch.is_discarded()) __builtin_trap();
      nlohmann::json request;
      try {
        request = nlohmann::json::parse(text)["request"];
        (void)request["object"].patch(patch);
      } catch (const nlohmann::json::exception&) {
        __builtin_trap();
      }
      // An update of the ephemeralcontainers subresource may change nothing but the ephemeral
      // containers (the API server refuses it otherwise).
      if (request.value("subResource", nlohmann::json()) == "ephemeralcontainers") {
        for (const nlohmann::json& op : patch) {
          if (!absl::StartsWith(op["path"].get<std::string>(), "/spec/ephemeralContainers/")) {
            __builtin_trap();
          }
        }
      }
    }
  }
  // What the API server answers when the extender rebuilds its state (pods, nodes) and follows
  // it (the pod and node watches' events).
  std::string next, version;
  (void)adapters::DecodePodList(text, &next, &version);
  (void)adapters::DecodePodEvent(text);
  (void)adapters::DecodeNodeEvent(text);
  (void)adapters::DecodeNodeListJson(text, &next);
  if (auto budgets = adapters::DecodeDisruptionBudgetList(text, &next); budgets.ok()) {
    for (const auto& b : *budgets) (void)b.Covers(b.ns, "p", b.selector.match_labels);
  }
  (void)adapters::DecodeKubeconfig("kubeconfig", text);
  for (const char* version : {adapters::kExecCredentialV1, adapters::kExecCredentialV1Beta1}) {
    (void)adapters::ParseExecCredential(version, text, absl::UnixEpoch());
  }
  absl::StatusOr<adapters::ExtenderArgs> args = adapters::DecodeExtenderArgs(text);
  if (args.ok()) {
    placement::gpushare::OnlineCluster c(placement::gpushare::MakeTesseraPolicy());
    if (args->nodes.has_value()) {
      for (const auto& n : *args->nodes) c.UpsertNode(n);
    }
    // A pod of the same request nominated where this one says it is, kept from it.
    const adapters::PodInfo& pod = args->pod;
    c.Nominate("n", "ns/n", pod.request, pod.priority, pod.nominated_node);
    (void)adapters::EncodeFilterResult(*args,
                                       c.Filter(pod.request, args->names(), pod.uid, pod.priority));
    (void)c.Prioritize(pod.request, args->names());
    for (const std::string& n : args->names()) (void)c.Reserve(pod.uid, pod.request, n, 0);
    if (pod.assignment.has_value() && c.Restore("x", *pod.assignment).ok()) {
      c.SetImportance("x", pod.priority, pod.started, pod.ending);
      (void)c.Filter(pod.request, args->names(), "y", pod.priority);
      c.Release("x");
    }
  }
  // kube-scheduler's preempt verb: its victims, decided on a cluster holding the preemptor's own
  // recorded assignment (when it has one) at priority 0, ending if the preemptor is, with a pod
  // of its request nominated where it says.
  absl::StatusOr<adapters::PreemptionArgs> preempt = adapters::DecodePreemptionArgs(text);
  if (preempt.ok()) {
    placement::gpushare::OnlineCluster c(placement::gpushare::MakeTesseraPolicy());
    std::map<std::string, std::vector<std::string>> chosen;
    for (const auto& [node, v] : preempt->victims) {
      c.UpsertNode(
          {.name = node, .gpus = 8, .model = "H100-80GB", .gpu_memory_bytes = int64_t{80} << 30});
      chosen[node] = v.uids;
    }
    const adapters::PodInfo& pod = preempt->pod;
    if (pod.assignment.has_value()) (void)c.Restore("x", *pod.assignment);
    c.SetImportance("x", 0, absl::InfiniteFuture(), pod.ending);
    c.Nominate("n", "ns/n", pod.request, pod.priority, pod.nominated_node);
    std::map<std::string, adapters::NodeVictims> result;
    // Every pod under one budget that allows no disruption but a pod with the preemptor's labels.
    placement::gpushare::DisruptionBudgets budgets;
    budgets.allowed = {static_cast<int32_t>(pod.labels.size())};
    budgets.of = [](const std::string&) { return std::vector<int>{0}; };
    std::map<std::string, int64_t> violations;
    for (auto& [node, uids] :
         c.PreemptionVictims(pod.request, pod.priority, chosen, "p", &budgets, &violations)) {
      result[node].uids = std::move(uids);
    }
    (void)adapters::EncodePreemptionResult(result);
  }
  return 0;
}
