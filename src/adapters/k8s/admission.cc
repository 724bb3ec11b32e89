#include "adapters/k8s/admission.h"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "adapters/k8s/decoders.h"
#include "adapters/k8s/extender_protocol.h"
#include "adapters/net/httplib_serve.h"
#include "adapters/net/tls_files.h"
#include "base/status.h"

namespace tessera::adapters {
namespace {

using nlohmann::json;

constexpr char kDefaultScheduler[] = "default-scheduler";

absl::Status Bad(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

std::string FieldPathOf(const std::string& annotation) {
  return absl::StrCat("metadata.annotations['", annotation, "']");
}

// Whether the pod asks for GPUs with the share annotations, read as DecodeGpuRequest reads them
// (an empty value is no value): only such pods get the env. A pod asking for nvidia.com/gpu gets
// its GPUs, and their env, from the device plugin, and is none of the webhook's business.
bool AsksForAShare(const json& pod) {
  if (!pod.is_object() || !pod.contains("metadata")) return false;
  const json& meta = pod["metadata"];
  if (!meta.is_object() || !meta.contains("annotations")) return false;
  const json& a = meta["annotations"];
  if (!a.is_object()) return false;
  for (const char* key : {kGpuMemoryAnnotation, kGpuComputeAnnotation}) {
    if (a.contains(key) && !(a[key].is_string() && a[key].get<std::string>().empty())) {
      return true;
    }
  }
  return false;
}

// An env entry's valueFrom.fieldRef.fieldPath; "" when it has none. (Checked at each level:
// anyone who reaches the webhook's port can send any shape.)
std::string FieldPathIn(const json& e) {
  const json* at = &e;
  for (const char* key : {"valueFrom", "fieldRef", "fieldPath"}) {
    if (!at->is_object() || !at->contains(key)) return "";
    at = &(*at)[key];
  }
  return at->is_string() ? at->get<std::string>() : "";
}

// "name" of container `c`, for messages.
std::string NameOf(const json& c, size_t i) {
  if (c.contains("name") && c["name"].is_string()) return c["name"].get<std::string>();
  return absl::StrCat("#", i);
}

// Whether an env entry already present takes its value from where `wanted` does: the same
// literal value, or the same fieldRef path.
bool SameSource(const json& present, const json& wanted) {
  if (wanted.contains("value")) {
    return present.contains("value") && present["value"] == wanted["value"];
  }
  return FieldPathIn(present) == FieldPathIn(wanted);
}

// The env entries a sharing pod's containers get, in order: ShareEnv's, then the MPS pipe
// directory's with options.mps_directory.
std::vector<json> WantedEnv(const AdmissionOptions& options) {
  std::vector<json> out;
  for (const auto& [var, annotation] : ShareEnv()) {
    out.push_back(
        {{"name", var},
         {"valueFrom",
          {{"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", FieldPathOf(annotation)}}}}}});
  }
  if (!options.mps_directory.empty()) {
    // The kubelet expands $(VAR) to the value of a variable defined before it in the list
    // (NVIDIA_VISIBLE_DEVICES, above, or the container's own): the assigned GPU's daemon.
    out.push_back(
        {{"name", "CUDA_MPS_PIPE_DIRECTORY"},
         {"value", absl::StrCat(options.mps_directory, "/pipes/gpu-$(NVIDIA_VISIBLE_DEVICES)")}});
  }
  return out;
}

// The volumes for the MPS daemons' pipes and shared memory, and where each container mounts
// them.
struct MpsVolume {
  json volume;
  std::string mount_path;
  const char* what;  // for messages
};

std::vector<MpsVolume> MpsVolumes(const std::string& dir) {
  auto host_dir = [](const char* name, const std::string& path) {
    return json{{"name", name}, {"hostPath", {{"path", path}, {"type", "Directory"}}}};
  };
  const std::string pipes = absl::StrCat(dir, "/pipes");
  return {{host_dir(kMpsVolume, pipes), pipes, "pipes"},
          {host_dir(kMpsShmVolume, absl::StrCat(dir, "/shm")), "/dev/shm", "shared memory"}};
}

// Member `key` of `j`, by its exact name (a patch's paths must name it so); nullptr when `j` is
// not an object or has no such member.
const json* Find(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

// The array member `key` of `j` (`where` names it in messages): nullptr when absent or null, an
// error when it is something else.
absl::StatusOr<const json*> OptionalArray(const json& j, const char* key,
                                          const std::string& where) {
  const json* at = Find(j, key);
  if (at == nullptr || at->is_null()) return nullptr;
  if (!at->is_array()) return Bad(where, "expected an array");
  return at;
}

// Adds `items` to the array at `path`, which `at` holds (nullptr: absent, so made), to `patch`.
void AddAll(const json* at, const std::string& path, std::vector<json> items, json* patch) {
  if (items.empty()) return;
  if (at == nullptr) {
    patch->push_back({{"op", "add"}, {"path", path}, {"value", json(std::move(items))}});
    return;
  }
  for (json& item : items) {
    patch->push_back({{"op", "add"}, {"path", path + "/-"}, {"value", std::move(item)}});
  }
}

// Adds to `patch` the MPS volumes the pod does not have already. An error when it has a volume
// of one of their names that is not theirs.
absl::Status AddMpsVolumes(const json& spec, const std::vector<MpsVolume>& mps, json* patch) {
  TESSERA_ASSIGN_OR_RETURN(const json* volumes, OptionalArray(spec, "volumes", "pod.spec.volumes"));
  std::vector<json> add;
  for (const MpsVolume& v : mps) {
    bool present = false;
    for (size_t k = 0; volumes != nullptr && k < volumes->size(); ++k) {
      const json& have = (*volumes)[k];
      const json* name = Find(have, "name");
      if (name == nullptr || *name != v.volume["name"]) continue;
      if (have != v.volume) {
        return Bad(absl::StrCat("pod.spec.volumes[", k, "]"),
                   absl::StrCat("the name ", name->get<std::string>(),
                                " is the one Tessera's webhook gives the MPS daemons' ", v.what,
                                " (hostPath ", v.volume["hostPath"]["path"].get<std::string>(),
                                "): rename this volume"));
      }
      present = true;
    }
    if (!present) add.push_back(v.volume);
  }
  AddAll(volumes, "/spec/volumes", std::move(add), patch);
  return absl::OkStatus();
}

// Where a container is in the pod: which list, and its index there.
struct ContainerAt {
  const char* list;  // "containers", "initContainers" or "ephemeralContainers"
  const char* kind;  // for messages: "container", "init container" or "ephemeral container"
  size_t i;

  // The field path of its member `member` ("": of the container), for messages:
  // pod.spec.containers[1].env.
  std::string Field(absl::string_view member) const {
    return absl::StrCat("pod.spec.", list, "[", i, "]", member.empty() ? "" : ".", member);
  }
  // The JSON Pointer of its member `member`, for the patch: /spec/containers/1/env.
  std::string Pointer(absl::string_view member) const {
    return absl::StrCat("/spec/", list, "/", i, "/", member);
  }
};

// Adds to `patch` the MPS mounts container `c` (at `where`) does not have already. An error when it
// mounts something else where one of them goes (/dev/shm, most often an emptyDir of medium
// Memory).
absl::Status AddMpsMounts(const json& c, const ContainerAt& where,
                          const std::vector<MpsVolume>& mps, json* patch) {
  const std::string at = where.Field("volumeMounts");
  TESSERA_ASSIGN_OR_RETURN(const json* mounts, OptionalArray(c, "volumeMounts", at));
  std::vector<json> add;
  for (const MpsVolume& v : mps) {
    const json& name = v.volume["name"];
    bool present = false;
    for (size_t k = 0; mounts != nullptr && k < mounts->size(); ++k) {
      const json& m = (*mounts)[k];
      const json* path = Find(m, "mountPath");
      if (path == nullptr || *path != v.mount_path) continue;
      const json* mounted = Find(m, "name");
      if (mounted == nullptr || *mounted != name) {
        return Bad(
            absl::StrCat(at, "[", k, "]"),
            absl::StrCat(where.kind, " ", NameOf(c, where.i), " mounts ",
                         mounted != nullptr ? mounted->dump() : "a volume", " at ", v.mount_path,
                         "; under MPS the webhook mounts the MPS daemons' ", v.what,
                         " there, which CUDA needs to reach them: remove this mount"));
      }
      present = true;
    }
    if (!present) add.push_back({{"name", name}, {"mountPath", v.mount_path}});
  }
  AddAll(mounts, where.Pointer("volumeMounts"), std::move(add), patch);
  return absl::OkStatus();
}

// The log line for a pod whose containers `outside` were left outside MPS: the pod by its
// namespace and name (generateName and "*" before the API server names it).
std::string OutsideMpsLine(const json& request, const json& pod,
                           const std::vector<std::string>& outside) {
  auto text = [](const json* j) {
    return j != nullptr && j->is_string() ? j->get<std::string>() : "";
  };
  const json* meta = Find(pod, "metadata");
  std::string name = meta != nullptr ? text(Find(*meta, "name")) : "";
  if (name.empty() && meta != nullptr) name = absl::StrCat(text(Find(*meta, "generateName")), "*");
  std::string ns = text(Find(request, "namespace"));
  if (ns.empty() && meta != nullptr) ns = text(Find(*meta, "namespace"));
  return absl::StrCat(
      "pod ", ns.empty() ? "" : absl::StrCat(ns, "/"), name, ": ", absl::StrJoin(outside, ", "),
      outside.size() == 1 ? " runs" : " run", " as another user than the main container and ",
      outside.size() == 1 ? "is" : "are", " left outside MPS: CUDA there is not held to the share");
}

// Adds to `m`'s patch the variables of `wanted` that container `c` (at `where`) does not set.
// One it sets from elsewhere is left as it is, with a warning; one already read from where the
// webhook reads it (a reinvocation) is left silently.
absl::Status AddEnv(const json& c, const ContainerAt& where, absl::Span<const json> wanted,
                    PodMutation* m) {
  TESSERA_ASSIGN_OR_RETURN(const json* env, OptionalArray(c, "env", where.Field("env")));
  std::vector<json> added;
  for (const json& w : wanted) {
    const json& var = w["name"];
    bool present = false;
    bool ours = false;
    for (size_t k = 0; env != nullptr && k < env->size(); ++k) {
      const json* name = Find((*env)[k], "name");
      if (name == nullptr || *name != var) continue;
      present = true;
      ours = ours || SameSource((*env)[k], w);
    }
    if (!present) {
      added.push_back(w);
    } else if (!ours) {
      m->warnings.push_back(absl::StrCat(where.kind, " ", NameOf(c, where.i), " sets ",
                                         var.get<std::string>(),
                                         " itself; left as it is, so it may not use the share "
                                         "Tessera assigns"));
    }
  }
  AddAll(env, where.Pointer("env"), std::move(added), &m->patch);
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckMpsDirectory(absl::string_view dir) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("MPS directory \"", dir, "\": ", what));
  };
  if (dir.empty() || dir.front() != '/') return bad("expected an absolute path");
  if (dir == "/") return bad("expected a directory of its own, not /");
  if (dir.back() == '/') return bad("expected no trailing /");
  for (absl::string_view part : absl::StrSplit(dir.substr(1), '/')) {
    if (part.empty() || part == "." || part == "..") {
      return bad("expected no empty, . or .. components");
    }
  }
  return absl::OkStatus();
}

const std::vector<std::pair<std::string, std::string>>& ShareEnv() {
  static const auto* env = new std::vector<std::pair<std::string, std::string>>{
      {"NVIDIA_VISIBLE_DEVICES", kVisibleDevicesAnnotation},
      {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", kMpsMemLimitAnnotation},
      {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", kMpsThreadPercentageAnnotation},
      {"TESSERA_GPU_MEMORY_FRACTION", kGpuMemoryFractionAnnotation},
  };
  return *env;
}

namespace {

// A pod that asks for a share of GPUs: what every container of it is given, and against whom its
// user is compared.
struct PodShare {
  placement::gpushare::GpuRequest req;
  const json* spec = nullptr;
  const json* containers = nullptr;  // spec.containers
  std::vector<json> wanted;          // WantedEnv
  std::vector<MpsVolume> mps;        // empty: no MPS directory
  // Whether the pod has (or is given) the MPS volumes its containers' mounts name. An ephemeral
  // container cannot add volumes: in a pod created without them it stays outside MPS.
  bool mps_volumes = false;
  // One GPU, shared or whole, is reached through its daemon; several GPUs are not (no daemon's
  // pipes are named DIR/pipes/gpu-2,3).
  bool through_daemon = false;
  // With MPS, the main container and its user: containers of other users are not made clients
  // of the daemon.
  size_t main = 0;
  std::string user;
};

// The share of `pod`; none when it asks for no share of GPUs.
absl::StatusOr<std::optional<PodShare>> ShareOf(const json& pod, const AdmissionOptions& options) {
  if (!AsksForAShare(pod)) return std::nullopt;  // nor is anything else wrong with it ours to say
  PodShare s;
  TESSERA_ASSIGN_OR_RETURN(s.req, DecodeGpuRequest(pod, "pod"));
  if (s.req.num_gpu == 0) return std::nullopt;
  s.spec = Find(pod, "spec");
  if (s.spec == nullptr || !s.spec->is_object()) return Bad("pod.spec", "expected an object");
  s.containers = Find(*s.spec, "containers");
  if (s.containers == nullptr || !s.containers->is_array()) {
    return Bad("pod.spec.containers", "expected an array");
  }
  s.wanted = WantedEnv(options);
  s.through_daemon = s.req.num_gpu == 1;
  if (options.mps_directory.empty()) return s;
  s.mps = MpsVolumes(options.mps_directory);
  if (s.through_daemon) {
    TESSERA_ASSIGN_OR_RETURN(s.main, MainContainerOf(pod, "pod"));
    TESSERA_ASSIGN_OR_RETURN(s.user, ContainerUserOf(pod, "containers", s.main, "pod"));
  }
  return s;
}

// Gives container `c` (at `where`) of `pod` its share: the env, and with MPS, when it runs as the
// main container's user and the pod has the volumes, the daemon's pipes and shared memory.
absl::Status ShareWith(const json& pod, const PodShare& s, const json& c, const ContainerAt& where,
                       PodMutation* m) {
  if (!c.is_object()) return Bad(where.Field(""), "expected an object");
  const std::string name = NameOf(c, where.i);
  // MPS runs one server per user ID at a time: a client of another user waits until every
  // client of the running one has exited, so a container of another user than the main one
  // (a sidecar such as istio-proxy, 1337) would hang at its first CUDA call for as long as
  // the main container runs. It gets the share's env but not the daemon's pipes: CUDA there
  // runs outside MPS, on the same GPU, not held to the share.
  bool client = !s.mps.empty();
  const bool main = absl::string_view(where.list) == "containers" && where.i == s.main;
  std::string outside;  // "NAME (USER)" when left outside MPS as of another user
  if (client && s.through_daemon && !main) {
    TESSERA_ASSIGN_OR_RETURN(std::string own, ContainerUserOf(pod, where.list, where.i, "pod"));
    if (own != s.user) {
      client = false;
      outside = absl::StrCat(name, " (", own, ")");
      m->warnings.push_back(absl::StrCat(
          where.kind, " ", name, " runs as ", own, ", not as the main container ",
          NameOf((*s.containers)[s.main], s.main), " (", s.user,
          "): it is not given the MPS daemon's pipes, since MPS serves one user per GPU and "
          "its CUDA calls would wait for the other user's to end; CUDA in it runs outside "
          "MPS, not held to the share. Give it the same runAsUser to make it an MPS "
          "client"));
    }
  }
  if (client && !s.mps_volumes) {
    client = false;
    m->warnings.push_back(absl::StrCat(
        where.kind, " ", name, " is not given the MPS daemon's pipes: the pod has no volumes ",
        kMpsVolume, " and ", kMpsShmVolume,
        " (it was created before the webhook ran with an MPS directory), and an ephemeral "
        "container cannot add volumes; CUDA in it runs outside MPS, not held to the share"));
  }
  // A client gets every variable; another container the share's alone (WantedEnv's first).
  const size_t vars = client || s.mps.empty() ? s.wanted.size() : ShareEnv().size();
  const size_t before = m->patch.size();
  TESSERA_RETURN_IF_ERROR(AddEnv(c, where, absl::MakeConstSpan(s.wanted).first(vars), m));
  // Counted and logged once, by the review that gives it the share: one the API server calls
  // again (a sidecar injector ran after the webhook) finds its env there and adds nothing.
  if (!outside.empty() && m->patch.size() > before) m->outside_mps.push_back(std::move(outside));
  if (client) TESSERA_RETURN_IF_ERROR(AddMpsMounts(c, where, s.mps, &m->patch));
  return absl::OkStatus();
}

// The names of the pod's ephemeral containers.
absl::StatusOr<std::vector<json>> EphemeralNames(const json& pod, const std::string& path) {
  std::vector<json> names;
  const json* spec = Find(pod, "spec");
  if (spec == nullptr) return names;
  TESSERA_ASSIGN_OR_RETURN(const json* all, OptionalArray(*spec, "ephemeralContainers",
                                                          path + ".spec.ephemeralContainers"));
  for (size_t i = 0; all != nullptr && i < all->size(); ++i) {
    const json* name = Find((*all)[i], "name");
    if (name != nullptr) names.push_back(*name);
  }
  return names;
}

}  // namespace

absl::StatusOr<PodMutation> MutatePod(const json& pod, const AdmissionOptions& options) {
  PodMutation m;
  TESSERA_ASSIGN_OR_RETURN(std::optional<PodShare> found, ShareOf(pod, options));
  if (!found) return m;
  PodShare& share = *found;
  const json* spec = share.spec;

  if (!options.scheduler_name.empty()) {
    const json* named = Find(*spec, "schedulerName");
    if (named == nullptr || named->is_null()) {
      m.patch.push_back(
          {{"op", "add"}, {"path", "/spec/schedulerName"}, {"value", options.scheduler_name}});
    } else if (*named == kDefaultScheduler) {
      m.patch.push_back(
          {{"op", "replace"}, {"path", "/spec/schedulerName"}, {"value", options.scheduler_name}});
    } else if (*named != options.scheduler_name) {
      m.warnings.push_back(absl::StrCat("spec.schedulerName is ", named->dump(),
                                        ": Tessera's extender places the GPU shares of pods of ",
                                        options.scheduler_name, " only"));
    }
  }

  if (!share.mps.empty()) {
    TESSERA_RETURN_IF_ERROR(AddMpsVolumes(*spec, share.mps, &m.patch));
    share.mps_volumes = true;
    // A pod sharing a GPU is an MPS client: the extender keeps its GPU to pods of its user.
    if (!share.req.whole()) {
      const json& annotations = pod["metadata"]["annotations"];  // AsksForAShare: an object
      const json* present = Find(annotations, kMpsUserAnnotation);
      if (present == nullptr || *present != share.user) {
        m.patch.push_back({{"op", present == nullptr ? "add" : "replace"},
                           {"path", absl::StrCat("/metadata/annotations/",
                                                 absl::StrReplaceAll(kMpsUserAnnotation,
                                                                     {{"~", "~0"}, {"/", "~1"}}))},
                           {"value", share.user}});
      }
    }
  }
  // The app containers, then the init containers (sidecars with restartPolicy Always among
  // them): a CUDA image says NVIDIA_VISIBLE_DEVICES=all, so a container left without the
  // share's env would see every GPU of the node, and none of them held to the share.
  for (const auto& [list, kind] :
       {std::pair{"containers", "container"}, std::pair{"initContainers", "init container"}}) {
    TESSERA_ASSIGN_OR_RETURN(const json* all,
                             OptionalArray(*spec, list, absl::StrCat("pod.spec.", list)));
    for (size_t i = 0; all != nullptr && i < all->size(); ++i) {
      TESSERA_RETURN_IF_ERROR(ShareWith(pod, share, (*all)[i], {list, kind, i}, &m));
    }
  }
  return m;
}

absl::StatusOr<PodMutation> MutateEphemeralContainers(const json& pod, const json& old_pod,
                                                      const AdmissionOptions& options) {
  PodMutation m;
  TESSERA_ASSIGN_OR_RETURN(std::optional<PodShare> found, ShareOf(pod, options));
  if (!found) return m;
  PodShare& share = *found;
  if (!share.mps.empty()) {
    // The volumes the webhook gave the pod at its creation, exactly: a pod cannot be given
    // volumes once it exists.
    TESSERA_ASSIGN_OR_RETURN(const json* volumes,
                             OptionalArray(*share.spec, "volumes", "pod.spec.volumes"));
    share.mps_volumes = volumes != nullptr;
    for (const MpsVolume& v : share.mps) {
      share.mps_volumes = share.mps_volumes &&
                          std::find(volumes->begin(), volumes->end(), v.volume) != volumes->end();
    }
  }
  TESSERA_ASSIGN_OR_RETURN(const json* all, OptionalArray(*share.spec, "ephemeralContainers",
                                                          "pod.spec.ephemeralContainers"));
  TESSERA_ASSIGN_OR_RETURN(std::vector<json> before, EphemeralNames(old_pod, "oldObject"));
  for (size_t i = 0; all != nullptr && i < all->size(); ++i) {
    // Those the pod had are not the webhook's to change (the API server refuses any change to
    // them); each was given its share when it was added.
    const json* name = Find((*all)[i], "name");
    if (name != nullptr && std::find(before.begin(), before.end(), *name) != before.end()) {
      continue;
    }
    TESSERA_RETURN_IF_ERROR(
        ShareWith(pod, share, (*all)[i], {"ephemeralContainers", "ephemeral container", i}, &m));
  }
  return m;
}

void AdmissionMetrics::CountReview(ReviewOutcome outcome) {
  switch (outcome) {
    case ReviewOutcome::kPatched:
      ++patched_;
      break;
    case ReviewOutcome::kUnchanged:
      ++unchanged_;
      break;
    case ReviewOutcome::kRefused:
      ++refused_;
      break;
  }
}

void AdmissionMetrics::CountMalformed() { ++malformed_; }

void AdmissionMetrics::CountOutsideMps(int64_t containers) { outside_mps_ += containers; }

void AdmissionMetrics::ShowTls(std::shared_ptr<const TlsFiles> files) {
  MutexLock lock(&mu_);
  tls_ = std::move(files);
}

std::string AdmissionMetrics::Text() const {
  std::string out = absl::StrCat(
      "# HELP tessera_webhook_reviews_total AdmissionReviews answered: patched (a sharing pod "
      "given its env), unchanged (let through as it is), refused (wrong share annotations, or "
      "a mount or volume in the MPS daemons' way), "
      "malformed (not an AdmissionReview request: HTTP 400, which the API server's "
      "failurePolicy Fail turns into a refused pod).\n"
      "# TYPE tessera_webhook_reviews_total counter\n");
  for (auto [outcome, n] : {std::pair{"patched", &patched_},
                            {"unchanged", &unchanged_},
                            {"refused", &refused_},
                            {"malformed", &malformed_}}) {
    absl::StrAppend(&out, "tessera_webhook_reviews_total{outcome=\"", outcome, "\"} ", n->load(),
                    "\n");
  }
  absl::StrAppend(
      &out,
      "# HELP tessera_webhook_mps_outside_containers_total Containers of pods given one GPU "
      "through its MPS daemon that are left outside MPS because they run as another user than "
      "the pod's main container (an MPS daemon serves one user at a time): CUDA in them is not "
      "held to the share. Counted by the review that gives each its env (not again when the API "
      "server calls the webhook again for the same pod); the log names each pod.\n"
      "# TYPE tessera_webhook_mps_outside_containers_total counter\n"
      "tessera_webhook_mps_outside_containers_total ",
      outside_mps_.load(), "\n");
  std::shared_ptr<const TlsFiles> tls;
  {
    MutexLock lock(&mu_);
    tls = tls_;
  }
  AppendTlsMetrics(&out, "tessera_webhook", tls.get(), "the webhook serves to the API server",
                   "read at each TLS handshake");
  AppendTlsHandshakeMetrics(&out, "tessera_webhook", &handshakes_);
  return out;
}

absl::StatusOr<std::string> ReviewAdmission(absl::string_view body, const AdmissionOptions& options,
                                            ReviewOutcome* outcome) {
  TESSERA_ASSIGN_OR_RETURN(json review, ParseJson(body, "AdmissionReview"));
  if (!review.is_object()) return Bad("AdmissionReview", "expected an object");
  if (review.value("apiVersion", json()) != "admission.k8s.io/v1" ||
      review.value("kind", json()) != "AdmissionReview") {
    return Bad("AdmissionReview",
               absl::StrCat("expected apiVersion admission.k8s.io/v1 and kind AdmissionReview, "
                            "found ",
                            review.value("apiVersion", json()).dump(), " and ",
                            review.value("kind", json()).dump()));
  }
  const json* request = Find(review, "request");
  if (request == nullptr || !request->is_object()) {
    return Bad("AdmissionReview.request", "required object missing");
  }
  if (!request->contains("uid") || !(*request)["uid"].is_string() ||
      (*request)["uid"].get<std::string>().empty()) {
    return Bad("AdmissionReview.request.uid", "required string missing");
  }
  json response = {{"uid", (*request)["uid"]}, {"allowed", true}};
  ReviewOutcome result = ReviewOutcome::kUnchanged;
  const json kind = request->value("kind", json::object());
  const bool pod = kind.is_object() && kind.value("group", json("")) == "" &&
                   kind.value("kind", json()) == "Pod";
  const json operation = request->value("operation", json());
  const json sub_resource = request->value("subResource", json(""));
  // A pod's CREATE, or the UPDATE of its ephemeralcontainers subresource (kubectl debug), whose
  // object is the whole pod since Kubernetes 1.22.
  const bool pod_create = pod && operation == "CREATE" && sub_resource == "";
  const bool ephemeral = pod && operation == "UPDATE" && sub_resource == "ephemeralcontainers";
  if (pod_create || ephemeral) {
    const json* object = Find(*request, "object");
    if (object == nullptr || !object->is_object()) {
      return Bad("AdmissionReview.request.object", "required object missing");
    }
    const json* old_object = Find(*request, "oldObject");
    if (ephemeral && (old_object == nullptr || !old_object->is_object())) {
      return Bad("AdmissionReview.request.oldObject",
                 "required object missing (the pod before its ephemeral containers' update)");
    }
    absl::StatusOr<PodMutation> m = ephemeral
                                        ? MutateEphemeralContainers(*object, *old_object, options)
                                        : MutatePod(*object, options);
    if (!m.ok()) {
      result = ReviewOutcome::kRefused;
      response["allowed"] = false;
      response["status"] = {{"status", "Failure"},
                            {"reason", "BadRequest"},
                            {"code", 400},
                            {"message", absl::StrCat("tessera: ", m.status().message())}};
    } else {
      if (!m->patch.empty()) {
        result = ReviewOutcome::kPatched;
        response["patchType"] = "JSONPatch";
        response["patch"] = absl::Base64Escape(m->patch.dump());
      }
      if (!m->warnings.empty()) response["warnings"] = m->warnings;
      if (!m->outside_mps.empty()) {
        if (options.metrics != nullptr) {
          options.metrics->CountOutsideMps(static_cast<int64_t>(m->outside_mps.size()));
        }
        if (options.log) options.log(OutsideMpsLine(*request, *object, m->outside_mps));
      }
    }
  }
  if (outcome != nullptr) *outcome = result;
  return json{{"apiVersion", "admission.k8s.io/v1"},
              {"kind", "AdmissionReview"},
              {"response", std::move(response)}}
      .dump();
}

namespace {

// OpenSSL's certificate callback (SSL_CTX_set_cert_cb), called at every handshake before the
// server's certificate is sent: the files are read again (`arg` is the TlsFiles); a pair that
// loads is served, a pair that does not (a renewal half written, a key beside the wrong
// certificate) is reported once per change and the last good pair is served instead, so a broken
// Secret does not fail the API server's calls. 0 fails the handshake.
struct CertificateCallback {
  TlsFiles* files;
  std::function<void(const std::string&)> log;
};

int UseCertificate(SSL* ssl, void* arg) {
  const auto* cb = static_cast<const CertificateCallback*>(arg);
  TlsFiles::Reloaded r = cb->files->Reload();
  if (r.outcome == TlsFiles::Outcome::kRefused && cb->log) cb->log(r.message);
  const TlsFiles::Material m = cb->files->current();
  // The chain (leaf first) and key, from memory, for this connection.
  BIO* certs = BIO_new_mem_buf(m.cert_pem.data(), static_cast<int>(m.cert_pem.size()));
  BIO* keys = BIO_new_mem_buf(m.key_pem.data(), static_cast<int>(m.key_pem.size()));
  bool ok = certs != nullptr && keys != nullptr;
  X509* leaf = ok ? PEM_read_bio_X509(certs, nullptr, nullptr, nullptr) : nullptr;
  ok = leaf != nullptr && SSL_use_certificate(ssl, leaf) == 1 && SSL_clear_chain_certs(ssl) == 1;
  while (ok) {
    X509* next = PEM_read_bio_X509(certs, nullptr, nullptr, nullptr);
    if (next == nullptr) break;
    ok = SSL_add0_chain_cert(ssl, next) == 1;  // takes `next` on success
    if (!ok) X509_free(next);
  }
  EVP_PKEY* pkey = ok ? PEM_read_bio_PrivateKey(keys, nullptr, nullptr, nullptr) : nullptr;
  ok = pkey != nullptr && SSL_use_PrivateKey(ssl, pkey) == 1 && SSL_check_private_key(ssl) == 1;
  EVP_PKEY_free(pkey);
  X509_free(leaf);
  BIO_free(keys);
  BIO_free(certs);
  ERR_clear_error();  // the end of the chain reads as an error
  return ok ? 1 : 0;
}

}  // namespace

absl::Status ServeAdmissionWebhook(const std::string& host, int port, const std::string& cert_file,
                                   const std::string& key_file, const AdmissionOptions& options,
                                   const std::atomic<bool>* stop, std::atomic<int>* bound_port) {
  // Checked once now, so that a wrong path or a key that does not match fails at start.
  absl::StatusOr<std::unique_ptr<TlsFiles>> files = TlsFiles::Load(cert_file, key_file, "");
  if (!files.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-cert ", cert_file, " / --tls-key ", key_file,
        ": cannot load a PEM certificate chain and its private key: ", files.status().message()));
  }
  std::shared_ptr<TlsFiles> served = std::move(*files);
  CertificateCallback callback{served.get(), options.log};
  if (options.metrics != nullptr) options.metrics->ShowTls(served);
  httplib::SSLServer server([&callback, &options](SSL_CTX& ctx) {
    SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
    SSL_CTX_set_cert_cb(&ctx, UseCertificate, &callback);
    if (options.metrics != nullptr) options.metrics->handshakes().Watch(&ctx);
    return true;
  });
  if (!server.is_valid()) return absl::InternalError("cannot set up TLS");
  server.set_payload_max_length(size_t{16} << 20);
  server.Post("/mutate", [&options](const httplib::Request& req, httplib::Response& res) {
    ReviewOutcome outcome = ReviewOutcome::kUnchanged;
    absl::StatusOr<std::string> reply = ReviewAdmission(req.body, options, &outcome);
    if (options.metrics != nullptr) {
      if (reply.ok()) {
        options.metrics->CountReview(outcome);
      } else {
        options.metrics->CountMalformed();
      }
    }
    if (!reply.ok()) {
      res.status = 400;
      res.set_content(std::string(reply.status().message()) + "\n", "text/plain");
      return;
    }
    res.set_content(*reply, "application/json");
  });
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  return ServeUntilStopped(server, host, port, stop, bound_port);
}

}  // namespace tessera::adapters
