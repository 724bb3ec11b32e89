#include "adapters/k8s/decoders.h"

#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "adapters/k8s/yaml_reader.h"
#include "base/status.h"
#include "base/units.h"

namespace tessera::adapters {
namespace {

using model::GpuCatalog;
using model::GpuModel;

// Kubernetes object names: DNS-1123 subdomain (lowercase alphanumerics, '-', '.').
bool ValidName(absl::string_view s) {
  if (s.empty() || s.size() > 253) {
    return false;
  }
  for (char c : s) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' || c == '.')) {
      return false;
    }
  }
  return absl::ascii_isalnum(s.front()) && absl::ascii_isalnum(s.back());
}

absl::StatusOr<std::string> ReadName(const Field& f) {
  TESSERA_ASSIGN_OR_RETURN(std::string name, f.String());
  if (!ValidName(name)) {
    return f.Error(absl::StrCat("\"", name,
                                "\" is not a valid name (expected lowercase letters, digits, '-' "
                                "or '.', starting and ending with a letter or digit)"));
  }
  return name;
}

absl::Status CheckHeader(const Field& doc, absl::string_view kind) {
  TESSERA_ASSIGN_OR_RETURN(std::string api, doc.Get("apiVersion").String());
  if (api != kApiVersion) {
    return doc.Get("apiVersion")
        .Error(absl::StrCat("expected \"", kApiVersion, "\", found \"", api, "\""));
  }
  TESSERA_ASSIGN_OR_RETURN(std::string k, doc.Get("kind").String());
  if (k != kind) {
    return doc.Get("kind").Error(absl::StrCat("expected \"", kind, "\", found \"", k, "\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<const GpuModel*> ReadModel(const Field& f, std::optional<int64_t> memory_mib) {
  TESSERA_ASSIGN_OR_RETURN(std::string name, f.String());
  absl::StatusOr<const GpuModel*> m = GpuCatalog::Default().Lookup(name, memory_mib);
  if (!m.ok()) {
    return f.Error(m.status().message());
  }
  return *m;
}

model::SourceRef Ref(const Field& f) { return {f.file(), f.line()}; }

absl::StatusOr<model::Fleet> DecodeFleetDocument(const Field& doc) {
  TESSERA_RETURN_IF_ERROR(doc.OnlyKeys({"apiVersion", "kind", "metadata", "pools"}));
  TESSERA_RETURN_IF_ERROR(CheckHeader(doc, "Fleet"));
  TESSERA_ASSIGN_OR_RETURN(std::vector<Field> pools, doc.Get("pools").Items());
  if (pools.empty()) {
    return doc.Get("pools").Error("expected at least one pool");
  }
  model::Fleet fleet;
  std::set<std::string> names;
  for (const Field& pf : pools) {
    TESSERA_RETURN_IF_ERROR(
        pf.OnlyKeys({"name", "gpuModel", "gpusPerNode", "nodes", "maxNodes", "costPerGpuHour"}));
    model::Pool pool;
    TESSERA_ASSIGN_OR_RETURN(pool.name, ReadName(pf.Get("name")));
    if (!names.insert(pool.name).second) {
      return pf.Get("name").Error(absl::StrCat("duplicate pool name \"", pool.name, "\""));
    }
    TESSERA_ASSIGN_OR_RETURN(pool.gpu, ReadModel(pf.Get("gpuModel"), std::nullopt));
    TESSERA_ASSIGN_OR_RETURN(int64_t gpn, pf.Get("gpusPerNode").Int(1, 64));
    TESSERA_ASSIGN_OR_RETURN(int64_t nodes, pf.Get("nodes").Int(0, 100000));
    TESSERA_ASSIGN_OR_RETURN(std::optional<int64_t> max_nodes,
                             pf.Get("maxNodes").OptionalInt(0, 100000));
    if (max_nodes.has_value() && *max_nodes < nodes) {
      return pf.Get("maxNodes")
          .Error(absl::StrCat("maxNodes ", *max_nodes, " is below nodes ", nodes));
    }
    pool.gpus_per_node = static_cast<int>(gpn);
    pool.nodes = static_cast<int>(nodes);
    pool.max_nodes = static_cast<int>(max_nodes.value_or(nodes));
    if (pool.max_nodes == 0) {
      return pf.Error("pool has no nodes and may not grow (set nodes or maxNodes above 0)");
    }
    TESSERA_ASSIGN_OR_RETURN(std::optional<double> cost,
                             pf.Get("costPerGpuHour").OptionalNumber(0, 1000));
    pool.cost_per_gpu_hour = cost.value_or(pool.gpu->price_per_gpu_hour);
    pool.gpu_memory_bytes = pool.gpu->memory_bytes;
    pool.mig_allowed = pool.gpu->mig_capable();
    pool.source = Ref(pf);
    fleet.pools.push_back(std::move(pool));
  }
  return fleet;
}

// A label value of a node, or "".
std::string Label(const Field& node, absl::string_view key) {
  Field f = node.Get("metadata").Get("labels").Get(key);
  return f.present() && f.node().IsScalar() ? f.node().Scalar() : std::string();
}

absl::StatusOr<model::Fleet> DecodeNodeList(const Field& doc, std::vector<std::string>* skipped) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<Field> items, doc.Get("items").Items());
  const size_t skipped_before = skipped == nullptr ? 0 : skipped->size();
  // Pools: nodes with the same GPU model, GPU count, memory and MIG capability.
  struct Group {
    model::Pool pool;
  };
  std::map<std::string, Group> groups;
  std::vector<std::string> order;
  for (const Field& item : items) {
    TESSERA_ASSIGN_OR_RETURN(std::string kind, item.Get("kind").StringOr("Node"));
    if (kind != "Node") {
      return item.Get("kind").Error(absl::StrCat("expected a Node, found \"", kind, "\""));
    }
    // A node's name goes into labels.sh's kubectl commands: only what Kubernetes allows.
    TESSERA_ASSIGN_OR_RETURN(std::string name, ReadName(item.Get("metadata").Get("name")));
    std::string product = Label(item, "nvidia.com/gpu.product");
    if (product.empty()) {
      continue;  // not a GPU node (GPU feature discovery did not label it)
    }
    Field labels = item.Get("metadata").Get("labels");
    std::string count_text = Label(item, "nvidia.com/gpu.count");
    int64_t count = 0;
    if (!absl::SimpleAtoi(count_text, &count) || count < 1 || count > 512) {
      return labels.Get("nvidia.com/gpu.count")
          .Error(absl::StrCat("expected a GPU count from 1 to 512, found \"", count_text, "\""));
    }
    std::optional<int64_t> memory_mib;
    std::string memory_text = Label(item, "nvidia.com/gpu.memory");
    bool mig_product = absl::StrContains(product, "-MIG-");
    if (!memory_text.empty() && !mig_product) {
      int64_t mib = 0;
      if (!absl::SimpleAtoi(memory_text, &mib) || mib <= 0) {
        return labels.Get("nvidia.com/gpu.memory")
            .Error(absl::StrCat("expected memory in MiB, found \"", memory_text, "\""));
      }
      memory_mib = mib;
    }
    // A node the labels cannot describe: an error naming it, or skipped with the reason.
    auto undescribable = [&](const std::string& why) -> absl::Status {
      absl::Status error = labels.Get("nvidia.com/gpu.product").Error(why);
      if (skipped == nullptr) {
        return error;
      }
      skipped->push_back(absl::StrCat("node ", name, ": ", error.message()));
      return absl::OkStatus();
    };
    absl::StatusOr<const GpuModel*> model = GpuCatalog::Default().Lookup(product, memory_mib);
    if (!model.ok()) {
      TESSERA_RETURN_IF_ERROR(undescribable(absl::StrCat(
          model.status().message(), "; describe this node in a Fleet file (gpuModel, memory)")));
      continue;
    }
    if (mig_product) {
      // Single MIG strategy: gpu.count counts MIG devices of one profile, as mig-manager's
      // all-<profile> configs create them; physical GPUs = count / instances per GPU.
      std::string profile = product.substr(product.find("-MIG-") + 5);
      const model::MigProfile* p = (*model)->FindProfile(profile);
      if (p == nullptr || count % p->max_count != 0) {
        TESSERA_RETURN_IF_ERROR(undescribable(
            absl::StrCat("cannot tell how many physical GPUs hold ", count, " ", profile,
                         " MIG devices (expected a multiple of the profile's maximum per "
                         "GPU); use a Fleet file for this node")));
        continue;
      }
      count /= p->max_count;
    }
    std::string mig_capable = Label(item, "nvidia.com/mig.capable");
    bool mig_allowed = (*model)->mig_capable() && mig_capable != "false";
    int64_t memory_bytes = memory_mib.has_value() ? *memory_mib * kMiB : (*model)->memory_bytes;
    std::string key = absl::StrCat((*model)->name, "/", count, "/", memory_bytes, "/", mig_allowed);
    auto [it, fresh] = groups.try_emplace(key);
    model::Pool& pool = it->second.pool;
    if (fresh) {
      order.push_back(key);
      pool.name = absl::StrCat(absl::AsciiStrToLower((*model)->name), "-x", count);
      pool.gpu = *model;
      pool.gpus_per_node = static_cast<int>(count);
      pool.cost_per_gpu_hour = (*model)->price_per_gpu_hour;
      pool.gpu_memory_bytes = memory_bytes;
      pool.mig_allowed = mig_allowed;
      pool.source = Ref(item);
    }
    ++pool.nodes;
    pool.node_names.push_back(name);
  }
  model::Fleet fleet;
  std::set<std::string> names;
  for (const std::string& key : order) {
    model::Pool pool = std::move(groups[key].pool);
    pool.max_nodes = pool.nodes;
    // Two groups of one model and count (e.g. different memory labels) get distinct names.
    std::string base = pool.name;
    for (int i = 2; !names.insert(pool.name).second; ++i) {
      pool.name = absl::StrCat(base, "-", i);
    }
    fleet.pools.push_back(std::move(pool));
  }
  if (fleet.pools.empty() && skipped != nullptr && skipped->size() > skipped_before) {
    return doc.Error(
        absl::StrCat("no GPU nodes left to plan: all ", skipped->size() - skipped_before,
                     " GPU nodes were skipped; the first: ", (*skipped)[skipped_before]));
  }
  if (fleet.pools.empty()) {
    return doc.Error(
        "no GPU nodes: no node has the nvidia.com/gpu.product label of GPU feature discovery");
  }
  return fleet;
}

absl::StatusOr<std::vector<const GpuModel*>> ReadModels(const Field& f) {
  std::vector<const GpuModel*> out;
  TESSERA_ASSIGN_OR_RETURN(std::vector<Field> items, f.Items());
  for (const Field& item : items) {
    TESSERA_ASSIGN_OR_RETURN(const GpuModel* m, ReadModel(item, std::nullopt));
    out.push_back(m);
  }
  return out;
}

absl::StatusOr<model::Isolation> ParseIsolation(const Field& f, absl::string_view text) {
  if (text == "none") return model::Isolation::kNone;
  if (text == "memory") return model::Isolation::kMemory;
  if (text == "full") return model::Isolation::kFull;
  return f.Error(absl::StrCat("expected none, memory or full, found \"", text, "\""));
}

absl::Status AddWorkload(model::Workload w, const Field& at, model::WorkloadSet* set) {
  for (const model::Workload& other : set->workloads) {
    if (other.key() == w.key()) {
      return at.Error(absl::StrCat("duplicate workload ", w.key(), " (first defined at ",
                                   other.source.ToString(), ")"));
    }
  }
  set->workloads.push_back(std::move(w));
  return absl::OkStatus();
}

absl::Status DecodeWorkloadSet(const Field& doc, model::WorkloadSet* set) {
  TESSERA_RETURN_IF_ERROR(doc.OnlyKeys({"apiVersion", "kind", "metadata", "workloads"}));
  TESSERA_RETURN_IF_ERROR(CheckHeader(doc, "WorkloadSet"));
  TESSERA_ASSIGN_OR_RETURN(std::vector<Field> items, doc.Get("workloads").Items());
  if (items.empty()) {
    return doc.Get("workloads").Error("expected at least one workload");
  }
  for (const Field& wf : items) {
    TESSERA_RETURN_IF_ERROR(wf.OnlyKeys({"name", "namespace", "replicas", "gpuMemory", "gpuCompute",
                                         "isolation", "gpuModels", "containerName"}));
    model::Workload w;
    TESSERA_ASSIGN_OR_RETURN(w.name, ReadName(wf.Get("name")));
    TESSERA_ASSIGN_OR_RETURN(std::string ns, wf.Get("namespace").StringOr("default"));
    TESSERA_ASSIGN_OR_RETURN(
        w.ns, ReadName(Field(wf.file(), YAML::Node(ns), wf.Get("namespace").path())));
    TESSERA_ASSIGN_OR_RETURN(int64_t replicas, wf.Get("replicas").Int(1, 100000));
    w.replicas = static_cast<int>(replicas);
    TESSERA_ASSIGN_OR_RETURN(std::string memory, wf.Get("gpuMemory").String());
    absl::StatusOr<int64_t> bytes = ParseBytes(memory);
    if (!bytes.ok()) {
      return wf.Get("gpuMemory").Error(bytes.status().message());
    }
    w.memory_bytes = *bytes;
    TESSERA_ASSIGN_OR_RETURN(std::string compute, wf.Get("gpuCompute").String());
    absl::StatusOr<int64_t> milli = ParseGpuCompute(compute);
    if (!milli.ok()) {
      return wf.Get("gpuCompute").Error(milli.status().message());
    }
    w.compute_milli = *milli;
    TESSERA_ASSIGN_OR_RETURN(std::string iso, wf.Get("isolation").StringOr("none"));
    TESSERA_ASSIGN_OR_RETURN(w.isolation, ParseIsolation(wf.Get("isolation"), iso));
    TESSERA_ASSIGN_OR_RETURN(w.allowed_models, ReadModels(wf.Get("gpuModels")));
    TESSERA_ASSIGN_OR_RETURN(w.container_name, wf.Get("containerName").StringOr(w.name));
    w.source = Ref(wf);
    if (w.memory_bytes <= 0) {
      return wf.Get("gpuMemory").Error("expected a quantity above zero");
    }
    TESSERA_RETURN_IF_ERROR(AddWorkload(std::move(w), wf, set));
  }
  return absl::OkStatus();
}

absl::Status DecodeDeployment(const Field& doc, model::WorkloadSet* set,
                              std::vector<std::string>* skipped) {
  Field meta = doc.Get("metadata");
  TESSERA_ASSIGN_OR_RETURN(std::string name, ReadName(meta.Get("name")));
  TESSERA_ASSIGN_OR_RETURN(std::string ns, meta.Get("namespace").StringOr("default"));
  Field annotations = meta.Get("annotations");
  Field memory_f = annotations.Get(kGpuMemoryAnnotation);
  if (!memory_f.present()) {
    skipped->push_back(absl::StrCat(ns, "/", name, " (", doc.file(), ":", doc.line(), "): no ",
                                    kGpuMemoryAnnotation, " annotation"));
    return absl::OkStatus();
  }
  model::Workload w;
  w.name = name;
  w.ns = ns;
  TESSERA_ASSIGN_OR_RETURN(std::string memory, memory_f.String());
  absl::StatusOr<int64_t> bytes = ParseBytes(memory);
  if (!bytes.ok()) {
    return memory_f.Error(bytes.status().message());
  }
  if (*bytes <= 0) {
    return memory_f.Error("expected a quantity above zero");
  }
  w.memory_bytes = *bytes;
  Field compute_f = annotations.Get(kGpuComputeAnnotation);
  TESSERA_ASSIGN_OR_RETURN(std::string compute, compute_f.String());
  absl::StatusOr<int64_t> milli = ParseGpuCompute(compute);
  if (!milli.ok()) {
    return compute_f.Error(milli.status().message());
  }
  w.compute_milli = *milli;
  Field iso_f = annotations.Get(kIsolationAnnotation);
  TESSERA_ASSIGN_OR_RETURN(std::string iso, iso_f.StringOr("none"));
  TESSERA_ASSIGN_OR_RETURN(w.isolation, ParseIsolation(iso_f, iso));
  Field models_f = annotations.Get(kGpuModelsAnnotation);
  if (models_f.present()) {
    TESSERA_ASSIGN_OR_RETURN(std::string models, models_f.String());
    for (absl::string_view m : absl::StrSplit(models, ',', absl::SkipWhitespace())) {
      absl::StatusOr<const GpuModel*> model =
          GpuCatalog::Default().Lookup(absl::StripAsciiWhitespace(m));
      if (!model.ok()) {
        return models_f.Error(model.status().message());
      }
      w.allowed_models.push_back(*model);
    }
  }
  TESSERA_ASSIGN_OR_RETURN(std::optional<int64_t> replicas,
                           doc.Get("spec").Get("replicas").OptionalInt(0, 100000));
  w.replicas = static_cast<int>(replicas.value_or(1));  // Kubernetes' default
  const Field pod_spec = doc.Get("spec").Get("template").Get("spec");
  TESSERA_ASSIGN_OR_RETURN(std::vector<Field> containers, pod_spec.Get("containers").Items());
  if (containers.empty()) {
    return pod_spec.Get("containers").Error("expected at least one container");
  }
  // The container that asks for a GPU, else the first.
  const Field* gpu_container = &containers[0];
  // What `tessera plan` rewrites must have the shape Kubernetes requires of it: every container
  // a map with a name, resources and their limits and requests maps, nodeSelector a map.
  if (Field selector = pod_spec.Get("nodeSelector"); selector.present()) {
    TESSERA_RETURN_IF_ERROR(selector.RequireMap());
  }
  for (const Field& c : containers) {
    TESSERA_RETURN_IF_ERROR(c.RequireMap());
    TESSERA_RETURN_IF_ERROR(c.Get("name").String().status());
    Field res = c.Get("resources");
    if (res.present()) {
      TESSERA_RETURN_IF_ERROR(res.RequireMap());
    }
    for (const char* part : {"limits", "requests"}) {
      const Field entries = res.Get(part);  // named: node() refers into it
      if (entries.present()) {
        TESSERA_RETURN_IF_ERROR(entries.RequireMap());
        for (const auto& kv : entries.node()) {
          if (!kv.first.IsScalar()) {  // `? [a, b]: 1`: yaml-cpp's as<std::string> throws on it
            return Field(entries.file(), kv.first, entries.path())
                .Error("expected resource names as keys, found a key that is not a string");
          }
          if (absl::StartsWith(kv.first.Scalar(), "nvidia.com/")) {
            gpu_container = &c;
          }
        }
      }
    }
  }
  TESSERA_ASSIGN_OR_RETURN(w.container_name, gpu_container->Get("name").String());
  w.deployment_yaml = YAML::Dump(doc.node());
  w.source = Ref(doc);
  return AddWorkload(std::move(w), doc, set);
}

}  // namespace

absl::StatusOr<int64_t> ParseGpuCompute(absl::string_view text) {
  absl::StatusOr<int64_t> milli = ParseMilliGpu(text);
  if (!milli.ok()) {
    return milli.status();
  }
  if (*milli <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid GPU compute \"", text,
                     "\": expected a share above 0 and at most 1, or a whole "
                     "number of GPUs"));
  }
  if (*milli > 1000 && *milli % 1000 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid GPU compute \"", text,
                     "\": above 1 it counts whole GPUs (expected 2, 4, ...), found a fraction"));
  }
  return *milli;
}

absl::StatusOr<model::Fleet> DecodeFleet(absl::string_view file, absl::string_view text,
                                         std::vector<std::string>* skipped) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> docs, ParseYamlDocuments(file, text));
  if (docs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        file,
        ": empty input (expected a tessera.io/v1alpha1 Fleet or `kubectl get nodes -o json`)"));
  }
  if (docs.size() > 1) {
    return Field(std::string(file), docs[1], "").Error("expected one document, found several");
  }
  Field doc(std::string(file), docs[0], "");
  TESSERA_RETURN_IF_ERROR(doc.RequireMap());
  TESSERA_ASSIGN_OR_RETURN(std::string kind, doc.Get("kind").String());
  if (kind == "Fleet") {
    return DecodeFleetDocument(doc);
  }
  if (kind == "List" || kind == "NodeList") {
    return DecodeNodeList(doc, skipped);
  }
  return doc.Get("kind").Error(absl::StrCat(
      "expected Fleet, or List/NodeList from `kubectl get nodes -o json`, found \"", kind, "\""));
}

absl::Status DecodeWorkloads(absl::string_view file, absl::string_view text,
                             model::WorkloadSet* set, std::vector<std::string>* skipped) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> docs, ParseYamlDocuments(file, text));
  if (docs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": empty input (expected a tessera.io/v1alpha1 WorkloadSet or Deployments)"));
  }
  for (const YAML::Node& node : docs) {
    Field doc(std::string(file), node, "");
    TESSERA_RETURN_IF_ERROR(doc.RequireMap());
    TESSERA_ASSIGN_OR_RETURN(std::string kind, doc.Get("kind").String());
    if (kind == "WorkloadSet") {
      TESSERA_RETURN_IF_ERROR(DecodeWorkloadSet(doc, set));
    } else if (kind == "Deployment") {
      TESSERA_RETURN_IF_ERROR(DecodeDeployment(doc, set, skipped));
    } else if (kind == "List" || kind == "DeploymentList") {
      TESSERA_ASSIGN_OR_RETURN(std::vector<Field> items, doc.Get("items").Items());
      for (const Field& item : items) {
        TESSERA_ASSIGN_OR_RETURN(std::string k, item.Get("kind").StringOr("Deployment"));
        if (k != "Deployment") {
          return item.Get("kind").Error(absl::StrCat("expected a Deployment, found \"", k, "\""));
        }
        TESSERA_RETURN_IF_ERROR(DecodeDeployment(item, set, skipped));
      }
    } else {
      return doc.Get("kind").Error(absl::StrCat(
          "expected WorkloadSet, Deployment or a List of Deployments, found \"", kind, "\""));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::adapters
