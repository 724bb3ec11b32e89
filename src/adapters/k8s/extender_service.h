// `tessera scheduler-extender`: kube-scheduler's HTTP extender verbs over an OnlineCluster.
//   POST /filter, /prioritize, /bind, /preempt (ExtenderArgs / ExtenderBindingArgs /
//   ExtenderPreemptionArgs JSON); GET /healthz,
//   GET /metrics (Prometheus text).
// Malformed requests get HTTP 400 with a message; a pod whose GPU annotations are wrong gets a
// 200 with the protocol's `error` field (kube-scheduler reports it on the pod). Calls are
// serialised on one mutex around the cluster state (a decision takes microseconds); API calls
// (node lookups, the bind) are made outside it.
//
// Bind: reserve the GPUs the policy picks on the chosen node, merge-patch the pod's
// tessera.io/gpu-assignment annotation, then POST the pods/binding subresource; any failure
// releases the reservation and is returned in ExtenderBindingResult.error. Restart: Sync()
// lists nodes and pods and holds every active pod's recorded assignment again; between lists,
// WatchPods (Follow, for --resync) follows the pods as they are bound elsewhere or end, and
// WatchNodes (for --node-resync) the nodes as they come, change and leave. The pods' list and
// watch read every pod: pending pods nominated to a node after a preemption get the GPU room they
// wait for kept (OnlineCluster::Nominate).
//
// Example:
//   ExtenderService svc(MakeTesseraPolicy(), std::make_unique<KubeClient>(cfg));
//   TESSERA_RETURN_IF_ERROR(svc.Sync());
//   absl::Status s = ServeExtender(svc, "0.0.0.0", 8888, &stop);
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "adapters/http/server.h"  // HttpReply
#include "adapters/k8s/extender_protocol.h"
#include "adapters/k8s/kube_client.h"
#include "base/clock.h"
#include "base/mutex.h"
#include "placement/gpushare/online_cluster.h"

namespace tessera::adapters {

class ExtenderService {
 public:
  // `kube` may be null: then nodes must come in requests (nodeCacheCapable: false) or from
  // Rebuild, and bind fails with an error.
  ExtenderService(std::unique_ptr<placement::gpushare::Policy> policy,
                  std::unique_ptr<KubeClient> kube);

  // Sets the state from a node list and a pod list (restart recovery from files or the API).
  // Returns the problems, one line each: pods whose recorded assignment no longer fits, names
  // another node than the pod runs on, or cannot be read are reported, not held.
  std::vector<std::string> Rebuild(const std::vector<placement::gpushare::OnlineNode>& nodes,
                                   const std::vector<PodInfo>& pods);
  // Lists nodes and pods through the API and resyncs: pods that left release their GPUs,
  // pods bound elsewhere (another scheduler replica) are held. Reservations made while the
  // list was in flight are kept. Returns the problems as Rebuild does; an error only when the
  // lists cannot be had.
  absl::StatusOr<std::vector<std::string>> Sync();
  // The same with the pods only (the nodes followed on their own, by SyncNodes and WatchNodes).
  absl::StatusOr<std::vector<std::string>> SyncPods();
  // Lists the nodes only: adds and updates them, and forgets those that left (unless a held pod
  // names one). Returns the pods a shrunken node no longer holds, one line each.
  absl::StatusOr<std::vector<std::string>> SyncNodes();
  // Follows the pods between lists, as an informer does: watches them from the last list's
  // resourceVersion (then from the last event's) for `timeout_s` seconds, applying each change
  // as it comes with the rules of a list (a pod bound by another scheduler replica is held, one
  // that ended or was deleted releases its GPUs) and passing each problem to `report` (an event
  // that cannot be decoded is one: skipped, the next list has the pod as it is). OK when
  // the watch ran its time or `*stop` became true; Aborted when the version is gone (410: the
  // next call needs a list first); other errors when the watch failed.
  absl::Status WatchPods(int timeout_s, const std::atomic<bool>* stop,
                         const std::function<void(const std::string&)>& report);
  // The same for the nodes, from the last Sync's or SyncNodes' version: a node added or changed
  // (GPU count, model, memory) is upserted, one deleted is forgotten unless a held pod names it.
  absl::Status WatchNodes(int timeout_s, const std::atomic<bool>* stop,
                          const std::function<void(const std::string&)>& report);
  // `--resync`, `--node-resync`, until `stop`. With `node_resync` > 0 the nodes are followed on
  // a thread of their own: listed (SyncNodes) every `node_resync` and watched in between; the
  // pods are listed (SyncPods) every `resync` and watched in between. With `node_resync` 0 the
  // nodes are listed with the pods (Sync) every `resync` and not watched. A list made before
  // (the start-up Sync) counts as the first; state from Rebuild is listed at once. A watch
  // lasts until its collection's next list, 30 minutes at most. One that fails, or that the
  // server ends before half its time, is asked again from its last event after a back-off (1 s,
  // doubling to 30 s); one whose version is gone (410) lists again at once. Each problem and
  // failure goes to `log` as one line ("resync: ...", "resync nodes: ...", "watch: ...").
  void Follow(const Clock& clock, absl::Duration resync, absl::Duration node_resync,
              const std::atomic<bool>& stop, const std::function<void(const std::string&)>& log);

  HttpReply Filter(const std::string& body);
  HttpReply Prioritize(const std::string& body);
  HttpReply Bind(const std::string& body);
  // kube-scheduler's preempt verb: on each candidate node, the victims it chose plus the
  // lower-priority pods holding GPUs there whose eviction the pod's GPU share needs; nodes where
  // no such eviction makes room are left out (OnlineCluster::PreemptionVictims). With an API,
  // the PodDisruptionBudgets are listed for each call: pods whose eviction would violate one are
  // spared first, and those still taken are added to NumPDBViolations.
  HttpReply Preempt(const std::string& body);
  HttpReply Metrics() const;
  // GET /state: the GPUs of every node (or of `node` alone; 404 when unknown) as JSON, with the
  // free share of each GPU, the pods holding it and the pods nominated to the node, for a person
  // finding out why a pod does not fit. It names pods: ServeExtender serves it on the extender's
  // own address, not on the metrics listener.
  HttpReply State(const std::string& node) const;

  // Share preemption (`--preempt-shares`). kube-scheduler's DefaultPreemption never evicts for a
  // GPU share: its plugins do not see shares, a node where they fit the pod without evicting
  // anything is no preemption candidate, and so a pod refused only by this extender's filter gets
  // no preemption at all (the preempt verb above is never called for such nodes). With this on,
  // filter remembers a GPU pod that none of the nodes it was sent has room for, and
  // PreemptBlocked, `delay` later, does for it what kube-scheduler's preemption does, on the
  // nodes filter refused for GPU room (not those where the pod can never run):
  // - it skips a pod that fits now, one with preemptionPolicy Never (filter does not remember
  //   it), one nominated to a node where lower-priority GPU holders are still ending, and one
  //   whose victims from an earlier preemption are still held (PodEligibleToPreemptOthers);
  // - it chooses victims per node as for the preempt verb (PreemptionVictims, with the
  //   PodDisruptionBudgets listed then) and the node as kube-scheduler does
  //   (PickPreemptionNode);
  // - it nominates the pod there (merge patch of status.nominatedNodeName, so the room is kept
  //   for it, here and by kube-scheduler for CPU and memory), then marks each victim with the
  //   DisruptionTarget condition (reason PreemptionByScheduler, which kube-scheduler reads as a
  //   preemption in progress) and deletes it, the UIDs as preconditions; then clears the
  //   nominations of the lower-priority GPU pods nominated there (ClearNominations).
  // The delay lets kube-scheduler's own preemption of the same attempt go first: it preempts on
  // nodes its plugins refused, and the preempt verb it calls then forgets the remembered pod.
  // `clock` must outlive the service, or be replaced first (nullptr turns preemption off).
  void EnableSharePreemption(const Clock* clock, absl::Duration delay);
  // Acts on the pods remembered at least the delay ago; returns how many it preempted for. Each
  // preemption and each failure goes to `log` as one line ("preempt: ...").
  int PreemptBlocked(const std::function<void(const std::string&)>& log);
  // PreemptBlocked about every `period` until `stop`.
  void PreemptLoop(absl::Duration period, const std::atomic<bool>& stop,
                   const std::function<void(const std::string&)>& log);

  // For tests and metrics.
  int held_pods() const;
  std::optional<placement::gpushare::Assignment> Held(const std::string& uid) const;

 private:
  // Upserts the nodes sent in args, or fetches unknown named nodes from the API.
  void LearnNodes(const ExtenderArgs& args);
  // Fetches from the API the nodes of `names` the extender does not know yet.
  void LearnNodeNames(const std::vector<std::string>& names);
  void Remember(const PodInfo& pod) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases what pod `uid` holds, its nomination and its labels (it ended, or holds nothing).
  void Forget(const std::string& uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the departed nodes on which no pod holds GPUs any more.
  void DropDeparted() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps `pod`'s labels while it holds GPUs, forgets them once it holds none.
  void Label(const PodInfo& pod) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Count(const std::string& verb, int status) const;
  // Upserts the nodes (unless null) and holds the pods' assignments (those made since `since`
  // are kept); returns the problems, one line each.
  std::vector<std::string> Apply(const std::vector<placement::gpushare::OnlineNode>* nodes,
                                 const std::vector<PodInfo>& pods, uint64_t since)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The generation before a list is asked for (reservations and nodes after it may be missing
  // from the list); FailedPrecondition without an API.
  absl::StatusOr<uint64_t> BeforeList() const;
  // `version` receives the list's resourceVersion, where a watch of the nodes starts.
  absl::StatusOr<std::vector<placement::gpushare::OnlineNode>> ListNodes(
      std::string* version) const;
  // Forgets the nodes known at `since` that are neither in `nodes` nor in `keep`, and upserts
  // `nodes`; a pod a changed node no longer holds is a problem line.
  void ApplyNodes(const std::vector<placement::gpushare::OnlineNode>& nodes,
                  absl::flat_hash_set<std::string> keep, uint64_t since,
                  std::vector<std::string>* problems) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One watch event: holds, moves or releases the pod's GPUs; problems as LiveAssignments'.
  void ApplyPodEvent(const PodEvent& e, std::vector<std::string>* problems)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One node watch event: upserts or forgets the node; problems as SyncNodes'.
  void ApplyNodeEvent(const NodeEvent& e, std::vector<std::string>* problems)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One watch of the collection at `path` ("pods" or "nodes" in messages) from `*version` (a
  // member guarded by mu_, cleared on 410): each event decoded and applied under mu_.
  template <typename Event>
  absl::Status WatchCollection(const char* path, const char* what, std::string* version,
                               int timeout_s, const std::atomic<bool>* stop,
                               const std::function<void(const std::string&)>& report,
                               absl::StatusOr<Event> (*decode)(absl::string_view),
                               void (ExtenderService::*apply)(const Event&,
                                                              std::vector<std::string>*));
  // What Follow lists and watches of one collection, and how its log lines start.
  struct FollowedCollection {
    const char* list_what;
    const char* watch_what;
    std::function<absl::StatusOr<std::vector<std::string>>()> list;
    std::function<absl::Status(int timeout_s, const std::atomic<bool>* stop,
                               const std::function<void(const std::string&)>& report)>
        watch;
  };
  // Follow's loop for one collection: a list every `period` (at once if `need_list`), watches in
  // between.
  void ListAndWatch(const Clock& clock, absl::Duration period, bool need_list,
                    const FollowedCollection& c, const std::atomic<bool>& stop,
                    const std::function<void(const std::string&)>& log);
  // Records `pod`'s nomination if it is a pending GPU pod nominated to a node after a preemption
  // (its GPU room is then kept from pods of lower or equal priority); clears it otherwise.
  void Nominate(const PodInfo& pod) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The PodDisruptionBudgets as they are now; none when the list fails (counted).
  std::optional<std::vector<DisruptionBudget>> ListBudgets();
  // Preemption's view of them: the budgets each held pod counts against (by its labels).
  placement::gpushare::DisruptionBudgets BudgetsOf(const std::vector<DisruptionBudget>& pdbs) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct Blocked;
  // The victims per node that would let a remembered pod fit (PreemptionVictims over the nodes
  // filter refused); none for a pod that fits now, is bound, or waits for an earlier
  // preemption's victims to end.
  std::map<std::string, std::vector<std::string>> ShareVictims(
      const Blocked& b, const placement::gpushare::DisruptionBudgets* budgets,
      std::map<std::string, int64_t>* violations) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A victim of a share preemption, as the API names it.
  struct Victim {
    std::string uid;
    std::string ns;
    std::string name;
    bool ending = false;  // being deleted already: no call needed (as kube-scheduler skips it)
  };
  // The API calls of a share preemption: nominate `pod` to `node` (false when the pod was
  // deleted or replaced since), then mark and delete each victim for it (one already gone, 404,
  // or replaced, 409, is skipped) and record a Preempted event on it, as kube-scheduler does; an
  // event the API refuses is a line in `*warnings`, not a failure.
  absl::StatusOr<bool> NominateInApi(const PodInfo& pod, const std::string& node) const;
  absl::Status Evict(const PodInfo& pod, const std::string& node,
                     const std::vector<Victim>& victims, absl::Time now,
                     std::vector<std::string>* warnings) const;
  // kube-scheduler's ClearNominatedNodeName for `pods` (UID -> namespace/name), the pods of
  // lower priority nominated to `node` where a preemption just made room for another: removes
  // each one's status.nominatedNodeName, with the UID and the node as JSON-patch tests so that a
  // pod replaced or nominated elsewhere since is left alone. Returns the UIDs cleared (a pod gone
  // meanwhile is not: its deletion reaches the watch); a refusal is a line in `*warnings`, not a
  // failure (as kube-scheduler only logs it).
  std::vector<std::string> ClearNominations(const std::string& node,
                                            const std::map<std::string, std::string>& pods,
                                            std::vector<std::string>* warnings) const;
  // "namespace/name" of a pod holding GPUs (labeled_), or its UID when unknown.
  std::string PodName(const std::string& uid) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The assignments of the active pods that can be held, and a line for each that cannot.
  static std::map<std::string, placement::gpushare::Assignment> LiveAssignments(
      const std::vector<PodInfo>& pods, std::vector<std::string>* problems);

  std::unique_ptr<KubeClient> kube_;
  mutable Mutex mu_;
  placement::gpushare::OnlineCluster cluster_ ABSL_GUARDED_BY(mu_);
  // Requests (and priorities) of pods seen by filter/prioritize, for bind (which names only the
  // pod).
  struct Seen {
    placement::gpushare::GpuRequest request;
    int32_t priority = 0;
    std::map<std::string, std::string> labels;
  };
  // What PodDisruptionBudgets select of each pod holding GPUs: its namespace, name and labels.
  struct Labeled {
    std::string ns;
    std::string name;
    std::map<std::string, std::string> labels;
  };
  absl::flat_hash_map<std::string, Labeled> labeled_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Seen> requests_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> request_order_ ABSL_GUARDED_BY(mu_);
  // Where the pod watch resumes: the last list's resourceVersion, then the last event's; "" when
  // a list is needed first.
  std::string pods_version_ ABSL_GUARDED_BY(mu_);
  int64_t pod_events_ ABSL_GUARDED_BY(mu_) = 0;
  // Nodes the watch saw deleted while pods held GPUs there: forgotten once none does.
  absl::flat_hash_set<std::string> departed_ ABSL_GUARDED_BY(mu_);
  // Where the node watch resumes, as pods_version_.
  std::string nodes_version_ ABSL_GUARDED_BY(mu_);
  int64_t node_events_ ABSL_GUARDED_BY(mu_) = 0;
  // Share preemption: off while preempt_clock_ is null.
  const Clock* preempt_clock_ = nullptr;
  absl::Duration preempt_delay_;
  struct Blocked {
    PodInfo pod;
    std::vector<std::string> nodes;  // refused for GPU room
    absl::Time since;                // first refused (since the last preemption attempt)
  };
  absl::flat_hash_map<std::string, Blocked> blocked_ ABSL_GUARDED_BY(mu_);
  // Preemptors whose victims are still held, by UID: the victims' UIDs.
  absl::flat_hash_map<std::string, std::vector<std::string>> preempting_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> share_preemptions_{0};
  std::atomic<int64_t> share_preemptions_failed_{0};
  std::atomic<int64_t> share_victims_{0};
  mutable Mutex metrics_mu_;
  mutable std::map<std::pair<std::string, int>, int64_t> calls_ ABSL_GUARDED_BY(metrics_mu_);
  std::atomic<int64_t> binds_ok_{0};
  std::atomic<int64_t> binds_failed_{0};
  std::atomic<int64_t> restore_problems_{0};         // of the last Rebuild or Sync
  std::atomic<int64_t> list_failures_{0};            // Follow's lists that failed
  std::atomic<int64_t> watch_failures_{0};           // Follow's watches that failed (not 410s)
  std::atomic<int64_t> preempt_victims_added_{0};    // candidates given GPU victims by preempt
  std::atomic<int64_t> preempt_nodes_dropped_{0};    // candidates preempt left out
  std::atomic<int64_t> preempt_without_budgets_{0};  // preempt calls whose PDB list failed
};

// Serves `svc` on host:port until `*stop` becomes true (checked every 100 ms). Returns when
// stopped, or an error if the address cannot be bound. `bound_port` (optional) receives the
// port actually bound (port 0 = any free port).
absl::Status ServeExtender(ExtenderService& svc, const std::string& host, int port,
                           const std::atomic<bool>* stop, std::atomic<int>* bound_port = nullptr);

}  // namespace tessera::adapters
