// kube-scheduler's HTTP extender protocol (k8s.io/kube-scheduler/extender/v1) and the Kubernetes
// objects it carries, decoded into the online scheduler's types:
//   filter:      ExtenderArgs {pod, nodes | nodenames} -> ExtenderFilterResult
//                {nodes | nodenames, failedNodes, failedAndUnresolvableNodes, error}
//   prioritize:  ExtenderArgs -> HostPriorityList [{host, score}] (0..10)
//   bind:        ExtenderBindingArgs {podName, podNamespace, podUID, node} ->
//                ExtenderBindingResult {error}
//   preempt:     ExtenderPreemptionArgs {Pod, NodeNameToVictims | NodeNameToMetaVictims} ->
//                ExtenderPreemptionResult {NodeNameToMetaVictims}
// Keys are matched as Go's encoding/json does (exact, else case-insensitive). Errors name the
// field path and what was expected.
//
// A pod asks for GPUs with the planner's annotations (tessera.io/gpu-memory,
// tessera.io/gpu-compute, tessera.io/gpu-models) or with `nvidia.com/gpu` resources (whole GPUs).
// The extender records what it chose in the annotation tessera.io/gpu-assignment, as JSON:
//   {"node": "gpu-node-3", "gpus": [5], "milliPerGpu": 400}
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "placement/gpushare/online_cluster.h"

namespace tessera::adapters {

inline constexpr char kGpuAssignmentAnnotation[] = "tessera.io/gpu-assignment";
// Plain values, written with the assignment, that a container's env reads with the Downward API
// (valueFrom.fieldRef.fieldPath: metadata.annotations['...']) to use exactly its share:
// - visible-devices, for NVIDIA_VISIBLE_DEVICES: the GPU indices, "5" or "0,1";
// - mps-pinned-device-mem-limit, for CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: the share's memory in MiB,
//   rounded down, for each visible ordinal: "0=30766M";
// - mps-active-thread-percentage, for CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: the share in percent,
//   rounded up: "22";
// - gpu-memory-fraction, for an engine's own cap (vLLM's --gpu-memory-utilization): "0.214".
inline constexpr char kVisibleDevicesAnnotation[] = "tessera.io/visible-devices";
inline constexpr char kMpsMemLimitAnnotation[] = "tessera.io/mps-pinned-device-mem-limit";
inline constexpr char kMpsThreadPercentageAnnotation[] = "tessera.io/mps-active-thread-percentage";
inline constexpr char kGpuMemoryFractionAnnotation[] = "tessera.io/gpu-memory-fraction";

// Set by the admission webhook on sharing pods when GPUs are shared through MPS (its
// --mps-directory): the user the pod's processes run as (MpsUserOf), for operators to read. The
// extender takes its presence to mean the pod is an MPS client, and keeps each GPU to one user's
// pods (GpuRequest::user), which it works out from the pod's spec again, not from this value.
inline constexpr char kMpsUserAnnotation[] = "tessera.io/mps-user";
// The annotation naming a pod's main container (kubectl's default for logs and exec).
inline constexpr char kDefaultContainerAnnotation[] = "kubectl.kubernetes.io/default-container";

struct PodInfo {
  std::string uid;
  std::string name;
  std::string ns;
  std::string node_name;  // spec.nodeName; "" while pending
  std::string phase;      // status.phase
  int32_t priority = 0;   // spec.priority (set from the PriorityClass at admission); 0 if unset
  absl::Time started = absl::InfiniteFuture();  // status.startTime; InfiniteFuture if not yet
  // status.nominatedNodeName: where kube-scheduler's preemption made room for this pending pod.
  std::string nominated_node;
  bool ending = false;          // metadata.deletionTimestamp set: deleted, its containers stopping
  bool never_preempts = false;  // spec.preemptionPolicy: Never
  std::map<std::string, std::string> labels;  // metadata.labels (PodDisruptionBudgets select by)
  placement::gpushare::GpuRequest request;
  // Set when the pod's GPU annotations or resources are wrong (request is then empty): the
  // object is well-formed, the pod's spec is not, and kube-scheduler should say so on the pod.
  std::string request_error;
  std::optional<placement::gpushare::Assignment> assignment;  // from the annotation
  // Set when the tessera.io/gpu-assignment annotation cannot be read (assignment is then empty).
  // Anyone who can edit the pod can write it; one such pod must not stop the extender's restore.
  std::string assignment_error;

  // Still holds its node's resources (bound, not Succeeded or Failed).
  bool active() const { return !node_name.empty() && phase != "Succeeded" && phase != "Failed"; }
};

absl::StatusOr<PodInfo> DecodePod(const nlohmann::json& pod, const std::string& path = "pod");
// What `pod` asks of GPUs (its annotations, else its nvidia.com/gpu resources); errors name the
// field under `path`. Needs no name, UID or status: a pod at admission has none of them yet.
absl::StatusOr<placement::gpushare::GpuRequest> DecodeGpuRequest(const nlohmann::json& pod,
                                                                 const std::string& path = "pod");
// The user a sharing pod's processes run as, as MPS tells clients apart: the runAsUser of its
// main container's securityContext, else of the pod's; the main container is the one the
// kubectl.kubernetes.io/default-container annotation names, else the first. Without either, the
// image's own USER, which the API does not show: "image:" and the image, so that only pods of one
// image count as one user; in a user namespace of the pod's own, the pod (ContainerUserOf). E.g.
// "1000", "image:vllm/vllm-openai:v0.6.3", "userns:<uid>:0". Errors name the field.
absl::StatusOr<std::string> MpsUserOf(const nlohmann::json& pod, const std::string& path = "pod");
// The index in spec.containers of the pod's main container (as MpsUserOf takes it).
absl::StatusOr<size_t> MainContainerOf(const nlohmann::json& pod, const std::string& path = "pod");
// The user container `i` of the pod's spec.`list` ("containers" or "initContainers") runs as, in
// MpsUserOf's terms: its runAsUser, else the pod's, else "image:" and its image; in a pod with
// spec.hostUsers false (a user namespace of its own, whose IDs map to host IDs no other pod has)
// "userns:", the pod's UID ("new" before it has one), ":" and that. MpsUserOf is this for the
// main container.
absl::StatusOr<std::string> ContainerUserOf(const nlohmann::json& pod, absl::string_view list,
                                            size_t i, const std::string& path = "pod");

// A Node object: GPU count from status.allocatable["nvidia.com/gpu"] (else the GFD label
// nvidia.com/gpu.count), model from nvidia.com/gpu.product, memory from nvidia.com/gpu.memory
// (else the catalog). Nodes without a known GPU, or whose GPUs are MIG devices (mig strategy
// single/mixed), come back with gpus = 0: the extender does not share them.
absl::StatusOr<placement::gpushare::OnlineNode> DecodeNode(const nlohmann::json& node,
                                                           const std::string& path = "node");

struct ExtenderArgs {
  PodInfo pod;
  // nodeCacheCapable: false sends whole Node objects; true sends names only.
  std::optional<std::vector<placement::gpushare::OnlineNode>> nodes;
  std::vector<nlohmann::json> node_objects;  // as sent, echoed back by filter
  std::optional<std::vector<std::string>> node_names;
  std::vector<std::string> names() const;
};
absl::StatusOr<ExtenderArgs> DecodeExtenderArgs(absl::string_view body);

struct BindingArgs {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string node;
};
absl::StatusOr<BindingArgs> DecodeBindingArgs(absl::string_view body);

// The victims kube-scheduler chose on one candidate node for preemption (pods by UID).
struct NodeVictims {
  std::vector<std::string> uids;
  int64_t pdb_violations = 0;  // NumPDBViolations
};
struct PreemptionArgs {
  PodInfo pod;  // the preemptor
  // NodeNameToVictims (nodeCacheCapable: false, whole pods) or NodeNameToMetaVictims (true,
  // UIDs): either way, the pods' UIDs.
  std::map<std::string, NodeVictims> victims;
};
absl::StatusOr<PreemptionArgs> DecodePreemptionArgs(absl::string_view body);
// ExtenderPreemptionResult: always NodeNameToMetaVictims, which kube-scheduler reads in both
// modes (it maps the UIDs back to the pods it knows on each node).
nlohmann::json EncodePreemptionResult(const std::map<std::string, NodeVictims>& victims);

// The result for `args` keeps the form it came in (Node objects or names).
nlohmann::json EncodeFilterResult(const ExtenderArgs& args,
                                  const placement::gpushare::FilterOutcome& outcome);
nlohmann::json EncodeFilterError(const std::string& error);
nlohmann::json EncodePriorities(const std::vector<std::pair<std::string, int64_t>>& scores);
nlohmann::json EncodeBindingResult(const std::string& error);

std::string EncodeAssignment(const placement::gpushare::Assignment& a);
// Every annotation bind writes for `a`: the assignment and the container values above, for GPUs
// of `gpu_memory_bytes` each (the memory limit is left out when that is unknown, 0).
std::map<std::string, std::string> AssignmentAnnotations(const placement::gpushare::Assignment& a,
                                                         int64_t gpu_memory_bytes);
absl::StatusOr<placement::gpushare::Assignment> DecodeAssignment(absl::string_view text);

// A v1 PodList / NodeList (or kubectl's List). `continue_token` (optional) receives the list's
// metadata.continue: "" on the last page of a paged list (limit=N), else the next page's token;
// `resource_version` (optional) its metadata.resourceVersion, where a watch of it starts.
absl::StatusOr<std::vector<PodInfo>> DecodePodList(absl::string_view body,
                                                   std::string* continue_token = nullptr,
                                                   std::string* resource_version = nullptr);
absl::StatusOr<std::vector<placement::gpushare::OnlineNode>> DecodeNodeListJson(
    absl::string_view body, std::string* continue_token = nullptr,
    std::string* resource_version = nullptr);

// A label selector (metav1.LabelSelector): every matchLabels pair and every matchExpressions
// requirement (In, NotIn, Exists, DoesNotExist) must hold.
struct LabelSelector {
  struct Requirement {
    std::string key;
    std::string op;  // In, NotIn, Exists, DoesNotExist
    std::vector<std::string> values;
  };
  std::map<std::string, std::string> match_labels;
  std::vector<Requirement> match_expressions;

  bool empty() const { return match_labels.empty() && match_expressions.empty(); }
  bool Matches(const std::map<std::string, std::string>& labels) const;
};

// What preemption weighs of a policy/v1 PodDisruptionBudget.
struct DisruptionBudget {
  std::string ns;
  std::string name;
  // spec.selector; absent or empty selects no pod (as kube-scheduler's preemption reads it).
  LabelSelector selector;
  int32_t disruptions_allowed = 0;  // status.disruptionsAllowed
  // status.disruptedPods: pods being evicted already, by name; they use no allowance again.
  std::vector<std::string> disrupted;

  // Whether pod `name` in namespace `ns` with `labels` counts against this budget.
  bool Covers(const std::string& ns, const std::string& name,
              const std::map<std::string, std::string>& labels) const;
};
absl::StatusOr<DisruptionBudget> DecodeDisruptionBudget(const nlohmann::json& pdb,
                                                        const std::string& path = "pdb");
// A policy/v1 PodDisruptionBudgetList, paged as DecodePodList.
absl::StatusOr<std::vector<DisruptionBudget>> DecodeDisruptionBudgetList(
    absl::string_view body, std::string* continue_token = nullptr,
    std::string* resource_version = nullptr);

// One event of a pod watch (a line of `GET /api/v1/pods?watch=1`): {"type", "object"}.
struct PodEvent {
  std::string type;              // ADDED, MODIFIED, DELETED, BOOKMARK or ERROR
  PodInfo pod;                   // ADDED, MODIFIED, DELETED
  std::string resource_version;  // the object's; where a watch resumes (all but ERROR)
  int64_t error_code = 0;        // ERROR: the Status's code (410: the version is gone; relist)
  std::string error_message;     // ERROR
};
absl::StatusOr<PodEvent> DecodePodEvent(absl::string_view line);

// One event of a node watch (a line of `GET /api/v1/nodes?watch=1`), as PodEvent. `name` is the
// node's, also for a DELETED node whose object no longer decodes as a node the extender shares.
struct NodeEvent {
  std::string type;                      // ADDED, MODIFIED, DELETED, BOOKMARK or ERROR
  std::string name;                      // all but BOOKMARK and ERROR
  placement::gpushare::OnlineNode node;  // ADDED, MODIFIED
  std::string resource_version;
  int64_t error_code = 0;
  std::string error_message;
};
absl::StatusOr<NodeEvent> DecodeNodeEvent(absl::string_view line);

// Parses a JSON body; InvalidArgument naming the byte offset on a syntax error.
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view body, absl::string_view what);

}  // namespace tessera::adapters
