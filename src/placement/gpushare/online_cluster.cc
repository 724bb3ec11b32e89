#include "placement/gpushare/online_cluster.h"

#include <algorithm>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"

namespace tessera::placement::gpushare {

OnlineCluster::OnlineCluster(std::unique_ptr<Policy> policy) : policy_(std::move(policy)) {}

std::vector<std::string> OnlineCluster::UpsertNode(const OnlineNode& node) {
  auto it = index_.find(node.name);
  if (it == index_.end()) {
    index_[node.name] = state_.AddNode({.name = node.name,
                                        .cpu_milli = 0,
                                        .memory_mib = 0,
                                        .gpus = node.gpus,
                                        .model = node.model});
    nodes_.push_back(node);
    added_.push_back(++generation_);
    return {};
  }
  if (nodes_[it->second] == node) {
    return {};
  }
  // Capacity changed (a GPU went away, MIG or a relabel): rebuild the state and hold again
  // every pod that still fits.
  nodes_[it->second] = node;
  return RebuildState();
}

std::vector<std::string> OnlineCluster::RemoveNodesExcept(
    const absl::flat_hash_set<std::string>& keep, uint64_t since) {
  auto stays = [&](size_t i) { return added_[i] > since || keep.contains(nodes_[i].name); };
  size_t kept = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (stays(i)) ++kept;
  }
  if (kept == nodes_.size()) {
    return {};
  }
  std::vector<OnlineNode> nodes;
  std::vector<uint64_t> added;
  nodes.reserve(kept);
  added.reserve(kept);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (stays(i)) {
      nodes.push_back(std::move(nodes_[i]));
      added.push_back(added_[i]);
    }
  }
  nodes_ = std::move(nodes);
  added_ = std::move(added);
  index_.clear();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    index_[nodes_[i].name] = static_cast<int>(i);
  }
  return RebuildState();
}

std::vector<std::string> OnlineCluster::RemoveNode(const std::string& name) {
  auto it = index_.find(name);
  if (it == index_.end()) return {};
  const bool holds = std::any_of(held_.begin(), held_.end(),
                                 [&](const auto& entry) { return entry.second.a.node == name; });
  if (holds) {  // its pods are dropped: rebuild, as for nodes that left a list
    absl::flat_hash_set<std::string> keep;
    for (const OnlineNode& n : nodes_) {
      if (n.name != name) keep.insert(n.name);
    }
    return RemoveNodesExcept(keep, generation_);
  }
  // Nothing on it: the other nodes' state stays as it is (held pods name their node, not its
  // index), only the indices after it move down.
  const int gone = it->second;
  state_.RemoveEmptyNode(gone);
  nodes_.erase(nodes_.begin() + gone);
  added_.erase(added_.begin() + gone);
  index_.erase(it);
  for (auto& [n, i] : index_) {
    if (i > gone) --i;
  }
  return {};
}

std::vector<std::string> OnlineCluster::RebuildState() {
  std::map<std::string, Held> held = std::move(held_);
  held_.clear();
  state_ = ClusterState({});
  for (const OnlineNode& n : nodes_) {
    state_.AddNode(
        {.name = n.name, .cpu_milli = 0, .memory_mib = 0, .gpus = n.gpus, .model = n.model});
  }
  std::vector<std::string> dropped;
  for (auto& [uid, h] : held) {
    auto node = index_.find(h.a.node);
    if (node == index_.end() || !Hold(uid, node->second, h.a).ok()) {
      dropped.push_back(uid);
    } else {
      held_[uid] = std::move(h);  // the same assignment: its generation and importance stay
    }
  }
  ending_on_.clear();
  users_on_.clear();
  for (const auto& [uid, h] : held_) {
    if (h.ending) Index(ending_on_, h.a.node, uid, true);
    CountUser(h.a, +1);
  }
  return dropped;
}

absl::StatusOr<int64_t> OnlineCluster::ShareOn(const GpuRequest& req,
                                               const OnlineNode& node) const {
  if (req.num_gpu <= 0) {
    return 0;
  }
  if (node.gpus <= 0 || node.model.empty()) {
    return absl::FailedPreconditionError("node has no GPUs Tessera knows");
  }
  if (!req.models.empty() &&
      std::find(req.models.begin(), req.models.end(), node.model) == req.models.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU model ", node.model, " is not among the allowed ", absl::StrJoin(req.models, ",")));
  }
  if (req.num_gpu > node.gpus) {
    return absl::FailedPreconditionError(
        absl::StrCat("asks for ", req.num_gpu, " GPUs; the node has ", node.gpus));
  }
  if (req.memory_bytes > node.gpu_memory_bytes) {
    return absl::FailedPreconditionError(absl::StrCat("asks for ", req.memory_bytes,
                                                      " bytes of GPU memory per GPU; the node's ",
                                                      node.model, " has ", node.gpu_memory_bytes));
  }
  if (req.whole()) {
    return kGpuMilli;
  }
  int64_t by_memory = 0;
  if (req.memory_bytes > 0) {
    // ceil(memory * 1000 / gpu_memory) without overflow for any real GPU size
    __int128 num = static_cast<__int128>(req.memory_bytes) * kGpuMilli;
    by_memory = static_cast<int64_t>((num + node.gpu_memory_bytes - 1) / node.gpu_memory_bytes);
  }
  return std::clamp<int64_t>(std::max(req.compute_milli, by_memory), 1, kGpuMilli);
}

PodSpec OnlineCluster::SpecOn(const GpuRequest& req, int64_t share) const {
  PodSpec p;
  p.num_gpu = req.num_gpu;
  p.gpu_milli = share;
  p.gpu_spec = req.models;
  return p;
}

PodSpec OnlineCluster::SpecOf(const Assignment& a) {
  PodSpec p;
  p.num_gpu = static_cast<int>(a.gpus.size());
  p.gpu_milli = a.milli_per_gpu;
  return p;
}

std::string OnlineCluster::Unfit(const GpuRequest& req, int node, const std::string& uid,
                                 int32_t priority, bool* unresolvable) const {
  absl::StatusOr<int64_t> share = ShareOn(req, nodes_[node]);
  if (!share.ok()) {
    *unresolvable = true;
    return std::string(share.status().message());
  }
  *unresolvable = false;
  if (!state_.Fits(node, SpecOn(req, *share))) {
    if (req.whole() || req.num_gpu > 1) {
      return absl::StrCat("fewer than ", req.num_gpu, " fully free GPUs");
    }
    return absl::StrCat("no GPU has ", *share, " milli-GPU free");
  }
  std::string blocker;
  const std::optional<std::vector<int64_t>> room =
      RoomLeft(node, uid, priority, req.user, &blocker);
  if (!blocker.empty()) {
    return absl::StrCat("pod ", blocker, " is nominated to this node and waits for GPU room here");
  }
  if (room.has_value() && !GpusHaveRoom(*room, *share, req.num_gpu)) {
    std::vector<std::string> names;
    for (const Nominated* n : Ahead(node, uid, priority)) names.push_back(n->name);
    return absl::StrCat("the GPU room left is kept for the pods nominated to this node (",
                        absl::StrJoin(names, ", "), ")");
  }
  // Enough GPUs with room so far; under MPS, they must also be shared by no other user's pod.
  // (Filter asks this of every node: no allocation, and a GPU's users are looked at only where
  // it has room.)
  const std::vector<GpuUsers>* users = req.user.empty() ? nullptr : UsersOn(node);
  if (users == nullptr) {
    return "";
  }
  const std::vector<int64_t>& free = room.has_value() ? *room : state_.node(node).gpu_free;
  int open = 0;
  for (size_t g = 0; g < free.size(); ++g) {
    open += free[g] >= *share && !SharedByAnother(*users, g, req.user) ? 1 : 0;
  }
  if (open >= req.num_gpu) {
    return "";
  }
  std::string others;
  OtherUsers(node, req.user, &others);
  return absl::StrCat("the GPUs with ", *share, " milli-GPU free are shared by pods of another ",
                      "user (", others, "), and MPS serves one user's pods per GPU at a time");
}

const std::vector<OnlineCluster::GpuUsers>* OnlineCluster::UsersOn(int node) const {
  auto on = users_on_.find(nodes_[node].name);
  return on == users_on_.end() ? nullptr : &on->second;
}

bool OnlineCluster::SharedByAnother(const std::vector<GpuUsers>& users, size_t g,
                                    const std::string& user) {
  if (g >= users.size()) return false;
  return std::any_of(users[g].begin(), users[g].end(),
                     [&](const auto& entry) { return entry.first != user; });
}

std::vector<int> OnlineCluster::OtherUsers(int node, const std::string& user,
                                           std::string* others) const {
  std::vector<int> out(state_.node(node).gpu_free.size(), 0);
  const std::vector<GpuUsers>* users = UsersOn(node);
  if (user.empty() || users == nullptr) {
    return out;
  }
  std::vector<std::string> names;
  for (size_t g = 0; g < users->size() && g < out.size(); ++g) {
    for (const auto& [u, pods] : (*users)[g]) {
      if (u == user) continue;
      out[g] += pods;
      if (others != nullptr && std::find(names.begin(), names.end(), u) == names.end()) {
        names.push_back(u);
      }
    }
  }
  if (others != nullptr) {
    std::sort(names.begin(), names.end());
    *others = absl::StrJoin(names, ", ");
  }
  return out;
}

void OnlineCluster::CountUser(const Assignment& a, int delta) {
  if (a.user.empty()) return;
  std::vector<GpuUsers>& gpus = users_on_[a.node];
  bool any = false;
  for (int g : a.gpus) {
    if (static_cast<size_t>(g) >= gpus.size()) gpus.resize(g + 1);
    GpuUsers& users = gpus[g];
    auto it = std::find_if(users.begin(), users.end(),
                           [&](const auto& entry) { return entry.first == a.user; });
    if (it == users.end()) it = users.insert(users.end(), {a.user, 0});
    it->second += delta;
    if (it->second <= 0) users.erase(it);
  }
  for (const GpuUsers& users : gpus) any = any || !users.empty();
  if (!any) users_on_.erase(a.node);
}

std::optional<std::vector<int64_t>> OnlineCluster::RoomLeft(int node, const std::string& uid,
                                                            int32_t priority,
                                                            const std::string& user,
                                                            std::string* blocker) const {
  const std::vector<const Nominated*> ahead = Ahead(node, uid, priority);
  if (ahead.empty()) {
    return std::nullopt;
  }
  return Room(node, state_.node(node).gpu_free, Ending(node), ahead, user, blocker);
}

std::vector<const OnlineCluster::Nominated*> OnlineCluster::Ahead(int node, const std::string& uid,
                                                                  int32_t priority) const {
  std::vector<const Nominated*> out;
  auto on = nominated_on_.find(nodes_[node].name);
  if (on == nominated_on_.end()) {
    return out;
  }
  for (const std::string& u : on->second) {
    const Nominated& n = nominated_.at(u);
    if (n.priority >= priority && u != uid) out.push_back(&n);
  }
  return out;
}

std::vector<int64_t> OnlineCluster::Room(int node, const std::vector<int64_t>& free,
                                         const std::vector<int64_t>& ending,
                                         const std::vector<const Nominated*>& ahead,
                                         const std::string& user, std::string* blocker) const {
  struct Waiting {
    int32_t priority;
    PodSpec spec;
    const std::string* name;
    const std::string* user;  // "" unless it shares a GPU under MPS
  };
  static const std::string kNoUser;
  std::vector<Waiting> waiting;
  for (const Nominated* n : ahead) {
    absl::StatusOr<int64_t> share = ShareOn(n->req, nodes_[node]);
    if (!share.ok()) continue;  // it can never run here; its next attempt nominates it elsewhere
    PodSpec spec = SpecOn(n->req, *share);
    const bool mps = spec.sharing() && !n->req.user.empty();
    waiting.push_back({n->priority, std::move(spec), &n->name, mps ? &n->req.user : &kNoUser});
  }
  std::sort(waiting.begin(), waiting.end(), [](const Waiting& x, const Waiting& y) {
    if (x.priority != y.priority) return x.priority > y.priority;
    if (x.spec.gpu_request() != y.spec.gpu_request()) {
      return x.spec.gpu_request() > y.spec.gpu_request();
    }
    return *x.name < *y.name;
  });
  NodeState future;
  future.gpu_free = free;
  for (size_t g = 0; g < ending.size(); ++g) future.gpu_free[g] += ending[g];
  // Under MPS, the user each GPU is kept for by the waiting pods placed so far.
  std::vector<const std::string*> kept_for(free.size(), nullptr);
  const std::vector<GpuUsers>* users = UsersOn(node);
  for (const Waiting& w : waiting) {
    std::vector<int> gpus;
    if (w.user->empty()) {
      gpus = BestFitGpus(future, w.spec);
    } else {
      NodeState open = future;
      for (size_t g = 0; g < open.gpu_free.size(); ++g) {
        if ((users != nullptr && SharedByAnother(*users, g, *w.user)) ||
            (kept_for[g] != nullptr && *kept_for[g] != *w.user)) {
          open.gpu_free[g] = 0;
        }
      }
      gpus = BestFitGpus(open, w.spec);
    }
    if (gpus.empty()) {
      if (blocker->empty()) *blocker = *w.name;
      continue;
    }
    for (int g : gpus) {
      future.gpu_free[g] -= w.spec.gpu_milli;
      if (!w.user->empty()) kept_for[g] = w.user;
    }
  }
  std::vector<int64_t> room(free.size());
  for (size_t g = 0; g < free.size(); ++g) {
    room[g] = std::min(free[g], future.gpu_free[g]);
    if (!user.empty() && kept_for[g] != nullptr && *kept_for[g] != user) room[g] = 0;
  }
  return room;
}

std::vector<int64_t> OnlineCluster::Ending(int node) const {
  std::vector<int64_t> out(state_.node(node).gpu_free.size(), 0);
  auto on = ending_on_.find(nodes_[node].name);
  if (on == ending_on_.end()) {
    return out;
  }
  for (const std::string& uid : on->second) {
    const Assignment& a = held_.at(uid).a;
    for (int g : a.gpus) out[g] += a.milli_per_gpu;
  }
  return out;
}

void OnlineCluster::Index(NodeIndex& index, const std::string& node, const std::string& uid,
                          bool in) {
  std::vector<std::string>& uids = index[node];
  auto it = std::find(uids.begin(), uids.end(), uid);
  if (in && it == uids.end()) uids.push_back(uid);
  if (!in && it != uids.end()) uids.erase(it);
  if (uids.empty()) index.erase(node);
}

void OnlineCluster::Nominate(const std::string& uid, const std::string& name, const GpuRequest& req,
                             int32_t priority, const std::string& node) {
  ClearNomination(uid);
  if (req.num_gpu <= 0 || held_.contains(uid)) {
    return;
  }
  nominated_[uid] = Nominated{.node = node, .name = name, .req = req, .priority = priority};
  Index(nominated_on_, node, uid, true);
}

void OnlineCluster::ClearNomination(const std::string& uid) {
  if (auto it = nominated_.find(uid); it != nominated_.end()) {
    Index(nominated_on_, it->second.node, uid, false);
    nominated_.erase(it);
  }
}

void OnlineCluster::ClearNominations() {
  nominated_.clear();
  nominated_on_.clear();
}

FilterOutcome OnlineCluster::Filter(const GpuRequest& req, const std::vector<std::string>& names,
                                    const std::string& uid, int32_t priority) const {
  FilterOutcome out;
  for (const std::string& name : names) {
    if (req.num_gpu <= 0) {
      out.fit.push_back(name);
      continue;
    }
    auto it = index_.find(name);
    if (it == index_.end()) {
      out.unresolvable[name] = "node unknown to the Tessera extender";
      continue;
    }
    bool unresolvable = false;
    std::string why = Unfit(req, it->second, uid, priority, &unresolvable);
    if (why.empty()) {
      out.fit.push_back(name);
    } else if (unresolvable) {
      out.unresolvable[name] = why;
    } else {
      out.failed[name] = why;
    }
  }
  return out;
}

std::vector<std::pair<std::string, int64_t>> OnlineCluster::Prioritize(
    const GpuRequest& req, const std::vector<std::string>& names, int64_t max_score) const {
  std::vector<std::pair<std::string, int64_t>> raw;
  for (const std::string& name : names) {
    auto it = index_.find(name);
    if (req.num_gpu <= 0) {
      // A pod without GPUs: the node with the least free GPU first (a node without GPUs, or
      // whose GPUs are all allocated), so its CPU and memory are not taken where GPU pods
      // could still run (Tessera's rule for CPU-only pods, docs/scheduler.md).
      raw.emplace_back(name, it == index_.end() ? 0 : -state_.node(it->second).gpu_free_total());
      continue;
    }
    if (it == index_.end()) {
      continue;
    }
    absl::StatusOr<int64_t> share = ShareOn(req, nodes_[it->second]);
    if (!share.ok()) {
      continue;
    }
    PodSpec spec = SpecOn(req, *share);
    if (!state_.Fits(it->second, spec)) {
      continue;
    }
    // The policy's score first; among equal scores, the node left with the least free GPU
    // share (best fit), so that ties pack rather than fall to kube-scheduler's own scoring,
    // which spreads by default.
    const NodeState& n = state_.node(it->second);
    int64_t capacity = static_cast<int64_t>(n.gpu_free.size()) * kGpuMilli;
    int64_t free_after = n.gpu_free_total() - spec.gpu_request();
    int64_t fit = 999 - free_after * 999 / std::max<int64_t>(capacity, 1);
    raw.emplace_back(name, policy_->Score(state_, it->second, spec).score * 1000 + fit);
  }
  if (raw.empty()) {
    return raw;
  }
  auto [lo, hi] = std::minmax_element(
      raw.begin(), raw.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  int64_t min = lo->second;
  int64_t span = hi->second - min;
  for (auto& [name, score] : raw) {
    // Equal raw scores map to equal scores; only the best gets max_score.
    score = span == 0 ? 0 : (score - min) * max_score / span;
  }
  return raw;
}

absl::Status OnlineCluster::Hold(const std::string& uid, int node, const Assignment& a) {
  PodSpec spec = SpecOf(a);
  const NodeState& n = state_.node(node);
  std::vector<int> seen;
  for (int g : a.gpus) {
    if (g < 0 || g >= static_cast<int>(n.gpu_free.size())) {
      return absl::FailedPreconditionError(
          absl::StrCat("GPU ", g, " does not exist on node ", a.node));
    }
    if (std::find(seen.begin(), seen.end(), g) != seen.end()) {
      return absl::FailedPreconditionError(absl::StrCat("GPU ", g, " listed twice"));
    }
    seen.push_back(g);
    if (n.gpu_free[g] < a.milli_per_gpu) {
      return absl::FailedPreconditionError(absl::StrCat("GPU ", g, " on ", a.node, " has ",
                                                        n.gpu_free[g], " milli free, needs ",
                                                        a.milli_per_gpu));
    }
  }
  if (a.milli_per_gpu < 1 || a.milli_per_gpu > kGpuMilli ||
      (a.gpus.size() > 1 && a.milli_per_gpu != kGpuMilli)) {
    return absl::FailedPreconditionError(
        absl::StrCat("share ", a.milli_per_gpu, " milli is not 1..1000 (1000 for multi-GPU)"));
  }
  state_.Assign(node, spec, a.gpus);
  held_[uid] = Held{a, spec, ++generation_};
  CountUser(a, +1);
  ClearNomination(uid);  // bound: no longer waiting
  return absl::OkStatus();
}

absl::StatusOr<Assignment> OnlineCluster::Reserve(const std::string& uid, const GpuRequest& req,
                                                  const std::string& node, int32_t priority) {
  auto it = index_.find(node);
  if (it == index_.end()) {
    return absl::NotFoundError(absl::StrCat("node ", node, " unknown to the Tessera extender"));
  }
  if (const Assignment* held = Find(uid); held != nullptr) {
    if (held->node == node) {
      return *held;
    }
    return absl::AlreadyExistsError(
        absl::StrCat("pod ", uid, " already holds GPUs on node ", held->node));
  }
  Assignment a;
  a.node = node;
  if (req.num_gpu <= 0) {
    return a;
  }
  bool unresolvable = false;
  std::string why = Unfit(req, it->second, uid, priority, &unresolvable);
  if (!why.empty()) {
    return absl::ResourceExhaustedError(absl::StrCat("node ", node, ": ", why));
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t share, ShareOn(req, nodes_[it->second]));
  PodSpec spec = SpecOn(req, share);
  policy_->Observe(spec);
  // Where pods nominated to the node wait, the policy sees the node as they will leave it, and
  // GPUs shared by another user's pods as full: what it may not take is held for the moment of
  // the choice (a placeholder pod per GPU).
  std::string blocker;  // none: Unfit found room
  const std::vector<int64_t> free = state_.node(it->second).gpu_free;
  std::vector<int64_t> room =
      RoomLeft(it->second, uid, priority, req.user, &blocker).value_or(free);
  const std::vector<int> other = OtherUsers(it->second, req.user, nullptr);
  std::vector<std::pair<int, PodSpec>> kept;
  for (size_t g = 0; g < free.size(); ++g) {
    if (other[g] > 0) room[g] = 0;
    if (free[g] == room[g]) continue;
    PodSpec placeholder;
    placeholder.num_gpu = 1;
    placeholder.gpu_milli = free[g] - room[g];
    state_.Assign(it->second, placeholder, {static_cast<int>(g)});
    kept.emplace_back(static_cast<int>(g), placeholder);
  }
  a.gpus = policy_->Score(state_, it->second, spec).gpus;
  for (const auto& [g, placeholder] : kept) state_.Release(it->second, placeholder, {g});
  a.milli_per_gpu = share;
  if (spec.sharing()) a.user = req.user;
  TESSERA_RETURN_IF_ERROR(Hold(uid, it->second, a));
  return a;
}

absl::Status OnlineCluster::Restore(const std::string& uid, const Assignment& a) {
  auto it = index_.find(a.node);
  if (it == index_.end()) {
    return absl::NotFoundError(absl::StrCat("node ", a.node, " unknown to the Tessera extender"));
  }
  if (const Assignment* held = Find(uid); held != nullptr) {
    if (*held == a) {
      return absl::OkStatus();
    }
    Release(uid);
  }
  if (a.gpus.empty()) {
    return absl::OkStatus();
  }
  TESSERA_RETURN_IF_ERROR(Hold(uid, it->second, a));
  policy_->Observe(SpecOf(a));
  return absl::OkStatus();
}

void OnlineCluster::Release(const std::string& uid) {
  auto it = held_.find(uid);
  if (it == held_.end()) {
    return;
  }
  state_.Release(index_.at(it->second.a.node), it->second.spec, it->second.a.gpus);
  if (it->second.ending) Index(ending_on_, it->second.a.node, uid, false);
  CountUser(it->second.a, -1);
  held_.erase(it);
}

const Assignment* OnlineCluster::Find(const std::string& uid) const {
  auto it = held_.find(uid);
  return it == held_.end() ? nullptr : &it->second.a;
}

void OnlineCluster::SetImportance(const std::string& uid, int32_t priority, absl::Time started,
                                  bool ending) {
  if (auto it = held_.find(uid); it != held_.end()) {
    it->second.priority = priority;
    it->second.started = started;
    if (ending != it->second.ending) Index(ending_on_, it->second.a.node, uid, ending);
    it->second.ending = ending;
  }
}

std::map<std::string, std::vector<std::string>> OnlineCluster::PreemptionVictims(
    const GpuRequest& req, int32_t priority,
    const std::map<std::string, std::vector<std::string>>& chosen, const std::string& uid,
    const DisruptionBudgets* budgets, std::map<std::string, int64_t>* added_violations) const {
  std::map<std::string, std::vector<std::string>> out;
  if (req.num_gpu <= 0) return chosen;
  // The pods holding GPUs on each candidate node, in one pass over the held pods.
  std::map<std::string, std::vector<const std::pair<const std::string, Held>*>> on;
  for (const auto& [node, uids] : chosen) on[node];
  for (const auto& entry : held_) {
    if (auto it = on.find(entry.second.a.node); it != on.end()) it->second.push_back(&entry);
  }
  for (const auto& [node, uids] : chosen) {
    auto idx = index_.find(node);
    if (idx == index_.end()) continue;  // unknown: it cannot hold the pod
    absl::StatusOr<int64_t> share = ShareOn(req, nodes_[idx->second]);
    if (!share.ok()) continue;  // wrong model, too small: no eviction helps
    std::vector<int64_t> free = state_.node(idx->second).gpu_free;
    // Nominated pods ahead of this one keep the room they need on what the node will have.
    const std::vector<const Nominated*> ahead = Ahead(idx->second, uid, priority);
    std::vector<int64_t> ending = ahead.empty() ? std::vector<int64_t>() : Ending(idx->second);
    // Per GPU, the pods of another user still sharing it: the GPU is open once none is left.
    std::vector<int> other = OtherUsers(idx->second, req.user, nullptr);
    auto give_back = [&free, &ending, &other, &req](const Held& h, int sign) {
      const bool other_user = !req.user.empty() && !h.a.user.empty() && h.a.user != req.user;
      for (int g : h.a.gpus) {
        free[g] += sign * h.a.milli_per_gpu;
        if (h.ending && !ending.empty()) ending[g] -= sign * h.a.milli_per_gpu;
        if (other_user) other[g] -= sign;
      }
    };
    auto fits = [&] {
      if (ahead.empty() && req.user.empty()) return GpusHaveRoom(free, *share, req.num_gpu);
      std::string blocker;
      std::vector<int64_t> room =
          ahead.empty() ? free : Room(idx->second, free, ending, ahead, req.user, &blocker);
      for (size_t g = 0; g < room.size(); ++g) {
        if (other[g] > 0) room[g] = 0;
      }
      return blocker.empty() && GpusHaveRoom(room, *share, req.num_gpu);
    };
    // kube-scheduler's SelectVictimsOnNode: every lower-priority holder goes; if the pod fits
    // then, each is given back while it still fits, those whose eviction would violate a
    // PodDisruptionBudget first, the most important first within each group.
    const absl::flat_hash_set<std::string> already(uids.begin(), uids.end());
    std::vector<std::pair<const Held*, const std::string*>> candidates;
    for (const auto* entry : on[node]) {
      const Held& h = entry->second;
      if (already.contains(entry->first)) {
        give_back(h, +1);
      } else if (h.priority < priority) {
        candidates.emplace_back(&h, &entry->first);
        give_back(h, +1);
      }
    }
    if (!fits()) continue;
    // Most important first: highest priority, then the earliest started (not started yet: last
    // of all), then by UID, so that the answer does not depend on the order pods were held.
    std::sort(candidates.begin(), candidates.end(), [](const auto& x, const auto& y) {
      if (x.first->priority != y.first->priority) return x.first->priority > y.first->priority;
      if (x.first->started != y.first->started) return x.first->started < y.first->started;
      return *x.second < *y.second;
    });
    // Budgets are used by kube-scheduler's victims first, then by the candidates in that order;
    // a candidate whose eviction takes a budget below zero would violate it.
    std::vector<bool> violating(candidates.size(), false);
    if (budgets != nullptr) {
      std::vector<int64_t> allowed(budgets->allowed.begin(), budgets->allowed.end());
      auto charge = [&](const std::string& pod) {
        bool violates = false;
        for (int b : budgets->of(pod)) violates |= --allowed[b] < 0;
        return violates;
      };
      for (const std::string& u : uids) charge(u);
      for (size_t i = 0; i < candidates.size(); ++i) violating[i] = charge(*candidates[i].second);
    }
    std::vector<bool> evicted(candidates.size(), false);
    for (bool group : {true, false}) {
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (violating[i] != group) continue;
        give_back(*candidates[i].first, -1);
        if (!fits()) {
          give_back(*candidates[i].first, +1);
          evicted[i] = true;
        }
      }
    }
    // kube-scheduler's victims, then the added ones least important first.
    std::vector<std::string> victims = uids;
    int64_t violations = 0;
    for (size_t i = candidates.size(); i-- > 0;) {
      if (!evicted[i]) continue;
      victims.push_back(*candidates[i].second);
      violations += violating[i] ? 1 : 0;
    }
    // No victim at all: the pod fits already (something left since the filter) and will be
    // placed on its next attempt; kube-scheduler refuses a candidate without victims.
    if (victims.empty()) continue;
    out[node] = std::move(victims);
    if (added_violations != nullptr) (*added_violations)[node] = violations;
  }
  return out;
}

std::string OnlineCluster::PickPreemptionNode(
    const std::map<std::string, std::vector<std::string>>& victims,
    const std::map<std::string, int64_t>& violations) const {
  // Each node's key, compared as kube-scheduler's score functions in their order (smaller wins).
  using Key = std::tuple<int64_t, int64_t, int64_t, size_t, absl::Duration>;
  std::optional<Key> best;
  std::string chosen;
  for (const auto& [node, uids] : victims) {
    if (uids.empty()) continue;
    int64_t highest = INT64_MIN, sum = 0;
    absl::Time earliest = absl::InfiniteFuture();  // of the highest-priority victims
    for (const std::string& uid : uids) {
      auto it = held_.find(uid);
      const int64_t priority = it == held_.end() ? 0 : it->second.priority;
      const absl::Time started = it == held_.end() ? absl::InfiniteFuture() : it->second.started;
      if (priority > highest) {
        highest = priority;
        earliest = started;
      } else if (priority == highest) {
        earliest = std::min(earliest, started);
      }
      sum += priority + int64_t{INT32_MAX} + 1;  // as kube-scheduler: every term positive
    }
    auto v = violations.find(node);
    // The latest such start wins (a pod not started yet counts as the latest of all).
    const Key key{v == violations.end() ? 0 : v->second, highest, sum, uids.size(),
                  absl::UnixEpoch() - earliest};
    if (!best.has_value() || key < *best) {
      best = key;
      chosen = node;
    }
  }
  return chosen;
}

bool OnlineCluster::EndingBelow(const std::string& node, int32_t priority) const {
  auto on = ending_on_.find(node);
  if (on == ending_on_.end()) return false;
  return std::any_of(on->second.begin(), on->second.end(),
                     [&](const std::string& uid) { return held_.at(uid).priority < priority; });
}

std::map<std::string, std::string> OnlineCluster::NominatedBelow(const std::string& node,
                                                                 int32_t priority) const {
  std::map<std::string, std::string> out;
  auto on = nominated_on_.find(node);
  if (on == nominated_on_.end()) return out;
  for (const std::string& uid : on->second) {
    const Nominated& n = nominated_.at(uid);
    if (n.priority < priority) out[uid] = n.name;
  }
  return out;
}

absl::flat_hash_set<std::string> OnlineCluster::HeldNodes() const {
  absl::flat_hash_set<std::string> out;
  for (const auto& [uid, h] : held_) out.insert(h.a.node);
  return out;
}

std::vector<OnlineCluster::MixedUserGpu> OnlineCluster::MixedUserGpus() const {
  std::map<std::pair<std::string, int>, MixedUserGpu> mixed;
  for (const auto& [node, gpus] : users_on_) {
    for (size_t g = 0; g < gpus.size(); ++g) {
      if (gpus[g].size() < 2) continue;
      MixedUserGpu& m = mixed[{node, static_cast<int>(g)}];
      m.node = node;
      m.gpu = static_cast<int>(g);
      for (const auto& [user, pods] : gpus[g]) m.users.push_back(user);
      std::sort(m.users.begin(), m.users.end());
    }
  }
  if (mixed.empty()) return {};
  for (const auto& [uid, h] : held_) {  // held_ is ordered: the pods come sorted
    if (h.a.user.empty()) continue;
    for (int g : h.a.gpus) {
      if (auto it = mixed.find({h.a.node, g}); it != mixed.end()) it->second.pods.push_back(uid);
    }
  }
  std::vector<MixedUserGpu> out;
  out.reserve(mixed.size());
  for (auto& [key, m] : mixed) out.push_back(std::move(m));
  return out;
}

std::vector<OnlineCluster::NodeView> OnlineCluster::View(const std::string& only) const {
  std::map<std::string, NodeView> views;  // by name
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!only.empty() && nodes_[i].name != only) continue;
    NodeView& v = views[nodes_[i].name];
    v.name = nodes_[i].name;
    v.model = nodes_[i].model;
    v.free_milli = state_.node(static_cast<int>(i)).gpu_free;
    v.holders.resize(v.free_milli.size());
  }
  for (const auto& [uid, h] : held_) {  // ordered: each GPU's holders come by UID
    auto it = views.find(h.a.node);
    if (it == views.end()) continue;
    for (int g : h.a.gpus) {
      NodeView::Holder holder;
      holder.uid = uid;
      holder.milli = h.a.milli_per_gpu;
      holder.user = h.a.user;
      holder.priority = h.priority;
      holder.ending = h.ending;
      it->second.holders[g].push_back(std::move(holder));
    }
  }
  for (const auto& [uid, n] : nominated_) {
    if (auto it = views.find(n.node); it != views.end()) {
      it->second.nominated.emplace_back(n.name, n.priority);
    }
  }
  std::vector<NodeView> out;
  out.reserve(views.size());
  for (auto& [name, v] : views) {
    std::sort(v.nominated.begin(), v.nominated.end());
    out.push_back(std::move(v));
  }
  return out;
}

OnlineCluster::ResyncResult OnlineCluster::Resync(const std::map<std::string, Assignment>& live,
                                                  uint64_t since) {
  ResyncResult r;
  std::vector<std::string> gone;
  for (const auto& [uid, h] : held_) {
    auto it = live.find(uid);
    if (h.generation > since) {
      continue;  // reserved after the list was asked for
    }
    if (it == live.end() || !(it->second == h.a)) {
      gone.push_back(uid);
    }
  }
  for (const std::string& uid : gone) {
    Release(uid);
    ++r.released;
  }
  for (const auto& [uid, a] : live) {
    if (held_.contains(uid) || a.gpus.empty()) {
      continue;
    }
    if (absl::Status s = Restore(uid, a); s.ok()) {
      ++r.restored;
    } else {
      r.conflicts.push_back(absl::StrCat(uid, ": ", s.message()));
    }
  }
  return r;
}

}  // namespace tessera::placement::gpushare
