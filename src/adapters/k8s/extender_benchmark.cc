// The extender's cost per kube-scheduler call on a cluster shaped like Alibaba's 1,213-node
// GPU-sharing cluster, half full: prioritize with 1,213 node names (nodeCacheCapable: true),
// JSON parse + policy score of every fitting node + JSON encode, without the HTTP hop; and
// filter the same way, also while pods nominated after preemptions wait on some nodes. Every
// call rescores every node (no per-class cache: pods differ). And the preempt verb over
// kube-scheduler's default 100 candidates; share preemption's choice over every refused node;
// and a whole --resync list of 50,000 pods over HTTP.
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "adapters/k8s/extender_service.h"
#include "adapters/net/test_http_server.h"
#include "base/random.h"
#include "benchmark/benchmark.h"
#include "placement/gpushare/tessera_policy.h"

namespace tessera::adapters {
namespace {

using nlohmann::json;

struct Fixture {
  std::unique_ptr<ExtenderService> svc;
  std::string args;
  std::vector<placement::gpushare::OnlineNode> nodes;
  std::vector<PodInfo> pods;
};

// `nominated` pending pods of priority 1000 (a whole GPU each) wait on as many nodes after a
// preemption, and as many held pods are ending (their victims, being deleted).
Fixture Build(int nominated = 0, int users = 0) {
  struct Group {
    const char* model;
    int gpus, nodes;
  };
  const Group groups[] = {{"A10", 8, 549},      {"T4", 2, 387},       {"T4", 4, 17},
                          {"A100-40GB", 8, 39}, {"V100-16GB", 1, 3},  {"V100-16GB", 2, 131},
                          {"V100-32GB", 4, 9},  {"V100-32GB", 8, 21}, {"V100-16GB", 1, 19},
                          {"V100-16GB", 4, 28}, {"V100-16GB", 8, 8},  {"A10", 1, 2}};
  std::vector<placement::gpushare::OnlineNode> nodes;
  json names = json::array();
  for (const Group& g : groups) {
    for (int i = 0; i < g.nodes; ++i) {
      std::string name = "node-" + std::to_string(nodes.size());
      nodes.push_back(
          {.name = name, .gpus = g.gpus, .model = g.model, .gpu_memory_bytes = int64_t{16} << 30});
      names.push_back(name);
    }
  }
  // Half the GPUs' share held by running pods, recorded as the extender would have.
  std::vector<PodInfo> pods;
  Random rng(7);
  const int64_t shares[] = {810, 470, 320, 650, 250, 1000};
  std::vector<std::vector<int64_t>> free(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) free[n].assign(nodes[n].gpus, 1000);
  for (int i = 0; i < 6000; ++i) {
    int n = static_cast<int>(rng.UniformInt(0, static_cast<int64_t>(nodes.size()) - 1));
    int g = static_cast<int>(rng.UniformInt(0, nodes[n].gpus - 1));
    int64_t s = shares[rng.UniformInt(0, 5)];
    if (free[n][g] < s) continue;
    free[n][g] -= s;
    PodInfo p;
    p.uid = "uid-" + std::to_string(i);
    p.name = "p" + std::to_string(i);
    p.ns = "default";
    p.node_name = nodes[n].name;
    p.phase = "Running";
    // With `users`, the sharing pods are MPS clients of that many users (0, 1000, 2000, ...).
    const std::string user = users > 0 && s < 1000 ? std::to_string(i % users * 1000) : "";
    p.assignment = placement::gpushare::Assignment{nodes[n].name, {g}, s, user};
    pods.push_back(p);
  }
  for (int i = 0; i < nominated; ++i) {
    pods[static_cast<size_t>(i) * pods.size() / nominated].ending = true;
    PodInfo p;
    p.uid = "waiting-" + std::to_string(i);
    p.name = "w" + std::to_string(i);
    p.ns = "default";
    p.phase = "Pending";
    p.priority = 1000;
    p.nominated_node = nodes[static_cast<size_t>(i) * nodes.size() / nominated].name;
    p.request = {.num_gpu = 1, .memory_bytes = 0, .compute_milli = 1000, .models = {}, .user = ""};
    pods.push_back(p);
  }
  Fixture f;
  f.svc = std::make_unique<ExtenderService>(placement::gpushare::MakeTesseraPolicy(), nullptr);
  f.svc->Rebuild(nodes, pods);
  json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", "bench"},
        {"namespace", "default"},
        {"uid", "bench-uid"},
        {"annotations", {{"tessera.io/gpu-memory", "6Gi"}, {"tessera.io/gpu-compute", "0.3"}}}}},
      {"spec", {{"containers", json::array({{{"name", "c"}, {"image", "x"}}})}}}};
  if (users > 0) {  // an MPS client running as root
    pod["metadata"]["annotations"]["tessera.io/mps-user"] = "0";
    pod["spec"]["securityContext"]["runAsUser"] = 0;
  }
  f.args = json{{"pod", pod}, {"nodenames", names}}.dump();
  f.nodes = std::move(nodes);
  f.pods = std::move(pods);
  return f;
}

void BM_ExtenderPrioritize1213Nodes(benchmark::State& state) {
  Fixture f = Build();
  for (auto _ : state) {
    HttpReply r = f.svc->Prioritize(f.args);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_ExtenderPrioritize1213Nodes)->Unit(benchmark::kMicrosecond);

// Arg: pods nominated after preemptions waiting on as many nodes (each such node's room is worked
// out for the pod, which is of lower priority), with as many pods ending.
void BM_ExtenderFilter1213Nodes(benchmark::State& state) {
  Fixture f = Build(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    HttpReply r = f.svc->Filter(f.args);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_ExtenderFilter1213Nodes)->Arg(0)->Arg(50)->Unit(benchmark::kMicrosecond);

// Under MPS: the held sharing pods run as Arg users, the pod asking as one of them (root), so
// each node's GPUs of other users are masked out.
void BM_ExtenderFilter1213NodesMps(benchmark::State& state) {
  Fixture f = Build(0, static_cast<int>(state.range(0)));
  for (auto _ : state) {
    HttpReply r = f.svc->Filter(f.args);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_ExtenderFilter1213NodesMps)->Arg(3)->Unit(benchmark::kMicrosecond);

// The preempt verb as kube-scheduler calls it for a pod of priority 1000 against the fixture's
// pods (priority 0): 100 candidates (its default cap, minCandidateNodesAbsolute), names with
// empty victim lists (nodeCacheCapable: true), each given the GPU holders that make room.
void BM_ExtenderPreempt100Candidates(benchmark::State& state) {
  Fixture f = Build();
  json args = json::parse(f.args);
  args["pod"]["spec"]["priority"] = 1000;
  // Eight whole GPUs: half-full nodes have a GPU free enough for any share, so a share would
  // need no victim; this takes every holder on the node, then tries to spare each.
  args["pod"]["metadata"]["annotations"]["tessera.io/gpu-compute"] = "8";
  json victims = json::object();
  for (size_t i = 0; i < 100; ++i) {
    victims[args["nodenames"][i].get<std::string>()] = {{"Pods", json::array()},
                                                        {"NumPDBViolations", 0}};
  }
  const std::string body = json{{"Pod", args["pod"]}, {"NodeNameToMetaVictims", victims}}.dump();
  size_t kept = 0;
  for (auto _ : state) {
    HttpReply r = f.svc->Preempt(body);
    kept = json::parse(r.body)["NodeNameToMetaVictims"].size();
    benchmark::DoNotOptimize(r);
  }
  state.counters["nodes_kept"] = static_cast<double>(kept);
}
BENCHMARK(BM_ExtenderPreempt100Candidates)->Unit(benchmark::kMicrosecond);

// What share preemption (--preempt-shares) computes under the extender's lock for one
// remembered pod: the filter over the nodes kube-scheduler sent (all 1,213 here), the victims on
// every node refused for GPU room (PreemptionVictims, no candidate cap: the 612 nodes of 8 GPUs
// that refuse a pod of eight whole GPUs and priority 1000, its `nodes_refused` counter, against
// the fixture's priority-0 holders), and the node kube-scheduler's rules pick. The budgets and
// the API calls are left out.
void BM_SharePreemptionChoice1213Nodes(benchmark::State& state) {
  Fixture f = Build();
  placement::gpushare::OnlineCluster c(placement::gpushare::MakeTesseraPolicy());
  std::vector<std::string> names;
  for (const auto& n : f.nodes) {
    c.UpsertNode(n);
    names.push_back(n.name);
  }
  for (const PodInfo& p : f.pods) {
    if (p.assignment.has_value()) (void)c.Restore(p.uid, *p.assignment);
  }
  const placement::gpushare::GpuRequest req = {
      .num_gpu = 8, .memory_bytes = 0, .compute_milli = 1000, .models = {}, .user = ""};
  size_t refused = 0;
  std::string node;
  for (auto _ : state) {
    placement::gpushare::FilterOutcome out = c.Filter(req, names, "bench-uid", 1000);
    std::map<std::string, std::vector<std::string>> chosen;
    for (const auto& [name, why] : out.failed) chosen[name];
    std::map<std::string, int64_t> violations;
    auto victims = c.PreemptionVictims(req, 1000, chosen, "bench-uid", nullptr, &violations);
    node = c.PickPreemptionNode(victims, violations);
    refused = chosen.size();
    benchmark::DoNotOptimize(node);
  }
  state.counters["nodes_refused"] = static_cast<double>(refused);
  if (node.empty()) state.SkipWithError("no node chosen");
}
BENCHMARK(BM_SharePreemptionChoice1213Nodes)->Unit(benchmark::kMicrosecond);

// A bound pod as the API server lists it: the fixture's spec and annotations plus what a running
// pod carries (managedFields of the controller, the kubelet and the extender; status with
// conditions and container state): 3.6 KB of JSON, as `kubectl get pod -o json` shows one.
json ListedPod(int i) {
  json fields = json::object();
  for (const char* f : {"f:app", "f:pod-template-hash", "f:team", "f:version"}) {
    fields["f:metadata"]["f:labels"][f] = json::object();
  }
  for (const char* f : {"f:args", "f:image", "f:imagePullPolicy", "f:name", "f:ports",
                        "f:resources", "f:terminationMessagePath", "f:volumeMounts"}) {
    fields["f:spec"]["f:containers"]["k:{\"name\":\"server\"}"][f] = json::object();
  }
  json status = json::object();
  for (const char* f : {"f:conditions", "f:containerStatuses", "f:hostIP", "f:hostIPs", "f:phase",
                        "f:podIP", "f:podIPs", "f:startTime"}) {
    status["f:status"][f] = {{".", json::object()}, {"k:{\"type\":\"Ready\"}", json::object()}};
  }
  json conditions = json::array();
  for (const char* t :
       {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"}) {
    conditions.push_back({{"type", t},
                          {"status", "True"},
                          {"lastProbeTime", nullptr},
                          {"lastTransitionTime", "2026-12-01T10:00:00Z"}});
  }
  const std::string name = "chat-small-7d9f8b6c5-" + std::to_string(10000 + i);
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"generateName", "chat-small-7d9f8b6c5-"},
        {"namespace", "inference"},
        {"uid", "1f2e3d4c-5b6a-4789-8a7b-" + std::to_string(100000000000 + i)},
        {"resourceVersion", std::to_string(1002003 + i)},
        {"creationTimestamp", "2026-12-01T09:59:58Z"},
        {"labels",
         {{"app", "chat-small"},
          {"pod-template-hash", "7d9f8b6c5"},
          {"team", "ml"},
          {"version", "3"}}},
        {"annotations",
         {{"tessera.io/gpu-memory", "18Gi"},
          {"tessera.io/gpu-compute", "0.2"},
          {"tessera.io/gpu-assignment", R"({"gpus":[)" + std::to_string(i % 8) +
                                            R"(],"milliPerGpu":226,"node":"gpu-h100-)" +
                                            std::to_string(i / 8) + "\"}"}}},
        {"ownerReferences", json::array({{{"apiVersion", "apps/v1"},
                                          {"kind", "ReplicaSet"},
                                          {"name", "chat-small-7d9f8b6c5"},
                                          {"uid", "aa11bb22-cc33-4dd4-8ee5-ff6677889900"},
                                          {"controller", true},
                                          {"blockOwnerDeletion", true}}})},
        {"managedFields", json::array({{{"manager", "kube-controller-manager"},
                                        {"operation", "Update"},
                                        {"apiVersion", "v1"},
                                        {"time", "2026-12-01T09:59:58Z"},
                                        {"fieldsType", "FieldsV1"},
                                        {"fieldsV1", fields}},
                                       {{"manager", "kubelet"},
                                        {"operation", "Update"},
                                        {"apiVersion", "v1"},
                                        {"time", "2026-12-01T10:00:00Z"},
                                        {"fieldsType", "FieldsV1"},
                                        {"fieldsV1", status},
                                        {"subresource", "status"}}})}}},
      {"spec",
       {{"schedulerName", "tessera-scheduler"},
        {"nodeName", "gpu-h100-" + std::to_string(i / 8)},
        {"containers",
         json::array(
             {{{"name", "server"},
               {"image", "vllm/vllm-openai:v0.6.3"},
               {"args", {"--model", "/models/chat-small", "--gpu-memory-utilization", "0.22"}},
               {"ports", json::array({{{"containerPort", 8000}, {"protocol", "TCP"}}})},
               {"resources",
                {{"requests", {{"cpu", "4"}, {"memory", "32Gi"}}},
                 {"limits", {{"memory", "32Gi"}}}}},
               {"volumeMounts",
                json::array({{{"name", "models"}, {"mountPath", "/models"}},
                             {{"name", "kube-api-access-x2x4q"},
                              {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"},
                              {"readOnly", true}}})},
               {"terminationMessagePath", "/dev/termination-log"},
               {"imagePullPolicy", "IfNotPresent"}}})},
        {"tolerations",
         json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}},
                      {{"key", "node.kubernetes.io/not-ready"},
                       {"operator", "Exists"},
                       {"effect", "NoExecute"},
                       {"tolerationSeconds", 300}}})}}},
      {"status",
       {{"phase", "Running"},
        {"qosClass", "Burstable"},
        {"hostIP", "10.0.3.17"},
        {"podIP", "10.244.3.42"},
        {"startTime", "2026-12-01T09:59:59Z"},
        {"conditions", conditions},
        {"containerStatuses",
         json::array(
             {{{"name", "server"},
               {"ready", true},
               {"restartCount", 0},
               {"image", "docker.io/vllm/vllm-openai:v0.6.3"},
               {"imageID",
                "docker.io/vllm/vllm-openai@sha256:"
                "3b6e1c5f0a9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f"},
               {"containerID",
                "containerd://9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0"},
               {"started", true},
               {"state", {{"running", {{"startedAt", "2026-12-01T10:00:00Z"}}}}}}})}}}};
}

// Decoding one page of a pod list (500 pods, the extender's page size): the extender's cost of a
// list is this times pages; a --resync list of 50,000 pods is 100 pages.
void BM_DecodePodListPage(benchmark::State& state) {
  json items = json::array();
  for (int i = 0; i < 500; ++i) items.push_back(ListedPod(i));
  const std::string page = json{
      {"apiVersion", "v1"},
      {"kind", "PodList"},
      {"metadata", {{"resourceVersion", "2000000"}, {"continue", "x"}}},
      {"items", items}}.dump();
  std::string next, version;
  for (auto _ : state) {
    absl::StatusOr<std::vector<PodInfo>> pods = DecodePodList(page, &next, &version);
    if (!pods.ok() || pods->size() != 500) state.SkipWithError("the page did not decode");
    benchmark::DoNotOptimize(pods);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * page.size()));
  state.counters["bytes_per_pod"] = static_cast<double>(page.size()) / 500;
}
BENCHMARK(BM_DecodePodListPage)->Unit(benchmark::kMillisecond);

// Decoding one watch event (a MODIFIED running pod, as above): the extender's cost per pod change
// between lists, which every running pod's status update in the cluster causes.
void BM_DecodePodEvent(benchmark::State& state) {
  const std::string line = json{{"type", "MODIFIED"}, {"object", ListedPod(7)}}.dump();
  for (auto _ : state) {
    absl::StatusOr<PodEvent> e = DecodePodEvent(line);
    if (!e.ok() || !e->pod.assignment.has_value()) state.SkipWithError("the event did not decode");
    benchmark::DoNotOptimize(e);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * line.size()));
}
BENCHMARK(BM_DecodePodEvent)->Unit(benchmark::kMicrosecond);

// A GPU node as `GET /api/v1/nodes` returns it: the labels GPU feature discovery sets, the
// kubelet's status (conditions, addresses, node info, the images it holds: the kubelet reports up
// to 50) and managed fields.
json ListedNode(int n) {
  json images = json::array();
  for (int i = 0; i < 50; ++i) {
    const std::string repo = absl::StrCat("registry.example.com/inference/model-server-", i);
    images.push_back({{"names",
                       {absl::StrCat(repo, "@sha256:", std::string(64, "0123456789abcdef"[i % 16])),
                        absl::StrCat(repo, ":v1.", i)}},
                      {"sizeBytes", 1000000000 + 7919 * i}});
  }
  json conditions = json::array();
  for (const char* type : {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"}) {
    conditions.push_back({{"type", type},
                          {"status", std::string(type) == "Ready" ? "True" : "False"},
                          {"lastHeartbeatTime", "2026-12-01T10:00:00Z"},
                          {"lastTransitionTime", "2026-11-20T08:00:00Z"},
                          {"reason", absl::StrCat("Kubelet", type)},
                          {"message", absl::StrCat("kubelet reports ", type)}});
  }
  const std::string name = absl::StrCat("gpu-h100-", n);
  return {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", name},
        {"uid", absl::StrCat("0c9b8a7d-6e5f-4a3b-2c1d-", 100000000000 + n)},
        {"resourceVersion", std::to_string(1000000 + n)},
        {"creationTimestamp", "2026-11-20T08:00:00Z"},
        {"labels",
         {{"kubernetes.io/hostname", name},
          {"kubernetes.io/arch", "amd64"},
          {"kubernetes.io/os", "linux"},
          {"node.kubernetes.io/instance-type", "p5.48xlarge"},
          {"topology.kubernetes.io/zone", "us-east-1a"},
          {"nvidia.com/cuda.driver.major", "550"},
          {"nvidia.com/gpu.count", "8"},
          {"nvidia.com/gpu.family", "hopper"},
          {"nvidia.com/gpu.memory", "81559"},
          {"nvidia.com/gpu.present", "true"},
          {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
          {"nvidia.com/gpu.replicas", "1"}}},
        {"annotations",
         {{"node.alpha.kubernetes.io/ttl", "0"},
          {"volumes.kubernetes.io/controller-managed-attach-detach", "true"}}},
        {"managedFields",
         json::array({{{"manager", "kubelet"},
                       {"operation", "Update"},
                       {"apiVersion", "v1"},
                       {"time", "2026-12-01T10:00:00Z"},
                       {"fieldsType", "FieldsV1"},
                       {"fieldsV1",
                        {{"f:status",
                          {{"f:allocatable", {{"f:nvidia.com/gpu", json::object()}}},
                           {"f:conditions", json::object()},
                           {"f:images", json::object()}}}}},
                       {"subresource", "status"}}})}}},
      {"spec", {{"podCIDR", "10.244.3.0/24"}, {"providerID", "aws:///us-east-1a/i-0123456789"}}},
      {"status",
       {{"capacity",
         {{"cpu", "192"}, {"memory", "2097152000Ki"}, {"nvidia.com/gpu", "8"}, {"pods", "110"}}},
        {"allocatable",
         {{"cpu", "191450m"},
          {"memory", "2090000000Ki"},
          {"nvidia.com/gpu", "8"},
          {"pods", "110"}}},
        {"conditions", conditions},
        {"addresses", json::array({{{"type", "InternalIP"}, {"address", "10.0.3.17"}},
                                   {{"type", "Hostname"}, {"address", name}}})},
        {"daemonEndpoints", {{"kubeletEndpoint", {{"Port", 10250}}}}},
        {"nodeInfo",
         {{"machineID", "ec2a1b2c3d4e5f60718293a4b5c6d7e8"},
          {"kernelVersion", "6.1.0-27-cloud-amd64"},
          {"osImage", "Debian GNU/Linux 12 (bookworm)"},
          {"containerRuntimeVersion", "containerd://1.7.22"},
          {"kubeletVersion", "v1.31.2"},
          {"operatingSystem", "linux"},
          {"architecture", "amd64"}}},
        {"images", images}}}};
}

// Decoding one page of a node list (500 nodes, the extender's page size): a node list's cost is
// this times pages. Before the node watch, --node-resync listed every node every 30 s.
void BM_DecodeNodeListPage(benchmark::State& state) {
  json items = json::array();
  for (int i = 0; i < 500; ++i) items.push_back(ListedNode(i));
  const std::string page = json{
      {"apiVersion", "v1"},
      {"kind", "NodeList"},
      {"metadata", {{"resourceVersion", "2000000"}, {"continue", "x"}}},
      {"items", items}}.dump();
  std::string next, version;
  for (auto _ : state) {
    absl::StatusOr<std::vector<placement::gpushare::OnlineNode>> nodes =
        DecodeNodeListJson(page, &next, &version);
    if (!nodes.ok() || nodes->size() != 500) state.SkipWithError("the page did not decode");
    benchmark::DoNotOptimize(nodes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * page.size()));
  state.counters["bytes_per_node"] = static_cast<double>(page.size()) / 500;
}
BENCHMARK(BM_DecodeNodeListPage)->Unit(benchmark::kMillisecond);

// Decoding one node watch event (a MODIFIED node: the kubelet's status update): the extender's
// cost per node change between node lists.
void BM_DecodeNodeEvent(benchmark::State& state) {
  const std::string line = json{{"type", "MODIFIED"}, {"object", ListedNode(7)}}.dump();
  for (auto _ : state) {
    absl::StatusOr<NodeEvent> e = DecodeNodeEvent(line);
    if (!e.ok() || e->node.gpus != 8) state.SkipWithError("the event did not decode");
    benchmark::DoNotOptimize(e);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * line.size()));
}
BENCHMARK(BM_DecodeNodeEvent)->Unit(benchmark::kMicrosecond);

// A --resync list of 50,000 bound pods (3.6 KB each, as above) and their 6,250 8-GPU nodes,
// end to end: the pages served over HTTP on 127.0.0.1 by a server that only copies pre-rendered
// pages out (500 objects each, as the extender asks), read by the KubeClient, decoded, and
// applied. Arg 0: a fresh extender's first list (every assignment held anew); arg 1: a list of
// the same cluster by an extender that holds it already (the steady --resync).
void BM_ExtenderSync50000Pods(benchmark::State& state) {
  constexpr int kPods = 50000, kPage = 500;
  auto pages = [](const std::vector<json>& items, const std::string& kind) {
    std::vector<std::string> out;
    for (size_t i = 0; i < items.size(); i += kPage) {
      json meta = {{"resourceVersion", "2000000"}};
      if (i + kPage < items.size()) meta["continue"] = absl::StrCat("page-", i / kPage + 1);
      json page = json::array();
      for (size_t j = i; j < std::min(items.size(), i + kPage); ++j) page.push_back(items[j]);
      out.push_back(
          json{{"apiVersion", "v1"}, {"kind", kind}, {"metadata", meta}, {"items", page}}.dump());
    }
    return out;
  };
  std::vector<json> pod_items, node_items;
  for (int i = 0; i < kPods; ++i) pod_items.push_back(ListedPod(i));
  for (int n = 0; n < kPods / 8; ++n) {
    node_items.push_back({{"apiVersion", "v1"},
                          {"kind", "Node"},
                          {"metadata",
                           {{"name", absl::StrCat("gpu-h100-", n)},
                            {"labels",
                             {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                              {"nvidia.com/gpu.memory", "81559"},
                              {"nvidia.com/gpu.count", "8"}}}}},
                          {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}}}}}});
  }
  const std::vector<std::string> pod_pages = pages(pod_items, "PodList");
  const std::vector<std::string> node_pages = pages(node_items, "NodeList");
  pod_items.clear();
  size_t bytes = 0;
  for (const std::string& p : pod_pages) bytes += p.size();
  auto serve = [](const std::vector<std::string>& from) {
    return [&from](const httplib::Request& req, httplib::Response& res) {
      size_t page = 0;
      const std::string token = req.get_param_value("continue");
      if (!token.empty() && !absl::SimpleAtoi(token.substr(5), &page)) page = from.size();
      if (page >= from.size()) {
        res.status = 400;
        return;
      }
      res.set_content(from[page], "application/json");
    };
  };
  testing::LocalHttpServer api([&](httplib::Server& s) {
    s.Get("/api/v1/nodes", serve(node_pages));
    s.Get("/api/v1/pods", serve(pod_pages));
  });
  KubeConfig cfg;
  cfg.server = api.url("");
  cfg.timeout_ms = 60000;
  auto fresh = [&] {
    return std::make_unique<ExtenderService>(placement::gpushare::MakeTesseraPolicy(),
                                             std::make_unique<KubeClient>(cfg));
  };
  std::unique_ptr<ExtenderService> svc = fresh();
  if (state.range(0) == 1 && !svc->Sync().ok()) state.SkipWithError("the first list failed");
  for (auto _ : state) {
    if (state.range(0) == 0) {
      state.PauseTiming();
      svc = fresh();
      state.ResumeTiming();
    }
    absl::StatusOr<std::vector<std::string>> problems = svc->Sync();
    if (!problems.ok() || !problems->empty() || svc->held_pods() != kPods) {
      state.SkipWithError("the list did not hold every pod");
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_ExtenderSync50000Pods)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

}  // namespace
}  // namespace tessera::adapters
