// libFuzzer target: the scheduler extender's decoders of untrusted HTTP bodies (ExtenderArgs,
// ExtenderBindingArgs, ExtenderPreemptionArgs, the gpu-assignment annotation, the API server's pod
// and node lists and pod watch events, the kubeconfig it is given) and the cluster decisions on
// what they decode must return a value or a Status for any input, never crash, hang or leak.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "adapters/k8s/extender_protocol.h"
#include "adapters/k8s/kube_client.h"
#include "placement/gpushare/online_cluster.h"
#include "placement/gpushare/tessera_policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  using namespace tessera;
  (void)adapters::DecodeBindingArgs(text);
  (void)adapters::DecodeAssignment(text);
  // What the API server answers when the extender rebuilds its state (pods, nodes) and follows
  // it (a pod watch's events).
  std::string next, version;
  (void)adapters::DecodePodList(text, &next, &version);
  (void)adapters::DecodePodEvent(text);
  (void)adapters::DecodeNodeListJson(text, &next);
  (void)adapters::DecodeKubeconfig("kubeconfig", text);
  absl::StatusOr<adapters::ExtenderArgs> args = adapters::DecodeExtenderArgs(text);
  if (args.ok()) {
    placement::gpushare::OnlineCluster c(placement::gpushare::MakeTesseraPolicy());
    if (args->nodes.has_value()) {
      for (const auto& n : *args->nodes) c.UpsertNode(n);
    }
    (void)adapters::EncodeFilterResult(*args, c.Filter(args->pod.request, args->names()));
    (void)c.Prioritize(args->pod.request, args->names());
    for (const std::string& n : args->names()) (void)c.Reserve(args->pod.uid, args->pod.request, n);
    if (args->pod.assignment.has_value()) (void)c.Restore("x", *args->pod.assignment);
  }
  // kube-scheduler's preempt verb: its victims, decided on a cluster holding the preemptor's own
  // recorded assignment (when it has one) at priority 0.
  absl::StatusOr<adapters::PreemptionArgs> preempt = adapters::DecodePreemptionArgs(text);
  if (preempt.ok()) {
    placement::gpushare::OnlineCluster c(placement::gpushare::MakeTesseraPolicy());
    std::map<std::string, std::vector<std::string>> chosen;
    for (const auto& [node, v] : preempt->victims) {
      c.UpsertNode(
          {.name = node, .gpus = 8, .model = "H100-80GB", .gpu_memory_bytes = int64_t{80} << 30});
      chosen[node] = v.uids;
    }
    if (preempt->pod.assignment.has_value()) (void)c.Restore("x", *preempt->pod.assignment);
    std::map<std::string, adapters::NodeVictims> result;
    for (auto& [node, uids] :
         c.PreemptionVictims(preempt->pod.request, preempt->pod.priority, chosen)) {
      result[node].uids = std::move(uids);
    }
    (void)adapters::EncodePreemptionResult(result);
  }
  return 0;
}
