// The scheduler extender's long-lived view of a Kubernetes cluster's GPUs: nodes by name, pods
// by UID with the GPUs and share each was given, and a scheduling policy over a ClusterState.
// Unlike the trace benchmark, nodes arrive over time and pods leave; a pod's share of a GPU
// depends on the node (its memory request divided by that node's GPU memory).
//
// Only GPU room is filtered here: CPU, memory and everything else stay with kube-scheduler's own
// plugins, which see every pod (the extender sees only the pods it is asked about).
//
// Not thread-safe; the extender serialises calls.
//
// Example:
//   OnlineCluster c(MakeTesseraPolicy());
//   c.UpsertNode({.name = "gpu-1", .gpus = 8, .model = "H100-80GB", .gpu_memory_bytes = ...});
//   FilterOutcome f = c.Filter(req, {"gpu-1"});
//   absl::StatusOr<Assignment> a = c.Reserve("pod-uid", req, "gpu-1");
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "placement/gpushare/cluster_state.h"
#include "placement/gpushare/policies.h"

namespace tessera::placement::gpushare {

// What a pod asks of GPUs.
struct GpuRequest {
  int num_gpu = 0;                  // GPUs used; 0 = none (the extender passes such pods through)
  int64_t memory_bytes = 0;         // per GPU; 0 = not given
  int64_t compute_milli = 0;        // per GPU, 1..1000; 1000 with num_gpu >= 1 = whole GPUs
  std::vector<std::string> models;  // allowed catalog model names; empty = any
  // The user its processes run as where GPUs are shared through MPS, whose daemon serves one
  // user's clients per GPU at a time (a client of another user waits until every client of the
  // running server has exited): a pod sharing a GPU goes only where the other pods sharing it
  // have the same user. "" = no such rule (no MPS, or whole GPUs).
  std::string user;

  bool whole() const { return compute_milli >= kGpuMilli; }
};

// What the extender knows of a node.
struct OnlineNode {
  std::string name;
  int gpus = 0;
  std::string model;             // catalog name; "" if the node has no known GPU
  int64_t gpu_memory_bytes = 0;  // per GPU

  bool operator==(const OnlineNode&) const = default;
};

// The GPUs a pod was given.
struct Assignment {
  std::string node;
  std::vector<int> gpus;      // indices on the node
  int64_t milli_per_gpu = 0;  // share of each (1000 = whole)
  std::string user;           // GpuRequest::user of a pod sharing its GPU; "" = none

  bool operator==(const Assignment&) const = default;
};

// PodDisruptionBudgets as preemption weighs them: the budgets (indices into `allowed`) a pod,
// by UID, counts against, and how many more disruptions each allows.
struct DisruptionBudgets {
  std::function<std::vector<int>(const std::string& uid)> of;
  std::vector<int32_t> allowed;
};

struct FilterOutcome {
  std::vector<std::string> fit;
  std::map<std::string, std::string> failed;        // might fit once pods leave
  std::map<std::string, std::string> unresolvable;  // never (model, size, unknown node)
};

class OnlineCluster {
 public:
  explicit OnlineCluster(std::unique_ptr<Policy> policy);

  // Adds a node, or updates one whose GPU count, model or memory changed (its pods are kept
  // where they still fit; the others are dropped and named in the result).
  std::vector<std::string> UpsertNode(const OnlineNode& node);
  // Forgets the nodes that are not in `keep` and were known at generation `since` (one added
  // later may be missing from a node list asked for before it), with the pods they held; returns
  // those pods. Nodes leave a cluster (the cluster autoscaler, a replaced machine); kept, they
  // would count in total_milli() forever.
  std::vector<std::string> RemoveNodesExcept(const absl::flat_hash_set<std::string>& keep,
                                             uint64_t since);
  // Forgets one node (a watch saw it deleted) with the pods it held, as RemoveNodesExcept does
  // with every other node kept; returns the pods it held. A node that holds none goes without
  // rebuilding the others' state (O(nodes + pods held) instead of holding every pod again).
  std::vector<std::string> RemoveNode(const std::string& name);
  bool HasNode(const std::string& name) const { return index_.contains(name); }
  // The node as last upserted; nullptr if unknown.
  const OnlineNode* FindNode(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &nodes_[it->second];
  }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }

  // The per-GPU share (milli) `req` needs on `node`: the larger of its compute share and its
  // memory over the node's GPU memory, rounded up; an error when it cannot run there at all.
  absl::StatusOr<int64_t> ShareOn(const GpuRequest& req, const OnlineNode& node) const;

  // The nodes of `names` where `req` fits: its share has room now, and leaves room for the pods
  // nominated to the node (below) of at least `priority` other than `uid` (the pod asking); with
  // a user (GpuRequest::user), on a GPU that no pod of another user shares or is kept for.
  FilterOutcome Filter(const GpuRequest& req, const std::vector<std::string>& names,
                       const std::string& uid = "", int32_t priority = 0) const;

  // Scores 0..max_score for the nodes of `names` that fit (others are left out): the policy's
  // score, ties broken by best fit, scaled so the best node gets max_score and the worst 0
  // (kube-scheduler adds extender scores to its plugins'; only the order matters). A node is
  // scored as if every GPU with room were open to the pod: the room kept for nominated pods and
  // the GPUs of other users are left out by Reserve's choice of GPU, not here (held back as in
  // Reserve, they would read as allocated to policies that score a node's free total). A pod
  // that asks for no GPU: the less free GPU a node has, the higher (unknown nodes have none).
  std::vector<std::pair<std::string, int64_t>> Prioritize(const GpuRequest& req,
                                                          const std::vector<std::string>& names,
                                                          int64_t max_score = 10) const;

  // Chooses the GPUs on `node` by the policy and holds them for pod `uid` (of `priority`), among
  // those that leave room for the nominated pods Filter keeps it from and that no pod of another
  // user shares (the policy sees those GPUs as full). Reserving a pod that
  // already holds GPUs on that node returns the held assignment; on another node, an error.
  absl::StatusOr<Assignment> Reserve(const std::string& uid, const GpuRequest& req,
                                     const std::string& node, int32_t priority = 0);
  // Holds exactly `a` for `uid` (restoring a recorded assignment); an error if the node is
  // unknown or the GPUs lack room.
  absl::Status Restore(const std::string& uid, const Assignment& a);
  // Frees what `uid` holds (no-op if nothing).
  void Release(const std::string& uid);
  const Assignment* Find(const std::string& uid) const;
  // Whether held pod `uid` is ending (SetImportance); false for a pod that holds nothing.
  bool IsEnding(const std::string& uid) const {
    auto it = held_.find(uid);
    return it != held_.end() && it->second.ending;
  }
  // Records what preemption and nominations compare of a held pod: its priority (spec.priority),
  // when it started (status.startTime; InfiniteFuture while it has not, as kube-scheduler counts
  // a pod not started yet), and whether it is ending (metadata.deletionTimestamp set: its GPUs
  // come free once its containers stop). No-op for a pod that holds nothing. Pods are held at
  // priority 0, not started, not ending, until told.
  void SetImportance(const std::string& uid, int32_t priority,
                     absl::Time started = absl::InfiniteFuture(), bool ending = false);

  // kube-scheduler's nominations (status.nominatedNodeName of a pending pod): a pod that preempted
  // is nominated to the node whose pods it evicted, and waits there for them to end. kube-scheduler
  // keeps the CPU and memory it needs there from pods of lower or equal priority, but cannot keep
  // GPU share it does not see; Filter and Reserve do. On a node with nominated pods of at least a
  // pod's priority, the pod fits where its share has room both now and on what the node will have
  // once its ending pods are gone and the nominated pods placed (best fit, most important and
  // then largest first). A nominated pod that would not fit even then keeps the node from every
  // such pod, as kube-scheduler's own resource checks do once a nomination exceeds what is free.
  // Nominating a pod again moves it; a pod that is held (bound) is no longer nominated.
  void Nominate(const std::string& uid, const std::string& name, const GpuRequest& req,
                int32_t priority, const std::string& node);
  void ClearNomination(const std::string& uid);
  void ClearNominations();
  int nominated() const { return static_cast<int>(nominated_.size()); }

  // Preemption (kube-scheduler's preempt verb): for each candidate node of `chosen`, the pods
  // kube-scheduler would evict there for its own reasons (UIDs), returns the victims that let
  // `req` fit the node's GPUs: the chosen ones, plus the lower-priority pods holding GPUs there
  // that it needs (for their share, or for their user: a GPU opens to `req`'s user once every
  // pod of another user sharing it is gone), chosen as kube-scheduler's SelectVictimsOnNode does:
  // all of them go, then each is spared while the pod still fits, the most important first (highest
  // priority, then the earliest started); the added ones are listed least important first. A node
  // where even all of them would not make room, or where `req` can never run, is left out, and so
  // is one that would have no victim (the pod fits there already). A pod that asks for no GPU keeps
  // every node as chosen. Nominated pods of at least `priority` other than `uid` keep their room,
  // as in Filter (kube-scheduler checks its own victims with the nominated pods added too). With
  // `budgets`, candidates whose eviction would violate a PodDisruptionBudget (once kube-scheduler's
  // victims and the more important candidates have used what it allows) are spared before the
  // others, as kube-scheduler does, and those still taken are counted per node in
  // `added_violations`.
  std::map<std::string, std::vector<std::string>> PreemptionVictims(
      const GpuRequest& req, int32_t priority,
      const std::map<std::string, std::vector<std::string>>& chosen, const std::string& uid = "",
      const DisruptionBudgets* budgets = nullptr,
      std::map<std::string, int64_t>* added_violations = nullptr) const;
  // Of the candidate nodes of a preemption (`victims` as PreemptionVictims returns them, with
  // the PodDisruptionBudget violations per node), the one kube-scheduler's
  // pickOneNodeForPreemption would choose: the fewest violations, then the lowest highest victim
  // priority, the lowest sum of victim priorities, the fewest victims, the latest start of the
  // earliest started of the highest-priority victims, then the first by name. "" when none.
  std::string PickPreemptionNode(const std::map<std::string, std::vector<std::string>>& victims,
                                 const std::map<std::string, int64_t>& violations) const;
  // Whether a pod of lower priority than `priority` holding GPUs on `node` is ending
  // (kube-scheduler's PodEligibleToPreemptOthers: a preemptor nominated there waits for such
  // victims rather than preempting again).
  bool EndingBelow(const std::string& node, int32_t priority) const;
  // The pods nominated to `node` of lower priority than `priority`: UID -> "namespace/name",
  // as Nominate was given them (kube-scheduler's getLowerPriorityNominatedPods, for the GPU pods
  // this cluster knows the nominations of).
  std::map<std::string, std::string> NominatedBelow(const std::string& node,
                                                    int32_t priority) const;
  // The node `uid` is nominated to; "" if none.
  std::string NominatedNode(const std::string& uid) const {
    auto it = nominated_.find(uid);
    return it == nominated_.end() ? "" : it->second.node;
  }
  // The nodes on which some pod holds GPUs.
  absl::flat_hash_set<std::string> HeldNodes() const;

  // A GPU shared by pods of more than one user (GpuRequest::user): placed outside the rule
  // Filter and Reserve keep (bound by another scheduler or by hand, or restored from before the
  // pods' users were known). Under MPS, the pods of all but one user wait at CUDA start.
  struct MixedUserGpu {
    std::string node;
    int gpu = 0;
    std::vector<std::string> users;  // sorted
    std::vector<std::string> pods;   // UIDs, sorted
  };
  // Every such GPU, by node name and index.
  std::vector<MixedUserGpu> MixedUserGpus() const;

  // One node as it stands, for a person reading the extender's state.
  struct NodeView {
    struct Holder {
      std::string uid;
      int64_t milli = 0;  // of this GPU
      std::string user;   // Assignment::user
      int32_t priority = 0;
      bool ending = false;
    };
    std::string name;
    std::string model;
    std::vector<int64_t> free_milli;           // per GPU
    std::vector<std::vector<Holder>> holders;  // per GPU, by UID
    // The pods nominated to the node: "namespace/name" (as Nominate was given it) and priority.
    std::vector<std::pair<std::string, int32_t>> nominated;
  };
  // Every node, by name; or only the one named `only` (none when it is unknown).
  std::vector<NodeView> View(const std::string& only = "") const;

  // Makes the held set equal `live` (from a fresh pod list), except reservations made at
  // generation > `since` (after the list was requested), which the list may not show yet.
  // Returns the number of pods released and restored, and the ones that could not be restored.
  struct ResyncResult {
    int released = 0;
    int restored = 0;
    std::vector<std::string> conflicts;
  };
  ResyncResult Resync(const std::map<std::string, Assignment>& live, uint64_t since);
  uint64_t generation() const { return generation_; }

  int64_t used_milli() const { return state_.used_gpu_milli(); }
  int64_t total_milli() const { return state_.total_gpu_milli(); }
  int pods() const { return static_cast<int>(held_.size()); }
  const Policy& policy() const { return *policy_; }

 private:
  struct Held {
    Assignment a;
    PodSpec spec;
    uint64_t generation = 0;
    int32_t priority = 0;
    absl::Time started = absl::InfiniteFuture();
    bool ending = false;
  };
  struct Nominated {
    std::string node;
    std::string name;  // namespace/name, for messages
    GpuRequest req;
    int32_t priority = 0;
  };
  PodSpec SpecOn(const GpuRequest& req, int64_t share) const;
  static PodSpec SpecOf(const Assignment& a);
  absl::Status Hold(const std::string& uid, int node, const Assignment& a);
  // Rebuilds state_ from nodes_ and holds again every pod that still fits; returns the others.
  std::vector<std::string> RebuildState();
  // Why `req` (of pod `uid`, `priority`) does not fit `node`; "" when it does.
  std::string Unfit(const GpuRequest& req, int node, const std::string& uid, int32_t priority,
                    bool* unresolvable) const;
  // The pods nominated to `node` that a pod of `priority` (`uid` itself excluded) leaves room
  // for; empty for most nodes.
  std::vector<const Nominated*> Ahead(int node, const std::string& uid, int32_t priority) const;
  // Per GPU of `node`, the share a pod of `user` may take when `free` is free now and `ending`
  // more will be once the ending pods are gone: the lesser of `free` and what the `ahead` pods
  // leave of `free + ending`, and none on a GPU where one of them of another user is placed.
  // Each of them is placed on a GPU no held pod (ending or not) of another user shares. Names in
  // `*blocker` a nominated pod that would not fit even then.
  // RoomLeft: the same for the node as it is, for a pod of `priority` (UID `uid`); none when no
  // nominated pod is ahead of it there (all that is free is its to take).
  std::optional<std::vector<int64_t>> RoomLeft(int node, const std::string& uid, int32_t priority,
                                               const std::string& user, std::string* blocker) const;
  std::vector<int64_t> Room(int node, const std::vector<int64_t>& free,
                            const std::vector<int64_t>& ending,
                            const std::vector<const Nominated*>& ahead, const std::string& user,
                            std::string* blocker) const;
  // Per GPU of `node`, the share held by its ending pods.
  std::vector<int64_t> Ending(int node) const;
  // Per GPU of `node`, how many pods sharing it run as a user other than `user` (GpuRequest::
  // user); all zero when `user` is "". Names those users in `*others` when given.
  std::vector<int> OtherUsers(int node, const std::string& user, std::string* others) const;

  std::unique_ptr<Policy> policy_;
  ClusterState state_{{}};
  std::vector<OnlineNode> nodes_;
  std::vector<uint64_t> added_;  // the generation at which each of nodes_ was added
  absl::flat_hash_map<std::string, int> index_;
  std::map<std::string, Held> held_;
  // The few pods per node that are nominated to it or ending on it: node name -> UIDs.
  using NodeIndex = absl::flat_hash_map<std::string, std::vector<std::string>>;
  static void Index(NodeIndex& index, const std::string& node, const std::string& uid, bool in);
  std::map<std::string, Nominated> nominated_;  // by UID
  NodeIndex nominated_on_;
  NodeIndex ending_on_;
  // Per node, per GPU, the users (Assignment::user) of the held pods sharing it, with how many
  // pods each; nodes without such pods are absent.
  using GpuUsers = std::vector<std::pair<std::string, int>>;
  absl::flat_hash_map<std::string, std::vector<GpuUsers>> users_on_;
  void CountUser(const Assignment& a, int delta);
  // users_on_'s entry for `node`; nullptr when no held pod there has a user.
  const std::vector<GpuUsers>* UsersOn(int node) const;
  // Whether a held pod of a user other than `user` shares GPU `g` (of a node's `users`).
  static bool SharedByAnother(const std::vector<GpuUsers>& users, size_t g,
                              const std::string& user);
  uint64_t generation_ = 0;
};

}  // namespace tessera::placement::gpushare
