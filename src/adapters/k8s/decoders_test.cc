#include "adapters/k8s/decoders.h"

#include "adapters/io/files.h"
#include "base/units.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;

std::string TestData(const std::string& name) {
  absl::StatusOr<std::string> text =
      ReadFile(std::string(TESSERA_SOURCE_DIR) + "/tests/data/" + name);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.value_or("");
}

constexpr char kFleet[] = R"(apiVersion: tessera.io/v1alpha1
kind: Fleet
pools:
  - name: h100
    gpuModel: H100-80GB
    gpusPerNode: 8
    nodes: 4
    maxNodes: 16
    costPerGpuHour: 2.50
  - name: l4
    gpuModel: NVIDIA-L4
    gpusPerNode: 4
    nodes: 2
)";

TEST(DecodeFleet, AcceptsTheDocumentedShape) {
  absl::StatusOr<model::Fleet> fleet = DecodeFleet("fleet.yaml", kFleet);
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  ASSERT_EQ(fleet->pools.size(), 2u);
  const model::Pool& h = fleet->pools[0];
  EXPECT_EQ(h.name, "h100");
  EXPECT_EQ(h.gpu->name, "H100-80GB");
  EXPECT_EQ(h.gpus_per_node, 8);
  EXPECT_EQ(h.nodes, 4);
  EXPECT_EQ(h.max_nodes, 16);
  EXPECT_DOUBLE_EQ(h.cost_per_gpu_hour, 2.5);
  EXPECT_TRUE(h.mig_allowed);
  EXPECT_EQ(h.source.ToString(), "fleet.yaml:4");
  const model::Pool& l = fleet->pools[1];
  EXPECT_EQ(l.gpu->name, "L4");
  EXPECT_EQ(l.max_nodes, 2);  // default: nodes
  EXPECT_DOUBLE_EQ(l.cost_per_gpu_hour, l.gpu->price_per_gpu_hour);
  EXPECT_FALSE(l.mig_allowed);
}

TEST(DecodeFleet, AnchorsAndAliasesStillWork) {
  // The checks that keep yaml-cpp out of its loops refuse "&name:" and leave these alone.
  absl::StatusOr<model::Fleet> fleet = DecodeFleet("fleet.yaml", R"(apiVersion: tessera.io/v1alpha1
kind: Fleet
pools:
  - &first {name: a, gpuModel: &m T4, gpusPerNode: &n 4, nodes: 1}
  - name: b
    gpuModel: *m
    gpusPerNode: *n
    nodes: 2
)");
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  ASSERT_EQ(fleet->pools.size(), 2u);
  EXPECT_EQ(fleet->pools[1].gpu->name, "T4");
  EXPECT_EQ(fleet->pools[1].gpus_per_node, 4);
}

struct BadCase {
  std::string text;
  std::string expect;  // substring of the error
};

TEST(DecodeFleet, RejectsBadInputNamingFileLineField) {
  const std::string head = "apiVersion: tessera.io/v1alpha1\nkind: Fleet\npools:\n";
  const std::vector<BadCase> cases = {
      {"", "fleet.yaml: empty input"},
      // A NUL byte made yaml-cpp 0.7 loop forever (found by fuzzing); refused up front.
      {std::string(",5 Th\x01\0e,", 9),
       "fleet.yaml:1:6: malformed YAML/JSON: control character 0x01"},
      // So did invalid UTF-8.
      {",5 \xb6\x97\xfe\xff"
       "e,",
       "fleet.yaml:1:4: malformed YAML/JSON: invalid UTF-8 byte 0xb6"},
      // And this (libyaml checks the syntax first).
      {",5 t\n,", "fleet.yaml:1:1: malformed YAML/JSON:"},
      // And these, which libyaml accepts: a plain value with a line starting with ','.
      {"!/ t\n,M", "fleet.yaml:1:1: unsupported YAML: a plain (unquoted) value"},
      {"&a t\n,M", "fleet.yaml:1:1: unsupported YAML"},
      {"!/ t\n!,", "fleet.yaml:1:1: unsupported YAML"},
      {"! 4 \n?  ", "fleet.yaml:1:1: unsupported YAML: a plain (unquoted) value"},
      {"!t a\n? b", "fleet.yaml:1:1: unsupported YAML"},
      // The same after multi-byte characters, which libyaml's positions count as one each
      // (",F" went unseen: fleet_decoder_fuzz, once the decoders were instrumented).
      {"#o\xd3\x89\xce\x9elp\r\rM\n,F", "fleet.yaml:3:1: unsupported YAML: a plain (unquoted)"},
      {"# \xc3\xa9\xc3\xa9\r\n!x \xe2\x82\xac t\r\n,M", "fleet.yaml:2:1: unsupported YAML"},
      {"\xef\xbb\xbf# \xf0\x9f\x99\x82\n!/ t\n,M", "fleet.yaml:2:1: unsupported YAML"},
      // An anchor name that runs into ':' (libyaml ends the name there, yaml-cpp does not).
      {"&k: W\n? a", "fleet.yaml:1:1: unsupported YAML: anchor or alias &k followed by ':'"},
      {"\xef\xbb\xbf# c\n&a:b: W\n? a", "fleet.yaml:2:1: unsupported YAML: anchor or alias &a"},
      // A lone CR is a line break to libyaml, not to yaml-cpp: both now see LF.
      {"#o\rM\n\".(.\",(F", "fleet.yaml:2:1: document: expected a map"},
      {"a: &x 1\nb: *x?", "fleet.yaml:2:4: unsupported YAML: anchor or alias *x followed by '?'"},
      {"!,", "fleet.yaml:1:2: malformed YAML/JSON"},  // libyaml refuses these two
      {"!a,b", "fleet.yaml:1:3: malformed YAML/JSON"},
      {"a: \xed\xa0\x80\n", "invalid UTF-8 byte 0xed"},  // a surrogate
      {"a: \xc0\xaf\n", "invalid UTF-8 byte 0xc0"},      // overlong
      {"pools: [", "fleet.yaml:2:1: malformed YAML/JSON: did not find expected node content"},
      // yaml-cpp refused 500 levels as "bad file"; the reader says what is wrong, and where.
      {"pools: " + std::string(600, '[') + std::string(600, ']'),
       "fleet.yaml:1:107: unsupported YAML: nested deeper than 100 levels"},
      {"a:\n" +
           [] {
             std::string t;
             for (int i = 1; i <= 101; ++i) t += std::string(i, ' ') + "- \n";
             return t;
           }(),
       "fleet.yaml:101:101: unsupported YAML: nested deeper than 100 levels"},
      {head + "  - name: a\n    gpuModel: RTX-4090\n    gpusPerNode: 8\n    nodes: 1\n",
       "fleet.yaml:5:15: pools[0].gpuModel: unknown GPU model \"RTX-4090\"; known models: "
       "A100-40GB"},
      {head + "  - name: a\n    gpuModel: T4\n    gpusPerNode: 0\n    nodes: 1\n",
       "fleet.yaml:6:18: pools[0].gpusPerNode: expected an integer from 1 to 64, found 0"},
      {head + "  - name: a\n    gpuModel: T4\n    gpusPerNode: eight\n    nodes: 1\n",
       "pools[0].gpusPerNode: expected an integer, found \"eight\""},
      {head + "  - name: a\n    gpuModel: T4\n    gpusPerNode: 4\n",
       "pools[0].nodes: required field is missing"},
      {head + "  - name: a\n    gpuModel: T4\n    gpusPerNode: 4\n    nodes: 3\n    maxNodes: 2\n",
       "pools[0].maxNodes: maxNodes 2 is below nodes 3"},
      {head + "  - name: a\n    gpuModel: T4\n    gpusPerNode: 4\n    nodes: 1\n    gpus: 3\n",
       "fleet.yaml:8:5: pools[0].gpus: unknown field \"gpus\" (expected one of: name, gpuModel"},
      {head + "  - name: a\n    gpuModel: T4\n    gpusPerNode: 4\n    nodes: 0\n",
       "pool has no nodes and may not grow"},
      {head + "  - name: A_b\n    gpuModel: T4\n    gpusPerNode: 4\n    nodes: 1\n",
       "pools[0].name: \"A_b\" is not a valid name"},
      {head + "  - {name: a, gpuModel: T4, gpusPerNode: 4, nodes: 1}\n"
              "  - {name: a, gpuModel: L4, gpusPerNode: 4, nodes: 1}\n",
       "duplicate pool name \"a\""},
      {head, "pools: expected at least one pool"},
      {"apiVersion: v1\nkind: Fleet\npools: []\n",
       "apiVersion: expected \"tessera.io/v1alpha1\", found \"v1\""},
      {"apiVersion: tessera.io/v1alpha1\nkind: Pod\n", "kind: expected Fleet"},
      {head + "  - name: a\n    gpuModel: T4\n    gpusPerNode: 4\n    nodes: 1\n    "
              "costPerGpuHour: -1\n",
       "costPerGpuHour: expected a number from 0 to 1000, found -1"},
  };
  for (const BadCase& c : cases) {
    absl::StatusOr<model::Fleet> fleet = DecodeFleet("fleet.yaml", c.text);
    ASSERT_FALSE(fleet.ok()) << c.text;
    EXPECT_EQ(fleet.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(fleet.status().message(), HasSubstr(c.expect)) << c.text;
  }
}

TEST(DecodeFleet, KubectlNodeListGroupsGpuNodesIntoPools) {
  absl::StatusOr<model::Fleet> fleet = DecodeFleet("nodes.json", TestData("kubectl-nodes.json"));
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  ASSERT_EQ(fleet->pools.size(), 3u);  // the CPU node is skipped
  const model::Pool& h = fleet->pools[0];
  EXPECT_EQ(h.name, "h100-80gb-x8");
  EXPECT_EQ(h.gpu->name, "H100-80GB");
  EXPECT_EQ(h.nodes, 2);  // the -SHARED node is the same model, count and memory
  EXPECT_EQ(h.max_nodes, 2);
  EXPECT_EQ(h.node_names, (std::vector<std::string>{"gpu-h100-a", "gpu-h100-b"}));
  EXPECT_EQ(h.gpu_memory_bytes, 81559 * kMiB);
  const model::Pool& a = fleet->pools[1];
  EXPECT_EQ(a.gpu->name, "A100-80GB");
  EXPECT_EQ(a.gpus_per_node, 8);  // 16 MIG 3g.40gb devices, two per GPU
  const model::Pool& l = fleet->pools[2];
  EXPECT_EQ(l.gpu->name, "L4");
  EXPECT_FALSE(l.mig_allowed);
}

TEST(DecodeFleet, KubectlNodeListErrors) {
  absl::StatusOr<model::Fleet> none =
      DecodeFleet("n.json", R"({"kind": "List", "items": [{"kind": "Node", "metadata":
          {"name": "cpu", "labels": {"kubernetes.io/os": "linux"}}}]})");
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("no GPU nodes"));
  absl::StatusOr<model::Fleet> bad_count =
      DecodeFleet("n.json", R"({"kind": "List", "items": [{"kind": "Node", "metadata":
          {"name": "g", "labels": {"nvidia.com/gpu.product": "NVIDIA-L4",
                                   "nvidia.com/gpu.count": "x"}}}]})");
  ASSERT_FALSE(bad_count.ok());
  EXPECT_THAT(bad_count.status().message(), HasSubstr("n.json:3:"));
  EXPECT_THAT(bad_count.status().message(), HasSubstr("expected a GPU count"));
  // Node names end up in labels.sh's kubectl commands: one Kubernetes would not allow, such as
  // one that is shell, is refused.
  absl::StatusOr<model::Fleet> bad_name =
      DecodeFleet("n.json", R"({"kind": "List", "items": [{"kind": "Node", "metadata":
          {"name": "g; rm -rf ~", "labels": {"nvidia.com/gpu.product": "NVIDIA-L4"}}}]})");
  ASSERT_FALSE(bad_name.ok());
  EXPECT_THAT(
      bad_name.status().message(),
      HasSubstr("n.json:2:20: items[0].metadata.name: \"g; rm -rf ~\" is not a valid name"));
}

// A node the labels cannot describe fails the list when no `skipped` is given; given one, it is
// left out and named, and the rest is decoded.
TEST(DecodeFleet, KubectlNodeListSkipsNodesItCannotDescribe) {
  constexpr char kList[] = R"({"kind": "List", "items": [
    {"kind": "Node", "metadata": {"name": "a40", "labels": {"nvidia.com/gpu.product": "NVIDIA-A40",
                                  "nvidia.com/gpu.count": "2", "nvidia.com/gpu.memory": "46068"}}},
    {"kind": "Node", "metadata": {"name": "mig", "labels": {
       "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb", "nvidia.com/gpu.count": "3"}}},
    {"kind": "Node", "metadata": {"name": "l4", "labels": {"nvidia.com/gpu.product": "NVIDIA-L4",
                                  "nvidia.com/gpu.count": "4"}}}]})";
  absl::StatusOr<model::Fleet> strict = DecodeFleet("n.json", kList);
  ASSERT_FALSE(strict.ok());
  EXPECT_THAT(strict.status().message(), HasSubstr("n.json:2:"));
  EXPECT_THAT(strict.status().message(), HasSubstr("unknown GPU model \"NVIDIA-A40\""));

  std::vector<std::string> skipped = {"from an earlier file"};
  absl::StatusOr<model::Fleet> fleet = DecodeFleet("n.json", kList, &skipped);
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  ASSERT_EQ(fleet->pools.size(), 1u);
  EXPECT_EQ(fleet->pools[0].gpu->name, "L4");
  EXPECT_EQ(fleet->pools[0].node_names, std::vector<std::string>{"l4"});
  ASSERT_EQ(skipped.size(), 3u);
  EXPECT_THAT(skipped[1], HasSubstr("node a40: n.json:2:"));
  EXPECT_THAT(skipped[1], HasSubstr("unknown GPU model \"NVIDIA-A40\""));
  EXPECT_THAT(skipped[1], HasSubstr("describe this node in a Fleet file"));
  EXPECT_THAT(skipped[2], HasSubstr("node mig: "));
  EXPECT_THAT(skipped[2], HasSubstr("cannot tell how many physical GPUs hold 3 3g.40gb"));

  // Nothing left: an error that says why, not "no GPU nodes".
  std::vector<std::string> all;
  absl::StatusOr<model::Fleet> none = DecodeFleet(
      "n.json", R"({"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "a40",
          "labels": {"nvidia.com/gpu.product": "NVIDIA-A40", "nvidia.com/gpu.count": "1"}}}]})",
      &all);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(),
              HasSubstr("no GPU nodes left to plan: all 1 GPU nodes were skipped; the first: "
                        "node a40: "));
}

constexpr char kWorkloads[] = R"(apiVersion: tessera.io/v1alpha1
kind: WorkloadSet
workloads:
  - name: chat-small
    namespace: default
    replicas: 4
    gpuMemory: 18Gi
    gpuCompute: 0.2
    isolation: none
    gpuModels: [H100-80GB]
  - name: llama-70b
    replicas: 2
    gpuMemory: 150Gi
    gpuCompute: 2
    isolation: full
)";

TEST(DecodeWorkloads, AcceptsTheDocumentedShape) {
  model::WorkloadSet set;
  std::vector<std::string> skipped;
  ASSERT_TRUE(DecodeWorkloads("w.yaml", kWorkloads, &set, &skipped).ok());
  ASSERT_EQ(set.workloads.size(), 2u);
  const model::Workload& w = set.workloads[0];
  EXPECT_EQ(w.key(), "default/chat-small");
  EXPECT_EQ(w.replicas, 4);
  EXPECT_EQ(w.memory_bytes, 18 * kGiB);
  EXPECT_EQ(w.compute_milli, 200);
  EXPECT_EQ(w.isolation, model::Isolation::kNone);
  ASSERT_EQ(w.allowed_models.size(), 1u);
  EXPECT_EQ(w.allowed_models[0]->name, "H100-80GB");
  EXPECT_EQ(w.container_name, "chat-small");
  EXPECT_EQ(w.source.ToString(), "w.yaml:4");
  EXPECT_EQ(set.workloads[1].whole_gpus(), 2);
  EXPECT_EQ(set.workloads[1].isolation, model::Isolation::kFull);
}

TEST(DecodeWorkloads, RejectsBadInputNamingFileLineField) {
  const std::string head =
      "apiVersion: tessera.io/v1alpha1\nkind: WorkloadSet\nworkloads:\n  - name: a\n";
  const std::vector<BadCase> cases = {
      {head + "    replicas: 1\n    gpuMemory: 18Gx\n    gpuCompute: 0.2\n",
       "w.yaml:6:16: workloads[0].gpuMemory: invalid byte quantity \"18Gx\": unknown suffix"},
      {head + "    replicas: 1\n    gpuMemory: -4Gi\n    gpuCompute: 0.2\n",
       "workloads[0].gpuMemory: invalid byte quantity \"-4Gi\": negative"},
      {head + "    replicas: 1\n    gpuMemory: 0\n    gpuCompute: 0.2\n",
       "workloads[0].gpuMemory: expected a quantity above zero"},
      {head + "    replicas: 0\n    gpuMemory: 1Gi\n    gpuCompute: 0.2\n",
       "w.yaml:5:15: workloads[0].replicas: expected an integer from 1 to 100000, found 0"},
      {head + "    replicas: 1\n    gpuMemory: 1Gi\n    gpuCompute: 1.5\n",
       "workloads[0].gpuCompute: invalid GPU compute \"1.5\": above 1 it counts whole GPUs"},
      {head + "    replicas: 1\n    gpuMemory: 1Gi\n    gpuCompute: 0\n",
       "gpuCompute: invalid GPU compute \"0\""},
      {head + "    replicas: 1\n    gpuMemory: 1Gi\n    gpuCompute: 0.2\n    isolation: strict\n",
       "workloads[0].isolation: expected none, memory or full, found \"strict\""},
      {head + "    replicas: 1\n    gpuMemory: 1Gi\n    gpuCompute: 0.2\n    gpuModels: [X9]\n",
       "workloads[0].gpuModels[0]: unknown GPU model \"X9\""},
      {head + "    replicas: 1\n    gpuMemory: 1Gi\n",
       "workloads[0].gpuCompute: required field is missing"},
      {head + "    replicas: 1\n    gpuMemory: 1Gi\n    gpuCompute: 0.2\n    gpu: 1\n",
       "unknown field \"gpu\""},
      {"apiVersion: tessera.io/v1alpha1\nkind: WorkloadSet\nworkloads: []\n",
       "workloads: expected at least one workload"},
      {"apiVersion: tessera.io/v1alpha1\nkind: WorkloadSet\nworkloads:\n"
       "  - {name: a, replicas: 1, gpuMemory: 1Gi, gpuCompute: 0.1}\n"
       "  - {name: a, replicas: 1, gpuMemory: 1Gi, gpuCompute: 0.1}\n",
       "duplicate workload default/a (first defined at w.yaml:4)"},
      {"", "w.yaml: empty input"},
      {"kind: Service\n", "kind: expected WorkloadSet, Deployment or a List"},
      {"workloads:\n  - name: [unclosed\n", "w.yaml:"},
      // A resource name that is not a string made yaml-cpp's as<std::string> throw out of the
      // decoder ("internal error: ... bad conversion").
      {"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  annotations:\n"
       "    tessera.io/gpu-memory: 1Gi\n    tessera.io/gpu-compute: '0.1'\nspec:\n  template:\n"
       "    spec:\n      containers:\n        - name: c\n          resources:\n"
       "            limits: {? [a, b] : 1}\n",
       "w.yaml:14:24: spec.template.spec.containers[0].resources.limits: expected resource names "
       "as keys"},
      // Shapes `tessera plan` could not rewrite (yaml-cpp threw in DeploymentFiles: "operator[]
      // call on a scalar"), which Kubernetes refuses too.
      {"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  annotations:\n"
       "    tessera.io/gpu-memory: 1Gi\n    tessera.io/gpu-compute: '0.1'\nspec:\n  template:\n"
       "    spec:\n      containers:\n        - name: c\n          resources:\n"
       "            limits:\n              nvidia.com/gpu:2\"\n",
       "w.yaml:15:15: spec.template.spec.containers[0].resources.limits: expected a map, found a "
       "scalar"},
      {"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  annotations:\n"
       "    tessera.io/gpu-memory: 1Gi\n    tessera.io/gpu-compute: '0.1'\nspec:\n  template:\n"
       "    spec:\n      containers:\n        - name: c\n          resources: 1\n",
       "spec.template.spec.containers[0].resources: expected a map"},
      {"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  annotations:\n"
       "    tessera.io/gpu-memory: 1Gi\n    tessera.io/gpu-compute: '0.1'\nspec:\n  template:\n"
       "    spec:\n      containers:\n        - name: c\n        - image: x\n",
       "spec.template.spec.containers[1].name: required field is missing"},
      {"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  annotations:\n"
       "    tessera.io/gpu-memory: 1Gi\n    tessera.io/gpu-compute: '0.1'\nspec:\n  template:\n"
       "    spec:\n      containers:\n        - c\n",
       "spec.template.spec.containers[0]: expected a map, found a scalar"},
      {"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  annotations:\n"
       "    tessera.io/gpu-memory: 1Gi\n    tessera.io/gpu-compute: '0.1'\nspec:\n  template:\n"
       "    spec:\n      nodeSelector: gpu\n      containers:\n        - name: c\n",
       "spec.template.spec.nodeSelector: expected a map, found a scalar"},
  };
  for (const BadCase& c : cases) {
    model::WorkloadSet set;
    std::vector<std::string> skipped;
    absl::Status s = DecodeWorkloads("w.yaml", c.text, &set, &skipped);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_THAT(s.message(), HasSubstr(c.expect)) << c.text;
  }
}

TEST(DecodeWorkloads, DeploymentsWithAnnotations) {
  model::WorkloadSet set;
  std::vector<std::string> skipped;
  absl::Status s = DecodeWorkloads("d.yaml", TestData("deployments.yaml"), &set, &skipped);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(set.workloads.size(), 2u);
  const model::Workload& chat = set.workloads[0];
  EXPECT_EQ(chat.key(), "llm/chat-small");
  EXPECT_EQ(chat.replicas, 4);
  EXPECT_EQ(chat.memory_bytes, 18 * kGiB);
  EXPECT_EQ(chat.compute_milli, 200);
  EXPECT_EQ(chat.isolation, model::Isolation::kMemory);
  EXPECT_EQ(chat.container_name, "vllm");  // the container asking for a GPU
  EXPECT_THAT(chat.deployment_yaml, HasSubstr("vllm-openai"));
  const model::Workload& embed = set.workloads[1];
  EXPECT_EQ(embed.compute_milli, 100);
  EXPECT_EQ(embed.isolation, model::Isolation::kNone);
  ASSERT_EQ(embed.allowed_models.size(), 2u);
  EXPECT_EQ(embed.allowed_models[1]->name, "L4");
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0], HasSubstr("llm/web-frontend"));
}

TEST(DecodeWorkloads, KubectlDeploymentListJson) {
  const char* list = R"({"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "apps/v1", "kind": "Deployment",
     "metadata": {"name": "rerank", "namespace": "search",
                  "annotations": {"tessera.io/gpu-memory": "6Gi",
                                  "tessera.io/gpu-compute": "0.15"}},
     "spec": {"replicas": 3, "template": {"spec": {"containers": [
        {"name": "server", "image": "tei:1.6", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}]})";
  model::WorkloadSet set;
  std::vector<std::string> skipped;
  absl::Status s = DecodeWorkloads("d.json", list, &set, &skipped);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(set.workloads.size(), 1u);
  EXPECT_EQ(set.workloads[0].key(), "search/rerank");
  EXPECT_EQ(set.workloads[0].compute_milli, 150);
  // A bad annotation names the file and the annotation.
  std::string bad = list;
  bad.replace(bad.find("\"6Gi\""), 5, "\"6GB\"");
  model::WorkloadSet set2;
  s = DecodeWorkloads("d.json", bad, &set2, &skipped);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("d.json:4:"));
  EXPECT_THAT(s.message(), HasSubstr("tessera.io/gpu-memory: invalid byte quantity \"6GB\""));
}

TEST(ParseGpuCompute, SharesAndWholeGpus) {
  EXPECT_EQ(*ParseGpuCompute("0.2"), 200);
  EXPECT_EQ(*ParseGpuCompute("1"), 1000);
  EXPECT_EQ(*ParseGpuCompute("4"), 4000);
  EXPECT_FALSE(ParseGpuCompute("2.5").ok());
  EXPECT_FALSE(ParseGpuCompute("0").ok());
  EXPECT_FALSE(ParseGpuCompute("-1").ok());
}

}  // namespace
}  // namespace tessera::adapters
