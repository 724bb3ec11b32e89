#include "adapters/k8s/extender_service.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "adapters/net/httplib_serve.h"
#include "base/status.h"

namespace tessera::adapters {
namespace {

using nlohmann::json;
using placement::gpushare::Assignment;
using placement::gpushare::GpuRequest;
using placement::gpushare::OnlineCluster;
using placement::gpushare::OnlineNode;

constexpr size_t kRememberedRequests = 4096;

// Objects per page when listing (the API server's chunking: limit and continue), as kubectl and
// client-go's informers do: a cluster with tens of thousands of pods is read in bounded pages,
// not one response of hundreds of megabytes.
constexpr int kListPage = 500;

// Every pod: those on a node hold GPUs, and pending ones may be nominated to a node after a
// preemption (status.nominatedNodeName), waiting for the room it made. One list and one watch
// see both, in the API server's order (a nomination ends in the same stream as the bind that
// ends it); kube-scheduler itself watches all pods.
constexpr char kPods[] = "/api/v1/pods";
constexpr char kNodes[] = "/api/v1/nodes";
constexpr char kBudgets[] = "/apis/policy/v1/poddisruptionbudgets";

// A pending pod kube-scheduler nominated to a node after a preemption, waiting there for GPUs.
bool Waiting(const PodInfo& p) {
  return p.node_name.empty() && !p.nominated_node.empty() && !p.ending && p.phase != "Succeeded" &&
         p.phase != "Failed" && p.request_error.empty() && p.request.num_gpu > 0;
}

// Every object of a collection, page by page. A continue token that expired between pages (410
// Gone: the snapshot was compacted) restarts the list, twice at most. `resource_version`
// (optional) receives the list's, where a watch of it starts.
template <typename T, typename Decode>
absl::StatusOr<std::vector<T>> ListAll(const KubeClient& kube, const std::string& path,
                                       const std::string& what, Decode decode,
                                       std::string* resource_version = nullptr) {
  for (int attempt = 0;; ++attempt) {
    std::vector<T> all;
    std::string token;
    bool expired = false;
    do {
      std::string url =
          absl::StrCat(path, absl::StrContains(path, '?') ? "&" : "?", "limit=", kListPage);
      if (!token.empty()) absl::StrAppend(&url, "&continue=", UrlEscape(token));
      TESSERA_ASSIGN_OR_RETURN(KubeResponse r, kube.Get(url));
      if (r.status == 410 && !token.empty() && attempt < 2) {
        expired = true;
        break;
      }
      TESSERA_RETURN_IF_ERROR(KubeClient::Check(r, what));
      std::string next;
      absl::StatusOr<std::vector<T>> page = decode(r.body, &next, resource_version);
      if (!page.ok()) {
        return absl::Status(page.status().code(), absl::StrCat(what, ", objects ", all.size(),
                                                               " on: ", page.status().message()));
      }
      if (!next.empty() && next == token) {
        return absl::InternalError(
            absl::StrCat(what, ": the API answered the same continue token twice"));
      }
      all.insert(all.end(), std::make_move_iterator(page->begin()),
                 std::make_move_iterator(page->end()));
      token = std::move(next);
    } while (!token.empty());
    if (!expired) return all;
  }
}

// The path of a pod, for the API.
std::string PodPath(const std::string& ns, const std::string& name) {
  return absl::StrCat("/api/v1/namespaces/", UrlEscape(ns), "/pods/", UrlEscape(name));
}

// A pod the API no longer has under that UID: deleted (404), or replaced by another of the same
// name (409, the UID precondition).
bool Gone(const KubeResponse& r) { return r.status == 404 || r.status == 409; }

// Sleeps `d`, in steps of 100 ms so that a stop is not kept waiting.
void SleepUnlessStopped(absl::Duration d, const std::atomic<bool>& stop) {
  for (absl::Duration slept; slept < d && !stop.load(); slept += absl::Milliseconds(100)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

HttpReply Json(int status, const json& body) { return {status, "application/json", body.dump()}; }

HttpReply BadRequest(const absl::Status& s) {
  return {400, "text/plain; charset=utf-8", absl::StrCat(s.message(), "\n")};
}

// The 400 for a body that did not decode, or whose pod's GPU request is wrong; none when both
// are fine (prioritize and preempt: filter answers a wrong request in the protocol's error).
template <typename Args>
std::optional<HttpReply> Refusal(const absl::StatusOr<Args>& args) {
  if (!args.ok()) return BadRequest(args.status());
  if (!args->pod.request_error.empty()) {
    return BadRequest(absl::InvalidArgumentError(args->pod.request_error));
  }
  return std::nullopt;
}

}  // namespace

ExtenderService::ExtenderService(std::unique_ptr<placement::gpushare::Policy> policy,
                                 std::unique_ptr<KubeClient> kube)
    : kube_(std::move(kube)), cluster_(std::move(policy)) {}

std::vector<std::string> ExtenderService::Rebuild(const std::vector<OnlineNode>& nodes,
                                                  const std::vector<PodInfo>& pods) {
  MutexLock lock(&mu_);
  return Apply(&nodes, pods, /*since=*/cluster_.generation());
}

std::vector<std::string> ExtenderService::Apply(const std::vector<OnlineNode>* nodes,
                                                const std::vector<PodInfo>& pods, uint64_t since) {
  std::vector<std::string> problems;
  std::map<std::string, Assignment> live = LiveAssignments(pods, &problems);
  if (nodes != nullptr) {
    absl::flat_hash_set<std::string> keep;
    for (const auto& [uid, a] : live) keep.insert(a.node);
    ApplyNodes(*nodes, std::move(keep), since, &problems);  // pods on nodes that left: not live
  }
  auto r = cluster_.Resync(live, since);
  for (std::string& c : r.conflicts) {
    problems.push_back(std::move(c));
  }
  DropDeparted();  // pods the list no longer shows held them there
  cluster_.ClearNominations();
  for (const PodInfo& p : pods) {
    cluster_.SetImportance(p.uid, p.priority, p.started, p.ending);
    Nominate(p);
    Label(p);
  }
  // Held no more (the list does not show them): their labels go too. Reservations made while
  // the list was in flight are held still, with the labels their bind gave.
  absl::erase_if(labeled_, [this](const auto& entry) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return cluster_.Find(entry.first) == nullptr;
  });
  // GPUs that MPS clients of different users share were placed outside the extender's rule
  // (another scheduler, a nodeName set by hand, pods bound before the webhook marked them).
  for (const OnlineCluster::MixedUserGpu& m : cluster_.MixedUserGpus()) {
    std::vector<std::string> held;
    for (const std::string& uid : m.pods) held.push_back(PodName(uid));
    std::sort(held.begin(), held.end());
    problems.push_back(absl::StrCat(
        "GPU ", m.gpu, " of node ", m.node, " is shared by MPS clients of users ",
        absl::StrJoin(m.users, ", "), " (pods ", absl::StrJoin(held, ", "),
        "): an MPS daemon serves one user at a time, so the pods of all users but one wait "
        "at CUDA start until its pods exit; delete the pods of all users but one there"));
  }
  restore_problems_.store(static_cast<int64_t>(problems.size()));
  return problems;
}

void ExtenderService::ApplyNodes(const std::vector<OnlineNode>& nodes,
                                 absl::flat_hash_set<std::string> keep, uint64_t since,
                                 std::vector<std::string>* problems) {
  // Nodes that left the cluster are forgotten; one that a running pod still names (in `keep`)
  // stays until the pod is gone (pods are collected after their node).
  for (const OnlineNode& n : nodes) {
    keep.insert(n.name);
    departed_.erase(n.name);  // listed: not departed after all
  }
  cluster_.RemoveNodesExcept(keep, since);
  for (const OnlineNode& n : nodes) {
    for (const std::string& uid : cluster_.UpsertNode(n)) {
      problems->push_back(absl::StrCat("pod ", uid, " no longer fits node ", n.name));
    }
  }
  absl::erase_if(departed_, [this](const std::string& name) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !cluster_.HasNode(name);  // the list forgot it
  });
}

absl::StatusOr<uint64_t> ExtenderService::BeforeList() const {
  if (kube_ == nullptr) {
    return absl::FailedPreconditionError("no Kubernetes API configured");
  }
  MutexLock lock(&mu_);
  return cluster_.generation();
}

absl::StatusOr<std::vector<OnlineNode>> ExtenderService::ListNodes(std::string* version) const {
  return ListAll<OnlineNode>(*kube_, kNodes, "list nodes", DecodeNodeListJson, version);
}

absl::StatusOr<std::vector<std::string>> ExtenderService::SyncNodes() {
  TESSERA_ASSIGN_OR_RETURN(uint64_t since, BeforeList());
  std::string version;
  TESSERA_ASSIGN_OR_RETURN(std::vector<OnlineNode> nodes, ListNodes(&version));
  MutexLock lock(&mu_);
  nodes_version_ = version;
  std::vector<std::string> problems;
  ApplyNodes(nodes, cluster_.HeldNodes(), since, &problems);
  return problems;
}

std::map<std::string, Assignment> ExtenderService::LiveAssignments(
    const std::vector<PodInfo>& pods, std::vector<std::string>* problems) {
  std::map<std::string, Assignment> live;
  for (const PodInfo& p : pods) {
    if (!p.active()) continue;
    if (!p.assignment_error.empty()) {
      problems->push_back(absl::StrCat("pod ", p.ns, "/", p.name, " on ", p.node_name, ": ",
                                       p.assignment_error,
                                       "; the GPUs it holds are not counted until it is fixed "
                                       "or the pod ends"));
    } else if (p.assignment.has_value() && p.assignment->node != p.node_name) {
      problems->push_back(absl::StrCat("pod ", p.ns, "/", p.name, ": annotation names node ",
                                       p.assignment->node, " but the pod runs on ", p.node_name,
                                       "; ignored"));
    } else if (p.assignment.has_value()) {
      live[p.uid] = *p.assignment;
    }
  }
  return live;
}

absl::StatusOr<std::vector<std::string>> ExtenderService::Sync() {
  TESSERA_ASSIGN_OR_RETURN(uint64_t since, BeforeList());
  std::string nodes_version, pods_version;
  TESSERA_ASSIGN_OR_RETURN(std::vector<OnlineNode> nodes, ListNodes(&nodes_version));
  TESSERA_ASSIGN_OR_RETURN(
      std::vector<PodInfo> pods,
      ListAll<PodInfo>(*kube_, kPods, "list pods", DecodePodList, &pods_version));
  MutexLock lock(&mu_);
  nodes_version_ = nodes_version;
  pods_version_ = pods_version;
  return Apply(&nodes, pods, since);
}

absl::StatusOr<std::vector<std::string>> ExtenderService::SyncPods() {
  TESSERA_ASSIGN_OR_RETURN(uint64_t since, BeforeList());
  std::string version;
  TESSERA_ASSIGN_OR_RETURN(std::vector<PodInfo> pods,
                           ListAll<PodInfo>(*kube_, kPods, "list pods", DecodePodList, &version));
  MutexLock lock(&mu_);
  pods_version_ = version;
  return Apply(/*nodes=*/nullptr, pods, since);
}

void ExtenderService::ApplyPodEvent(const PodEvent& e, std::vector<std::string>* problems) {
  ++pod_events_;
  if (!e.resource_version.empty()) pods_version_ = e.resource_version;
  if (e.type == "BOOKMARK") return;
  if (e.type == "DELETED" || (!e.pod.node_name.empty() && !e.pod.active())) {  // gone, ended
    Forget(e.pod.uid);
    return;
  }
  if (e.pod.node_name.empty()) {
    // Pending (perhaps nominated): it holds nothing in the API. A reservation of this extender's
    // own for it is a bind in flight (the pod is annotated before it is bound) and stays; a bind
    // that fails releases it.
    Nominate(e.pod);
    return;
  }
  cluster_.ClearNomination(e.pod.uid);
  // The rules of a list: an assignment that cannot be read or names another node is reported and
  // not held; a bound pod without one holds nothing (the extender annotates before it binds).
  std::map<std::string, Assignment> live = LiveAssignments({e.pod}, problems);
  auto it = live.find(e.pod.uid);
  if (it == live.end()) {
    Forget(e.pod.uid);
    return;
  }
  if (absl::Status s = cluster_.Restore(e.pod.uid, it->second); !s.ok()) {
    problems->push_back(absl::StrCat(e.pod.uid, ": ", s.message()));
  }
  cluster_.SetImportance(e.pod.uid, e.pod.priority, e.pod.started, e.pod.ending);
  Label(e.pod);
}

void ExtenderService::Forget(const std::string& uid) {
  cluster_.Release(uid);
  cluster_.ClearNomination(uid);
  labeled_.erase(uid);
  DropDeparted();
}

void ExtenderService::DropDeparted() {
  if (departed_.empty()) return;
  const absl::flat_hash_set<std::string> held = cluster_.HeldNodes();
  absl::erase_if(departed_, [&](const std::string& name) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (held.contains(name)) return false;
    cluster_.RemoveNode(name);
    return true;
  });
}

std::string ExtenderService::PodName(const std::string& uid) const {
  auto it = labeled_.find(uid);
  return it == labeled_.end() ? uid : absl::StrCat(it->second.ns, "/", it->second.name);
}

void ExtenderService::Label(const PodInfo& pod) {
  if (cluster_.Find(pod.uid) == nullptr) {
    labeled_.erase(pod.uid);
  } else {
    labeled_[pod.uid] = {pod.ns, pod.name, pod.labels};
  }
}

void ExtenderService::Nominate(const PodInfo& pod) {
  if (Waiting(pod)) {
    cluster_.Nominate(pod.uid, absl::StrCat(pod.ns, "/", pod.name), pod.request, pod.priority,
                      pod.nominated_node);
  } else {
    cluster_.ClearNomination(pod.uid);
  }
}

void ExtenderService::ApplyNodeEvent(const NodeEvent& e, std::vector<std::string>* problems) {
  ++node_events_;
  if (!e.resource_version.empty()) nodes_version_ = e.resource_version;
  if (e.type == "BOOKMARK") return;
  if (e.type == "DELETED") {
    // A node that a running pod still names stays until the pod is gone (pods are collected
    // after their node), then goes with the pod's release.
    if (cluster_.HasNode(e.name)) departed_.insert(e.name);
    DropDeparted();
    return;
  }
  departed_.erase(e.node.name);  // back (the same name: a replaced machine)
  for (const std::string& uid : cluster_.UpsertNode(e.node)) {
    problems->push_back(absl::StrCat("pod ", uid, " no longer fits node ", e.node.name));
  }
}

template <typename Event>
absl::Status ExtenderService::WatchCollection(
    const char* path, const char* what, std::string* version_member, int timeout_s,
    const std::atomic<bool>* stop, const std::function<void(const std::string&)>& report,
    absl::StatusOr<Event> (*decode)(absl::string_view),
    void (ExtenderService::*apply)(const Event&, std::vector<std::string>*)) {
  if (kube_ == nullptr) {
    return absl::FailedPreconditionError("no Kubernetes API configured");
  }
  std::string version;
  {
    MutexLock lock(&mu_);
    version = *version_member;
  }
  if (version.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no ", what, " list to watch from (list first)"));
  }
  const std::string url =
      absl::StrCat(path, "?watch=1&allowWatchBookmarks=true&resourceVersion=", UrlEscape(version),
                   "&timeoutSeconds=", timeout_s);
  auto gone = [&](absl::string_view detail) {
    MutexLock lock(&mu_);
    version_member->clear();
    return absl::AbortedError(absl::StrCat("watch ", what, ": resourceVersion ", version,
                                           " is gone (410", detail, "); listing again"));
  };
  absl::Status failure;
  absl::StatusOr<KubeResponse> r = kube_->Watch(
      url, timeout_s,
      [&](absl::string_view line) {
        absl::StatusOr<Event> e = decode(line);
        if (!e.ok()) {  // skipped, not retried forever; the next list has the object as it is
          report(absl::StrCat("an event skipped: ", e.status().message()));
          return true;
        }
        if (e->type == "ERROR") {
          failure = e->error_code == 410
                        ? gone(absl::StrCat(": ", e->error_message))
                        : absl::UnavailableError(absl::StrCat(
                              "watch ", what, ": ERROR ", e->error_code, ": ", e->error_message));
          return false;
        }
        std::vector<std::string> problems;
        {
          MutexLock lock(&mu_);
          (this->*apply)(*e, &problems);
        }
        for (const std::string& p : problems) report(p);
        return true;
      },
      stop);
  if (!failure.ok()) return failure;
  if (!r.ok()) {
    return stop != nullptr && stop->load() ? absl::OkStatus() : r.status();
  }
  if (r->status == 410) return gone("");
  return KubeClient::Check(*r, absl::StrCat("watch ", what));
}

absl::Status ExtenderService::WatchPods(int timeout_s, const std::atomic<bool>* stop,
                                        const std::function<void(const std::string&)>& report) {
  return WatchCollection<PodEvent>(kPods, "pods", &pods_version_, timeout_s, stop, report,
                                   DecodePodEvent, &ExtenderService::ApplyPodEvent);
}

absl::Status ExtenderService::WatchNodes(int timeout_s, const std::atomic<bool>* stop,
                                         const std::function<void(const std::string&)>& report) {
  return WatchCollection<NodeEvent>(kNodes, "nodes", &nodes_version_, timeout_s, stop, report,
                                    DecodeNodeEvent, &ExtenderService::ApplyNodeEvent);
}

void ExtenderService::ListAndWatch(const Clock& clock, absl::Duration period, bool need_list,
                                   const FollowedCollection& c, const std::atomic<bool>& stop,
                                   const std::function<void(const std::string&)>& log) {
  absl::Time next_list = clock.Now() + period;
  absl::Duration backoff = absl::Seconds(1);
  auto back_off = [&] {
    SleepUnlessStopped(backoff, stop);
    backoff = std::min(backoff * 2, absl::Seconds(30));
  };
  while (!stop.load()) {
    if (need_list || clock.Now() >= next_list) {
      next_list = clock.Now() + period;
      absl::StatusOr<std::vector<std::string>> problems = c.list();
      if (!problems.ok()) {  // logged, counted and backed off; listed again next
        ++list_failures_;
        log(absl::StrCat(c.list_what, ": ", problems.status().message()));
        need_list = true;
        back_off();
        continue;
      }
      need_list = false;
      for (const std::string& p : *problems) log(absl::StrCat(c.list_what, ": ", p));
    }
    // Until the next list (whole seconds, rounded up: not a second watch for the rest), in
    // watches of half an hour at most (as the API server's own limit).
    const int64_t left = std::clamp<int64_t>(
        absl::ToInt64Seconds(absl::Ceil(next_list - clock.Now(), absl::Seconds(1))), 1, 1800);
    const absl::Time began = clock.Now();
    absl::Status watched = c.watch(static_cast<int>(left), &stop, [&](const std::string& p) {
      log(absl::StrCat(c.watch_what, ": ", p));
    });
    if (absl::IsAborted(watched)) {  // 410: the version is gone
      log(std::string(watched.message()));
      need_list = true;
    } else if (!watched.ok()) {
      ++watch_failures_;
      log(absl::StrCat(c.watch_what, ": ", watched.message()));
      back_off();
      // No version to resume from (a list that carried none): list again.
      need_list = absl::IsFailedPrecondition(watched);
    } else if (clock.Now() - began < absl::Seconds(left) / 2 && !stop.load()) {
      // Ended by the server long before its time (a proxy that does not stream, a restart):
      // back off rather than ask again at once, and again.
      back_off();
    } else {
      backoff = absl::Seconds(1);
    }
  }
}

void ExtenderService::Follow(const Clock& clock, absl::Duration resync, absl::Duration node_resync,
                             const std::atomic<bool>& stop,
                             const std::function<void(const std::string&)>& log) {
  bool pods_listed = false, nodes_listed = false;  // by the start-up Sync, unless from files
  {
    MutexLock lock(&mu_);
    pods_listed = !pods_version_.empty();
    nodes_listed = !nodes_version_.empty();
  }
  const bool watch_nodes = node_resync > absl::ZeroDuration();
  std::thread nodes;
  if (watch_nodes) {
    nodes = std::thread([&, nodes_listed] {
      ListAndWatch(clock, node_resync, !nodes_listed,
                   {.list_what = "resync nodes",
                    .watch_what = "watch",  // its messages say "watch nodes: ..."
                    .list = [this] { return SyncNodes(); },
                    .watch =
                        [this](int t, const std::atomic<bool>* s,
                               const std::function<void(const std::string&)>& r) {
                          return WatchNodes(t, s, r);
                        }},
                   stop, log);
    });
  }
  // The nodes followed on their own: the pods' lists leave them alone.
  ListAndWatch(
      clock, resync, !pods_listed,
      {.list_what = "resync",
       .watch_what = "watch",
       .list = [this, watch_nodes] { return watch_nodes ? SyncPods() : Sync(); },
       .watch =
           [this](int t, const std::atomic<bool>* s,
                  const std::function<void(const std::string&)>& r) { return WatchPods(t, s, r); }},
      stop, log);
  if (nodes.joinable()) nodes.join();
}

void ExtenderService::LearnNodes(const ExtenderArgs& args) {
  if (!args.nodes.has_value()) {
    LearnNodeNames(args.names());
    return;
  }
  MutexLock lock(&mu_);
  for (const OnlineNode& n : *args.nodes) {
    cluster_.UpsertNode(n);
  }
}

void ExtenderService::LearnNodeNames(const std::vector<std::string>& names) {
  std::vector<std::string> unknown;
  {
    MutexLock lock(&mu_);
    for (const std::string& name : names) {
      if (!cluster_.HasNode(name)) {
        unknown.push_back(name);
      }
    }
  }
  if (kube_ == nullptr || unknown.empty()) {
    return;
  }
  std::vector<OnlineNode> found;
  for (const std::string& name : unknown) {
    absl::StatusOr<KubeResponse> r = kube_->Get("/api/v1/nodes/" + UrlEscape(name));
    if (!r.ok() || !KubeClient::Check(*r, "get node").ok()) {
      continue;  // stays unknown: filtered out as unresolvable
    }
    absl::StatusOr<json> j = ParseJson(r->body, "Node");
    if (!j.ok()) {
      continue;
    }
    absl::StatusOr<OnlineNode> n = DecodeNode(*j);
    if (n.ok()) {
      found.push_back(*n);
    }
  }
  MutexLock lock(&mu_);
  for (const OnlineNode& n : found) {
    cluster_.UpsertNode(n);
  }
}

void ExtenderService::Remember(const PodInfo& pod) {
  if (!requests_.contains(pod.uid)) {
    request_order_.push_back(pod.uid);
    if (request_order_.size() > kRememberedRequests) {
      requests_.erase(request_order_.front());
      request_order_.pop_front();
    }
  }
  requests_[pod.uid] = {pod.request, pod.priority, pod.labels};
}

void ExtenderService::Count(const std::string& verb, int status) const {
  MutexLock lock(&metrics_mu_);
  ++calls_[{verb, status}];
}

HttpReply ExtenderService::Filter(const std::string& body) {
  absl::StatusOr<ExtenderArgs> args = DecodeExtenderArgs(body);
  if (!args.ok()) {
    Count("filter", 400);
    return BadRequest(args.status());
  }
  if (!args->pod.request_error.empty()) {
    Count("filter", 200);  // kube-scheduler shows the error field on the pod; not a body of 400
    return Json(200, EncodeFilterError(args->pod.request_error));
  }
  LearnNodes(*args);
  placement::gpushare::FilterOutcome outcome;
  {
    MutexLock lock(&mu_);
    Remember(args->pod);
    outcome = cluster_.Filter(args->pod.request, args->names(), args->pod.uid, args->pod.priority);
    if (preempt_clock_ != nullptr && kube_ != nullptr && outcome.fit.empty() &&
        !outcome.failed.empty() && args->pod.request.num_gpu > 0 && !args->pod.never_preempts) {
      // No node sent has GPU room: remembered for share preemption (PreemptBlocked).
      std::vector<std::string> nodes;
      for (const auto& [node, why] : outcome.failed) nodes.push_back(node);
      auto [it, added] = blocked_.try_emplace(args->pod.uid);
      if (added) it->second.since = preempt_clock_->Now();
      it->second.pod = args->pod;
      it->second.nodes = std::move(nodes);
    }
  }
  Count("filter", 200);
  return Json(200, EncodeFilterResult(*args, outcome));
}

HttpReply ExtenderService::Prioritize(const std::string& body) {
  absl::StatusOr<ExtenderArgs> args = DecodeExtenderArgs(body);
  if (std::optional<HttpReply> refused = Refusal(args)) {
    Count("prioritize", 400);
    return *refused;
  }
  LearnNodes(*args);
  std::vector<std::pair<std::string, int64_t>> scores;
  {
    MutexLock lock(&mu_);
    Remember(args->pod);
    scores = cluster_.Prioritize(args->pod.request, args->names());
  }
  // kube-scheduler expects a score for every node it sent; nodes that do not fit get 0.
  std::map<std::string, int64_t> by_name(scores.begin(), scores.end());
  std::vector<std::pair<std::string, int64_t>> all;
  for (const std::string& name : args->names()) {
    auto it = by_name.find(name);
    all.emplace_back(name, it == by_name.end() ? 0 : it->second);
  }
  Count("prioritize", 200);
  return Json(200, EncodePriorities(all));
}

HttpReply ExtenderService::Bind(const std::string& body) {
  absl::StatusOr<BindingArgs> b = DecodeBindingArgs(body);
  if (!b.ok()) {
    Count("bind", 400);
    return BadRequest(b.status());
  }
  auto fail = [&](const std::string& error) {
    ++binds_failed_;
    Count("bind", 200);
    return Json(200, EncodeBindingResult(error));
  };
  if (kube_ == nullptr) {
    return fail("the Tessera extender has no Kubernetes API configured and cannot bind");
  }
  const std::string pod_path = PodPath(b->pod_namespace, b->pod_name);
  std::optional<GpuRequest> req;
  int32_t priority = 0;
  std::map<std::string, std::string> labels;
  {
    MutexLock lock(&mu_);
    if (auto it = requests_.find(b->pod_uid); it != requests_.end()) {
      req = it->second.request;
      priority = it->second.priority;
      labels = it->second.labels;
    }
  }
  if (!req.has_value()) {
    // Not seen by filter or prioritize (e.g. the extender restarted in between): ask the API.
    absl::StatusOr<KubeResponse> r = kube_->Get(pod_path);
    absl::Status s = r.ok() ? KubeClient::Check(*r, "get pod") : r.status();
    if (!s.ok()) {
      return fail(std::string(s.message()));
    }
    absl::StatusOr<json> j = ParseJson(r->body, "Pod");
    if (!j.ok()) {
      return fail(std::string(j.status().message()));
    }
    absl::StatusOr<PodInfo> pod = DecodePod(*j);
    if (!pod.ok()) {
      return fail(std::string(pod.status().message()));
    }
    if (!pod->request_error.empty()) {
      return fail(pod->request_error);
    }
    req = pod->request;
    priority = pod->priority;
    labels = pod->labels;
  }
  if (req->num_gpu > 0) LearnNodeNames({b->node});
  absl::StatusOr<Assignment> a;
  int64_t gpu_memory_bytes = 0;
  {
    MutexLock lock(&mu_);
    a = cluster_.Reserve(b->pod_uid, *req, b->node, priority);
    if (const OnlineNode* node = cluster_.FindNode(b->node)) {
      gpu_memory_bytes = node->gpu_memory_bytes;
    }
    cluster_.SetImportance(b->pod_uid, priority);  // not started yet
    PodInfo bound;
    bound.uid = b->pod_uid;
    bound.name = b->pod_name;
    bound.ns = b->pod_namespace;
    bound.labels = std::move(labels);
    Label(bound);
  }
  if (!a.ok()) {
    return fail(std::string(a.status().message()));
  }
  auto release = [&] {
    MutexLock lock(&mu_);
    Forget(b->pod_uid);
  };
  if (req->num_gpu > 0) {
    json patch = {
        {"metadata",
         {{"uid", b->pod_uid}, {"annotations", AssignmentAnnotations(*a, gpu_memory_bytes)}}}};
    absl::StatusOr<KubeResponse> r =
        kube_->Request("PATCH", pod_path, patch.dump(), "application/merge-patch+json");
    absl::Status s = r.ok() ? KubeClient::Check(*r, "annotate pod") : r.status();
    if (!s.ok()) {
      release();
      return fail(std::string(s.message()));
    }
  }
  json binding = {
      {"apiVersion", "v1"},
      {"kind", "Binding"},
      {"metadata", {{"name", b->pod_name}, {"namespace", b->pod_namespace}, {"uid", b->pod_uid}}},
      {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", b->node}}}};
  absl::StatusOr<KubeResponse> r = kube_->Request("POST", pod_path + "/binding", binding.dump());
  absl::Status s = r.ok() ? KubeClient::Check(*r, "bind pod") : r.status();
  if (!s.ok()) {
    release();
    return fail(std::string(s.message()));
  }
  {
    MutexLock lock(&mu_);
    requests_.erase(b->pod_uid);
  }
  ++binds_ok_;
  Count("bind", 200);
  return Json(200, EncodeBindingResult(""));
}

HttpReply ExtenderService::Preempt(const std::string& body) {
  absl::StatusOr<PreemptionArgs> args = DecodePreemptionArgs(body);
  if (std::optional<HttpReply> refused = Refusal(args)) {
    Count("preempt", 400);
    return *refused;
  }
  std::map<std::string, std::vector<std::string>> chosen;
  for (const auto& [node, v] : args->victims) chosen[node] = v.uids;
  if (args->pod.request.num_gpu > 0) {
    std::vector<std::string> names;  // candidates not met yet are fetched, as for filter
    names.reserve(chosen.size());
    for (const auto& [node, v] : chosen) names.push_back(node);
    LearnNodeNames(names);
  }
  // The budgets as they are now (kube-scheduler reads them from its informer for its own
  // victims); a list that fails leaves the added victims' violations uncounted, as before.
  std::optional<std::vector<DisruptionBudget>> pdbs;
  if (args->pod.request.num_gpu > 0) pdbs = ListBudgets();
  std::map<std::string, std::vector<std::string>> victims;
  std::map<std::string, int64_t> violations;
  {
    MutexLock lock(&mu_);
    placement::gpushare::DisruptionBudgets budgets;
    if (pdbs.has_value()) budgets = BudgetsOf(*pdbs);
    victims =
        cluster_.PreemptionVictims(args->pod.request, args->pod.priority, chosen, args->pod.uid,
                                   pdbs.has_value() ? &budgets : nullptr, &violations);
    // kube-scheduler preempts for this attempt itself: no share preemption for it as well.
    if (!victims.empty()) blocked_.erase(args->pod.uid);
  }
  std::map<std::string, NodeVictims> result;
  for (auto& [node, uids] : victims) {
    const NodeVictims& given = args->victims.at(node);
    if (uids.size() > given.uids.size()) ++preempt_victims_added_;
    // kube-scheduler's own count for its victims, plus the added ones that violate a budget.
    result[node] = {std::move(uids), given.pdb_violations + violations[node]};
  }
  preempt_nodes_dropped_ += static_cast<int64_t>(chosen.size() - result.size());
  Count("preempt", 200);
  return Json(200, EncodePreemptionResult(result));
}

std::map<std::string, std::vector<std::string>> ExtenderService::ShareVictims(
    const Blocked& b, const placement::gpushare::DisruptionBudgets* budgets,
    std::map<std::string, int64_t>* violations) const {
  const PodInfo& pod = b.pod;
  if (preempting_.contains(pod.uid)) return {};      // its victims are still ending
  if (cluster_.Find(pod.uid) != nullptr) return {};  // bound (or being bound) meanwhile
  // Nominated where lower-priority pods are ending: a preemption for it is under way.
  const std::string nominated =
      pod.nominated_node.empty() ? cluster_.NominatedNode(pod.uid) : pod.nominated_node;
  if (!nominated.empty() && cluster_.EndingBelow(nominated, pod.priority)) return {};
  if (!cluster_.Filter(pod.request, b.nodes, pod.uid, pod.priority).fit.empty()) return {};
  std::map<std::string, std::vector<std::string>> chosen;
  for (const std::string& n : b.nodes) chosen[n];
  return cluster_.PreemptionVictims(pod.request, pod.priority, chosen, pod.uid, budgets,
                                    violations);
}

std::optional<std::vector<DisruptionBudget>> ExtenderService::ListBudgets() {
  if (kube_ == nullptr) return std::nullopt;
  absl::StatusOr<std::vector<DisruptionBudget>> listed = ListAll<DisruptionBudget>(
      *kube_, kBudgets, "list poddisruptionbudgets", DecodeDisruptionBudgetList);
  if (!listed.ok()) {
    ++list_failures_;
    ++preempt_without_budgets_;
    return std::nullopt;
  }
  return std::move(*listed);
}

placement::gpushare::DisruptionBudgets ExtenderService::BudgetsOf(
    const std::vector<DisruptionBudget>& pdbs) const {
  placement::gpushare::DisruptionBudgets budgets;
  for (const DisruptionBudget& b : pdbs) budgets.allowed.push_back(b.disruptions_allowed);
  budgets.of = [this, &pdbs](const std::string& uid) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    std::vector<int> of;
    auto it = labeled_.find(uid);
    if (it == labeled_.end()) return of;  // holds no GPU: kube-scheduler's count has it
    for (size_t i = 0; i < pdbs.size(); ++i) {
      if (pdbs[i].Covers(it->second.ns, it->second.name, it->second.labels)) {
        of.push_back(static_cast<int>(i));
      }
    }
    return of;
  };
  return budgets;
}

void ExtenderService::EnableSharePreemption(const Clock* clock, absl::Duration delay) {
  MutexLock lock(&mu_);
  preempt_clock_ = clock;
  preempt_delay_ = delay;
}

int ExtenderService::PreemptBlocked(const std::function<void(const std::string&)>& log) {
  std::vector<Blocked> ready;
  absl::Time now;
  {
    MutexLock lock(&mu_);
    if (preempt_clock_ == nullptr || kube_ == nullptr) return 0;
    now = preempt_clock_->Now();
    // A preemption is over once none of its victims holds GPUs any more.
    absl::erase_if(preempting_, [this](const auto& entry) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return std::none_of(entry.second.begin(), entry.second.end(),
                          [this](const std::string& uid) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                            return cluster_.Find(uid) != nullptr;
                          });
    });
    for (auto it = blocked_.begin(); it != blocked_.end();) {
      if (now - it->second.since >= preempt_delay_) {
        ready.push_back(std::move(it->second));
        blocked_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  // Only pods that some eviction would help go on (budgets change the victims, not whether there
  // are any), so the budgets are listed only for those. The lock is taken per pod (a few ms each
  // on a large cluster: BM_SharePreemptionChoice1213Nodes) so that filter calls pass between.
  std::erase_if(ready, [this](const Blocked& b) {
    MutexLock lock(&mu_);
    return ShareVictims(b, nullptr, nullptr).empty();
  });
  if (ready.empty()) return 0;
  const std::optional<std::vector<DisruptionBudget>> pdbs = ListBudgets();
  int preempted = 0;
  for (const Blocked& b : ready) {
    const PodInfo& pod = b.pod;
    const std::string who = absl::StrCat(pod.ns, "/", pod.name);
    std::string node;
    std::vector<Victim> victims;
    std::map<std::string, std::string> lower;  // nominated there below the pod: UID -> name
    bool unnamed = false;  // a victim held but never seen in a list or the watch
    {
      MutexLock lock(&mu_);
      placement::gpushare::DisruptionBudgets budgets;
      if (pdbs.has_value()) budgets = BudgetsOf(*pdbs);
      std::map<std::string, int64_t> violations;
      std::map<std::string, std::vector<std::string>> on =
          ShareVictims(b, pdbs.has_value() ? &budgets : nullptr, &violations);
      node = cluster_.PickPreemptionNode(on, violations);
      if (node.empty()) continue;  // no eviction of lower-priority pods makes room (any more)
      for (const std::string& uid : on[node]) {
        auto it = labeled_.find(uid);
        if (it == labeled_.end()) {
          unnamed = true;
          break;
        }
        victims.push_back({uid, it->second.ns, it->second.name, cluster_.IsEnding(uid)});
      }
      if (!unnamed) {
        lower = cluster_.NominatedBelow(node, pod.priority);
        cluster_.Nominate(pod.uid, who, pod.request, pod.priority, node);
        preempting_[pod.uid] = on[node];
      }
    }
    if (unnamed) {
      ++share_preemptions_failed_;
      log(absl::StrCat("preempt: ", who, ": a victim on ", node,
                       " is not known by name yet; next attempt"));
      continue;
    }
    std::vector<std::string> names;
    names.reserve(victims.size());
    for (const Victim& v : victims) names.push_back(absl::StrCat(v.ns, "/", v.name));
    absl::StatusOr<bool> nominated = NominateInApi(pod, node);
    absl::Status s = nominated.status();
    const bool in_api = nominated.ok() && *nominated;  // false: failed, or the pod is gone
    std::vector<std::string> warnings;
    if (in_api) s = Evict(pod, node, victims, now, &warnings);
    const bool evicted = in_api && s.ok();
    // As kube-scheduler after its evictions: the lower-priority pods nominated there may no
    // longer fit, so their nominations go and they are scheduled again, elsewhere if need be.
    const std::vector<std::string> cleared =
        evicted ? ClearNominations(node, lower, &warnings) : std::vector<std::string>{};
    for (const std::string& w : warnings) log(absl::StrCat("preempt: ", who, ": ", w));
    if (!evicted) {
      MutexLock lock(&mu_);
      preempting_.erase(pod.uid);  // the next attempt chooses again
      // Not nominated in the API: no room is kept for it. (Nominated, it keeps what the victims
      // deleted so far free, as kube-scheduler's nomination does.)
      if (!in_api && cluster_.NominatedNode(pod.uid) == node) {
        cluster_.ClearNomination(pod.uid);
      }
      if (s.ok()) continue;  // the pod was deleted meanwhile: nothing to do, nothing failed
      ++share_preemptions_failed_;
      log(absl::StrCat("preempt: ", who, " on ", node, ": ", s.message()));
      continue;
    }
    {
      MutexLock lock(&mu_);
      for (const std::string& uid : cleared) {
        if (cluster_.NominatedNode(uid) == node) cluster_.ClearNomination(uid);
      }
    }
    ++share_preemptions_;
    share_victims_ += static_cast<int64_t>(victims.size());
    ++preempted;
    std::vector<std::string> cleared_names;
    cleared_names.reserve(cleared.size());
    for (const std::string& uid : cleared) cleared_names.push_back(lower.at(uid));
    log(absl::StrCat("preempt: ", who, " (priority ", pod.priority, ") nominated to ", node,
                     "; evicting ", absl::StrJoin(names, ", "), " for their GPU share",
                     cleared.empty()
                         ? ""
                         : absl::StrCat("; nomination of lower-priority ",
                                        absl::StrJoin(cleared_names, ", "), " cleared")));
  }
  return preempted;
}

absl::StatusOr<bool> ExtenderService::NominateInApi(const PodInfo& pod,
                                                    const std::string& node) const {
  const json patch = {{"metadata", {{"uid", pod.uid}}}, {"status", {{"nominatedNodeName", node}}}};
  TESSERA_ASSIGN_OR_RETURN(
      KubeResponse r, kube_->Request("PATCH", PodPath(pod.ns, pod.name) + "/status", patch.dump(),
                                     "application/merge-patch+json"));
  if (Gone(r)) return false;  // since filter saw it
  TESSERA_RETURN_IF_ERROR(KubeClient::Check(r, "nominate the preemptor"));
  return true;
}

std::vector<std::string> ExtenderService::ClearNominations(
    const std::string& node, const std::map<std::string, std::string>& pods,
    std::vector<std::string>* warnings) const {
  std::vector<std::string> cleared;
  for (const auto& [uid, name] : pods) {
    const std::pair<std::string, std::string> ns_name =
        absl::StrSplit(name, absl::MaxSplits('/', 1));
    // A JSON patch whose tests make it a no-op (422) if the pod was replaced or its nomination
    // moved since the watch said otherwise: only this node's nomination is removed.
    const json patch =
        json::array({{{"op", "test"}, {"path", "/metadata/uid"}, {"value", uid}},
                     {{"op", "test"}, {"path", "/status/nominatedNodeName"}, {"value", node}},
                     {{"op", "remove"}, {"path", "/status/nominatedNodeName"}}});
    absl::StatusOr<KubeResponse> r =
        kube_->Request("PATCH", PodPath(ns_name.first, ns_name.second) + "/status", patch.dump(),
                       "application/json-patch+json");
    // Gone (its deletion reaches the watch), or replaced or nominated elsewhere: not ours.
    if (r.ok() && (r->status == 404 || r->status == 422)) continue;
    absl::Status s = r.ok() ? KubeClient::Check(*r, "clear its nomination") : r.status();
    if (s.ok()) {
      cleared.push_back(uid);
    } else {
      warnings->push_back(absl::StrCat("the nomination of lower-priority ", name, " to ", node,
                                       " stays: ", s.message()));
    }
  }
  return cleared;
}

absl::Status ExtenderService::Evict(const PodInfo& pod, const std::string& node,
                                    const std::vector<Victim>& victims, absl::Time now,
                                    std::vector<std::string>* warnings) const {
  const std::string when = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone());
  for (const Victim& v : victims) {
    if (v.ending) continue;  // its deletion has begun: nothing to send
    // A strategic merge patch: conditions merge by type, the others stay.
    const json condition = {
        {"metadata", {{"uid", v.uid}}},
        {"status",
         {{"conditions",
           {{{"type", "DisruptionTarget"},
             {"status", "True"},
             {"reason", "PreemptionByScheduler"},
             {"message", absl::StrCat("tessera-scheduler-extender: preempting to accommodate a "
                                      "higher priority pod (",
                                      pod.ns, "/", pod.name, ") on its GPU share")},
             {"lastTransitionTime", when}}}}}}};
    TESSERA_ASSIGN_OR_RETURN(
        KubeResponse r, kube_->Request("PATCH", PodPath(v.ns, v.name) + "/status", condition.dump(),
                                       "application/strategic-merge-patch+json"));
    if (Gone(r)) continue;
    TESSERA_RETURN_IF_ERROR(
        KubeClient::Check(r, absl::StrCat("mark ", v.ns, "/", v.name, " as preempted")));
    const json options = {
        {"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"preconditions", {{"uid", v.uid}}}};
    TESSERA_ASSIGN_OR_RETURN(r, kube_->Request("DELETE", PodPath(v.ns, v.name), options.dump()));
    if (Gone(r)) continue;
    TESSERA_RETURN_IF_ERROR(KubeClient::Check(r, absl::StrCat("delete ", v.ns, "/", v.name)));
    // What `kubectl describe` and `kubectl get events` show for the victim once it is gone (its
    // condition goes with it), as kube-scheduler's "Preempted" event.
    const json event = {
        {"apiVersion", "v1"},
        {"kind", "Event"},
        {"metadata", {{"generateName", v.name + "."}, {"namespace", v.ns}}},
        {"involvedObject",
         {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"namespace", v.ns},
          {"name", v.name},
          {"uid", v.uid}}},
        {"reason", "Preempted"},
        {"message", absl::StrCat("Preempted by pod ", pod.ns, "/", pod.name, " (", pod.uid,
                                 ") on node ", node, " for its GPU share")},
        {"type", "Normal"},
        {"source", {{"component", "tessera-scheduler-extender"}}},
        {"firstTimestamp", when},
        {"lastTimestamp", when},
        {"count", 1}};
    absl::StatusOr<KubeResponse> e = kube_->Request(
        "POST", absl::StrCat("/api/v1/namespaces/", UrlEscape(v.ns), "/events"), event.dump());
    absl::Status recorded = e.ok() ? KubeClient::Check(*e, "record the event") : e.status();
    if (!recorded.ok()) {
      warnings->push_back(
          absl::StrCat("no Preempted event on ", v.ns, "/", v.name, ": ", recorded.message()));
    }
  }
  return absl::OkStatus();
}

void ExtenderService::PreemptLoop(absl::Duration period, const std::atomic<bool>& stop,
                                  const std::function<void(const std::string&)>& log) {
  while (!stop.load()) {
    SleepUnlessStopped(period, stop);
    if (!stop.load()) PreemptBlocked(log);
  }
}

HttpReply ExtenderService::State(const std::string& node) const {
  MutexLock lock(&mu_);
  std::vector<OnlineCluster::NodeView> views = cluster_.View(node);
  if (!node.empty() && views.empty()) {
    return Json(404, json{{"error", absl::StrCat("node ", node, " unknown to the extender")}});
  }
  json nodes = json::array();
  for (const OnlineCluster::NodeView& v : views) {
    json gpus = json::array();
    for (size_t g = 0; g < v.free_milli.size(); ++g) {
      json pods = json::array();
      for (const OnlineCluster::NodeView::Holder& h : v.holders[g]) {
        json pod = {{"pod", PodName(h.uid)},
                    {"uid", h.uid},
                    {"milliPerGpu", h.milli},
                    {"priority", h.priority},
                    {"ending", h.ending}};
        if (!h.user.empty()) pod["user"] = h.user;
        pods.push_back(std::move(pod));
      }
      gpus.push_back({{"index", g}, {"freeMilli", v.free_milli[g]}, {"pods", std::move(pods)}});
    }
    json nominated = json::array();
    for (const auto& [name, priority] : v.nominated) {
      nominated.push_back({{"pod", name}, {"priority", priority}});
    }
    nodes.push_back({{"name", v.name},
                     {"model", v.model},
                     {"gpus", std::move(gpus)},
                     {"nominated", std::move(nominated)}});
  }
  return Json(200, json{{"nodes", std::move(nodes)}});
}

HttpReply ExtenderService::Metrics() const {
  std::string out;
  absl::StrAppend(&out,
                  "# HELP tessera_extender_requests_total Extender calls by verb and HTTP status.\n"
                  "# TYPE tessera_extender_requests_total counter\n");
  {
    MutexLock lock(&metrics_mu_);
    for (const auto& [key, n] : calls_) {
      absl::StrAppend(&out, "tessera_extender_requests_total{verb=\"", key.first, "\",code=\"",
                      key.second, "\"} ", n, "\n");
    }
  }
  absl::StrAppend(
      &out,
      "# HELP tessera_extender_binds_total Bind outcomes.\n"
      "# TYPE tessera_extender_binds_total counter\n"
      "tessera_extender_binds_total{result=\"ok\"} ",
      binds_ok_.load(), "\ntessera_extender_binds_total{result=\"failed\"} ", binds_failed_.load(),
      "\n# HELP tessera_extender_restore_problems What the last restore or resync found "
      "wrong (logged one line each): active pods it could not hold, and GPUs shared by MPS "
      "clients of different users.\n"
      "# TYPE tessera_extender_restore_problems gauge\ntessera_extender_restore_problems ",
      restore_problems_.load(),
      "\n# HELP tessera_extender_api_failures_total Lists and watches of the API that failed "
      "(logged one line each).\n"
      "# TYPE tessera_extender_api_failures_total counter\n"
      "tessera_extender_api_failures_total{op=\"list\"} ",
      list_failures_.load(), "\ntessera_extender_api_failures_total{op=\"watch\"} ",
      watch_failures_.load(),
      "\n# HELP tessera_extender_preempt_nodes_total Preemption candidates kube-scheduler sent, "
      "by what the extender did: victims added to make GPU room, or the node dropped (no "
      "eviction of lower-priority pods makes room, or the pod fits already).\n"
      "# TYPE tessera_extender_preempt_nodes_total counter\n"
      "tessera_extender_preempt_nodes_total{outcome=\"victims_added\"} ",
      preempt_victims_added_.load(), "\ntessera_extender_preempt_nodes_total{outcome=\"dropped\"} ",
      preempt_nodes_dropped_.load(),
      "\n# HELP tessera_extender_preempt_without_budgets_total Preempt calls answered, and share "
      "preemption rounds made, without PodDisruptionBudgets because listing them failed (counted "
      "in the list failures too).\n"
      "# TYPE tessera_extender_preempt_without_budgets_total counter\n"
      "tessera_extender_preempt_without_budgets_total ",
      preempt_without_budgets_.load(),
      "\n# HELP tessera_extender_share_preemptions_total Preemptions made by the extender for "
      "pods that only GPU share kept out (--preempt-shares), by result.\n"
      "# TYPE tessera_extender_share_preemptions_total counter\n"
      "tessera_extender_share_preemptions_total{result=\"ok\"} ",
      share_preemptions_.load(), "\ntessera_extender_share_preemptions_total{result=\"failed\"} ",
      share_preemptions_failed_.load(),
      "\n# HELP tessera_extender_share_preemption_victims_total Pods deleted by share "
      "preemptions.\n"
      "# TYPE tessera_extender_share_preemption_victims_total counter\n"
      "tessera_extender_share_preemption_victims_total ",
      share_victims_.load(), "\n");
  MutexLock lock(&mu_);
  absl::StrAppend(&out,
                  "# HELP tessera_extender_gpu_milli Milli-GPU on the nodes the extender knows.\n"
                  "# TYPE tessera_extender_gpu_milli gauge\n"
                  "tessera_extender_gpu_milli{state=\"allocated\"} ",
                  cluster_.used_milli(), "\ntessera_extender_gpu_milli{state=\"total\"} ",
                  cluster_.total_milli(),
                  "\n# HELP tessera_extender_pods Pods holding GPUs.\n"
                  "# TYPE tessera_extender_pods gauge\ntessera_extender_pods ",
                  cluster_.pods(),
                  "\n# HELP tessera_extender_nominated_pods Pending pods nominated to a node "
                  "after a preemption whose GPU room is kept for them.\n"
                  "# TYPE tessera_extender_nominated_pods gauge\ntessera_extender_nominated_pods ",
                  cluster_.nominated(),
                  "\n# HELP tessera_extender_mps_mixed_user_gpus GPUs shared by MPS clients "
                  "of different users, placed outside the extender's one-user-per-GPU rule: "
                  "the pods of all users but one wait at CUDA start.\n"
                  "# TYPE tessera_extender_mps_mixed_user_gpus gauge\n"
                  "tessera_extender_mps_mixed_user_gpus ",
                  cluster_.MixedUserGpus().size(),
                  "\n# HELP tessera_extender_nodes Nodes known.\n"
                  "# TYPE tessera_extender_nodes gauge\ntessera_extender_nodes ",
                  cluster_.num_nodes(),
                  "\n# HELP tessera_extender_pod_events_total Pod changes applied from the "
                  "watch between lists.\n"
                  "# TYPE tessera_extender_pod_events_total counter\n"
                  "tessera_extender_pod_events_total ",
                  pod_events_,
                  "\n# HELP tessera_extender_node_events_total Node changes applied from the "
                  "watch between node lists.\n"
                  "# TYPE tessera_extender_node_events_total counter\n"
                  "tessera_extender_node_events_total ",
                  node_events_, "\n");
  return {200, "text/plain; version=0.0.4", out};
}

int ExtenderService::held_pods() const {
  MutexLock lock(&mu_);
  return cluster_.pods();
}

std::optional<Assignment> ExtenderService::Held(const std::string& uid) const {
  MutexLock lock(&mu_);
  const Assignment* a = cluster_.Find(uid);
  return a == nullptr ? std::nullopt : std::optional<Assignment>(*a);
}

absl::Status ServeExtender(ExtenderService& svc, const std::string& host, int port,
                           const std::atomic<bool>* stop, std::atomic<int>* bound_port) {
  httplib::Server server;
  server.set_payload_max_length(size_t{256} << 20);
  auto route = [&server](const char* path, auto handler) {
    server.Post(path, [handler](const httplib::Request& req, httplib::Response& res) {
      HttpReply r = handler(req.body);
      res.status = r.status;
      res.set_content(r.body, r.content_type.c_str());
    });
  };
  route("/filter", [&svc](const std::string& body) { return svc.Filter(body); });
  route("/prioritize", [&svc](const std::string& body) { return svc.Prioritize(body); });
  route("/bind", [&svc](const std::string& body) { return svc.Bind(body); });
  route("/preempt", [&svc](const std::string& body) { return svc.Preempt(body); });
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  server.Get("/metrics", [&svc](const httplib::Request&, httplib::Response& res) {
    HttpReply r = svc.Metrics();
    res.set_content(r.body, r.content_type.c_str());
  });
  server.Get("/state", [&svc](const httplib::Request& req, httplib::Response& res) {
    HttpReply r = svc.State(req.get_param_value("node"));
    res.status = r.status;
    res.set_content(r.body, r.content_type.c_str());
  });
  return ServeUntilStopped(server, host, port, stop, bound_port);
}

}  // namespace tessera::adapters
