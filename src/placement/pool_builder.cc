#include "placement/pool_builder.h"

#include <algorithm>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace tessera::placement {
namespace {

int CeilDiv(int a, int b) { return (a + b - 1) / b; }

NodeSharing SharingOf(ShapeKind k) {
  return k == ShapeKind::kMps ? NodeSharing::kMps : NodeSharing::kTimeSlicing;
}

// First-fit decreasing of multi-GPU units (size -> count) into nodes of `capacity` GPUs.
int PackUnits(const std::map<int, int, std::greater<>>& units, int capacity) {
  std::vector<int> free;
  for (const auto& [unit_size, count] : units) {
    const int size = unit_size;
    for (int i = 0; i < count; ++i) {
      auto it = std::find_if(free.begin(), free.end(), [size](int f) { return f >= size; });
      if (it == free.end()) {
        free.push_back(capacity - size);
      } else {
        *it -= size;
      }
    }
  }
  return static_cast<int>(free.size());
}

}  // namespace

std::string SharingConfigName(NodeSharing sharing, int slots) {
  switch (sharing) {
    case NodeSharing::kMps:
      return absl::StrCat("tessera-mps-", slots);
    case NodeSharing::kTimeSlicing:
      return absl::StrCat("tessera-ts-", slots);
    case NodeSharing::kNone:
      break;
  }
  return "default";
}

void DescribeResource(const model::Pool& pool, const Shape& shape, WorkloadPlacement* out) {
  out->node_selector = {{kPoolLabel, pool.name}};
  out->resource_count = 1;
  switch (shape.kind) {
    case ShapeKind::kExclusive:
      out->resource = "nvidia.com/gpu";
      out->resource_count = shape.gpus;
      break;
    case ShapeKind::kMig:
      out->resource = absl::StrCat("nvidia.com/mig-", pool.gpu->profiles[shape.profile].name);
      break;
    case ShapeKind::kMps:
    case ShapeKind::kTimeSlicing:
      // renameByDefault: shared GPUs are advertised as <name>.shared, so a pod that wants a
      // whole GPU can never land on a shared one by accident.
      out->resource = "nvidia.com/gpu.shared";
      out->node_selector.push_back(
          {kDevicePluginConfigLabel, SharingConfigName(SharingOf(shape.kind), shape.slots)});
      break;
  }
}

struct PoolBuilder::Groups {
  std::map<int, int, std::greater<>> multi;  // GPUs per unit -> units
  int singles = 0;
  std::vector<int> mig_demand;
  std::vector<MigGpu> mig_gpus;
  bool dedicated_spread = false;
  int dedicated_gpus = 0;
  int dedicated_nodes = 0;
  struct SlotClass {
    int replicas = 0;
    bool spread = false;
    int gpus = 0;
    int nodes = 0;
  };
  std::map<std::pair<int, int>, SlotClass> classes;  // (ShapeKind, slots)
  Estimate total;
};

PoolBuilder::Groups PoolBuilder::Group(const std::vector<Member>& members, bool spread) {
  Groups g;
  const int gpn = pool_.gpus_per_node;
  const bool may_spread = spread && pool_.max_nodes >= 2;
  g.mig_demand.assign(pool_.gpu->profiles.size(), 0);
  bool any_mig = false;
  for (const Member& m : members) {
    if (m.replicas <= 0) {
      continue;
    }
    const bool several = m.replicas >= 2;
    switch (m.shape.kind) {
      case ShapeKind::kExclusive:
        if (m.shape.gpus >= 2) {
          g.multi[m.shape.gpus] += m.replicas;
        } else {
          g.singles += m.replicas;
        }
        g.dedicated_spread |= several;
        break;
      case ShapeKind::kMig:
        g.mig_demand[m.shape.profile] += m.replicas;
        any_mig = true;
        g.dedicated_spread |= several;
        break;
      case ShapeKind::kMps:
      case ShapeKind::kTimeSlicing: {
        Groups::SlotClass& c = g.classes[{static_cast<int>(m.shape.kind), m.shape.slots}];
        c.replicas += m.replicas;
        c.spread |= several;
        break;
      }
    }
  }
  if (any_mig) {
    g.mig_gpus = packer_.Pack(g.mig_demand);
  }
  int mig_count = MigPacker::CountGpus(g.mig_gpus);
  int multi_gpus = 0, multi_units = 0;
  for (const auto& [size, count] : g.multi) {
    multi_gpus += size * count;
    multi_units += count;
  }
  g.dedicated_gpus = multi_gpus + g.singles + mig_count;
  if (g.dedicated_gpus > 0) {
    g.dedicated_nodes = std::max(PackUnits(g.multi, gpn), CeilDiv(g.dedicated_gpus, gpn));
    if (may_spread && g.dedicated_spread) {
      if (multi_units + g.singles + mig_count < 2) {
        ++g.dedicated_gpus;  // one GPU holds every replica: a second one on another node
      }
      g.dedicated_nodes = std::max(g.dedicated_nodes, 2);
    }
  }
  g.total = {g.dedicated_gpus, g.dedicated_nodes};
  for (auto& [key, c] : g.classes) {
    c.gpus = CeilDiv(c.replicas, key.second);
    if (may_spread && c.spread && c.gpus < 2) {
      c.gpus = 2;
    }
    c.nodes = CeilDiv(c.gpus, gpn);
    if (may_spread && c.spread) {
      c.nodes = std::max(c.nodes, 2);
    }
    g.total.gpus += c.gpus;
    g.total.nodes += c.nodes;
  }
  return g;
}

Estimate PoolBuilder::Evaluate(const std::vector<Member>& members, bool spread) {
  return Group(members, spread).total;
}

namespace {

// A node of `gpus` idle GPUs, indexed 0..gpus-1.
NodePlan EmptyNode(int gpus, NodeSharing sharing = NodeSharing::kNone, int slots = 0) {
  NodePlan n;
  n.sharing = sharing;
  n.slots = slots;
  n.gpus.resize(gpus);
  for (int i = 0; i < gpus; ++i) {
    n.gpus[i].index = i;
  }
  return n;
}

// Node-building helpers over one PoolPlan.
class Layout {
 public:
  Layout(PoolPlan& plan, int gpus_per_node) : plan_(plan), gpn_(gpus_per_node) {}

  int NewNode(NodeSharing sharing, int slots) {
    plan_.nodes.push_back(EmptyNode(gpn_, sharing, slots));
    free_.push_back(gpn_);
    return static_cast<int>(plan_.nodes.size()) - 1;
  }
  // The node among `nodes` with the most free GPUs (at least `need`), or -1.
  int MostFree(const std::vector<int>& nodes, int need) const {
    int best = -1;
    for (int n : nodes) {
      if (free_[n] >= need && (best < 0 || free_[n] > free_[best])) {
        best = n;
      }
    }
    return best;
  }
  // Takes the first idle GPU of `node`.
  GpuPlan& TakeGpu(int node, GpuMode mode) {
    for (GpuPlan& g : plan_.nodes[node].gpus) {
      if (g.mode == GpuMode::kIdle && g.tenants.empty()) {
        g.mode = mode;
        --free_[node];
        return g;
      }
    }
    // Callers pick nodes through MostFree(); reaching here is a bug in the builder.
    std::abort();
  }

 private:
  PoolPlan& plan_;
  int gpn_;
  std::vector<int> free_;
};

// Re-places a MIG GPU's instances after its composition changed, keeping each tenant on an
// instance of its profile.
bool Relayout(MigPacker& packer, const model::GpuModel& model, GpuPlan& gpu,
              const std::vector<int>& counts) {
  if (!packer.Feasible(counts)) {
    return false;
  }
  model::MigLayout layout = *model::FindPlacement(model, counts);
  std::vector<int> tenant_profile;
  for (const Tenant& t : gpu.tenants) {
    tenant_profile.push_back(gpu.layout[t.mig_instance].profile);
  }
  std::vector<bool> used(layout.size(), false);
  for (size_t i = 0; i < gpu.tenants.size(); ++i) {
    for (size_t j = 0; j < layout.size(); ++j) {
      if (!used[j] && layout[j].profile == tenant_profile[i]) {
        used[j] = true;
        gpu.tenants[i].mig_instance = static_cast<int>(j);
        break;
      }
    }
  }
  gpu.layout = std::move(layout);
  return true;
}

}  // namespace

PoolPlan PoolBuilder::Build(const std::vector<Member>& members, bool spread,
                            std::vector<std::string>* warnings) {
  Groups g = Group(members, spread);
  PoolPlan out;
  Layout lay(out, pool_.gpus_per_node);

  // Dedicated nodes: multi-GPU replicas (worst fit, so replicas alternate nodes), then MIG
  // GPUs, then single exclusive GPUs, each on the node with the most free GPUs.
  std::vector<int> dedicated;
  dedicated.reserve(g.dedicated_nodes);
  for (int i = 0; i < g.dedicated_nodes; ++i) {
    dedicated.push_back(lay.NewNode(NodeSharing::kNone, 0));
  }
  auto dedicated_node = [&](int need) {
    int n = lay.MostFree(dedicated, need);
    if (n < 0) {
      n = lay.NewNode(NodeSharing::kNone, 0);
      dedicated.push_back(n);
    }
    return n;
  };
  std::vector<const Member*> multi;
  for (const Member& m : members) {
    if (m.shape.kind == ShapeKind::kExclusive && m.shape.gpus >= 2) {
      multi.push_back(&m);
    }
  }
  std::stable_sort(multi.begin(), multi.end(),
                   [](const Member* a, const Member* b) { return a->shape.gpus > b->shape.gpus; });
  for (const Member* m : multi) {
    for (int r = 0; r < m->replicas; ++r) {
      int node = dedicated_node(m->shape.gpus);
      for (int k = 0; k < m->shape.gpus; ++k) {
        lay.TakeGpu(node, GpuMode::kExclusive).tenants.push_back({m->workload, r, -1});
      }
    }
  }
  // MIG GPUs: instances packed with their workloads known, so each workload's replicas land
  // on two GPUs or more (PackInstances), then each GPU on the node with the most room.
  {
    std::vector<MigPacker::Instance> instances;
    std::vector<Tenant> owners;
    for (const Member& m : members) {
      if (m.shape.kind != ShapeKind::kMig) {
        continue;
      }
      for (int r = 0; r < m.replicas; ++r) {
        instances.push_back({m.shape.profile, m.workload});
        owners.push_back({m.workload, r, -1});
      }
    }
    const bool may_spread = spread && pool_.max_nodes >= 2;
    for (const std::vector<int>& group : packer_.PackInstances(instances, may_spread)) {
      std::vector<int> counts(pool_.gpu->profiles.size(), 0);
      for (int i : group) {
        ++counts[instances[i].profile];
      }
      GpuPlan& gpu = lay.TakeGpu(dedicated_node(1), GpuMode::kMig);
      gpu.layout = *model::FindPlacement(*pool_.gpu, counts);
      std::vector<bool> taken(gpu.layout.size(), false);
      for (int i : group) {
        Tenant t = owners[i];
        for (size_t j = 0; j < gpu.layout.size(); ++j) {
          if (!taken[j] && gpu.layout[j].profile == instances[i].profile) {
            taken[j] = true;
            t.mig_instance = static_cast<int>(j);
            break;
          }
        }
        gpu.tenants.push_back(t);
      }
    }
  }
  for (const Member& m : members) {
    if (m.shape.kind == ShapeKind::kExclusive && m.shape.gpus == 1) {
      for (int r = 0; r < m.replicas; ++r) {
        lay.TakeGpu(dedicated_node(1), GpuMode::kExclusive).tenants.push_back({m.workload, r, -1});
      }
    }
  }
  // Slot classes: their own nodes, GPUs balanced over them, filled slot-major.
  for (const auto& [key, c] : g.classes) {
    ShapeKind kind = static_cast<ShapeKind>(key.first);
    int slots = key.second;
    std::vector<int> nodes;
    nodes.reserve(c.nodes);
    for (int i = 0; i < c.nodes; ++i) {
      nodes.push_back(lay.NewNode(SharingOf(kind), slots));
    }
    GpuMode mode = kind == ShapeKind::kMps ? GpuMode::kMps : GpuMode::kTimeSlicing;
    std::vector<GpuPlan*> order;
    order.reserve(c.gpus);
    for (int i = 0; i < c.gpus; ++i) {
      order.push_back(&lay.TakeGpu(lay.MostFree(nodes, 1), mode));
    }
    // Round-robin over nodes: GPUs were taken alternately, so `order` already alternates.
    size_t slot = 0;
    for (const Member& m : members) {
      if (m.shape.kind != kind || m.shape.slots != slots) {
        continue;
      }
      for (int r = 0; r < m.replicas; ++r, ++slot) {
        order[slot % order.size()]->tenants.push_back({m.workload, r, -1});
      }
    }
  }
  // GPUs taken for spreading but left without tenants go back to idle.
  for (NodePlan& n : out.nodes) {
    for (GpuPlan& gpu : n.gpus) {
      if (gpu.tenants.empty()) {
        gpu.mode = GpuMode::kIdle;
        gpu.layout.clear();
      }
    }
  }
  if (spread && pool_.max_nodes >= 2) {
    std::vector<std::string> unspread = SpreadFix(out, members);
    for (const std::string& key : unspread) {
      warnings->push_back(absl::StrCat("pool ", pool_.name, ": could not spread ", key,
                                       " over two nodes (no room on another node)"));
      out.spread_relaxed = true;
    }
  }

  // Used nodes first; then the pool's other existing nodes, idle. Names: existing nodes first.
  std::vector<NodePlan> used;
  for (NodePlan& n : out.nodes) {
    if (n.used_gpus() > 0) {
      used.push_back(std::move(n));
    }
  }
  out.nodes = std::move(used);
  out.nodes_used = static_cast<int>(out.nodes.size());
  out.gpus_used = 0;
  for (NodePlan& n : out.nodes) {
    out.gpus_used += n.used_gpus();
  }
  while (static_cast<int>(out.nodes.size()) < pool_.nodes) {
    out.nodes.push_back(EmptyNode(pool_.gpus_per_node));
  }
  int fresh = 0;
  for (size_t i = 0; i < out.nodes.size(); ++i) {
    NodePlan& n = out.nodes[i];
    n.exists = static_cast<int>(i) < pool_.nodes;
    if (n.exists) {
      n.name = i < pool_.node_names.size() ? pool_.node_names[i] : absl::StrCat(pool_.name, "-", i);
    } else {
      n.name = absl::StrCat(pool_.name, "-new-", ++fresh);
    }
  }
  return out;
}

std::vector<std::string> PoolBuilder::SpreadFix(PoolPlan& plan,
                                                const std::vector<Member>& members) {
  std::vector<std::string> unspread;
  struct Where {
    int node;
    int gpu;
    int tenant;
  };
  const int num_nodes_limit = pool_.max_nodes;
  auto locate = [&](int workload) {
    std::vector<Where> out;
    for (int n = 0; n < static_cast<int>(plan.nodes.size()); ++n) {
      for (int gi = 0; gi < static_cast<int>(plan.nodes[n].gpus.size()); ++gi) {
        const std::vector<Tenant>& ts = plan.nodes[n].gpus[gi].tenants;
        for (int t = 0; t < static_cast<int>(ts.size()); ++t) {
          if (ts[t].workload == workload) {
            out.push_back({n, gi, t});
          }
        }
      }
    }
    return out;
  };
  // Per workload: replicas per node, kept up to date by every swap and move below, so that
  // checking a workload's spread costs O(1) rather than a scan of the pool.
  const int num_workloads = static_cast<int>(workloads_.workloads.size());
  std::vector<absl::flat_hash_map<int, int>> per_node(num_workloads);
  std::vector<int> total(num_workloads, 0);
  for (int n = 0; n < static_cast<int>(plan.nodes.size()); ++n) {
    for (const GpuPlan& g : plan.nodes[n].gpus) {
      for (const Tenant& t : g.tenants) {
        ++per_node[t.workload][n];
      }
    }
  }
  for (const Member& m : members) {
    total[m.workload] = m.replicas;
  }
  auto spread_ok = [&](int workload) {
    return per_node[workload].size() >= 2 || total[workload] < 2;
  };
  auto shift = [&](int workload, int from, int to) {
    auto it = per_node[workload].find(from);
    if (--it->second == 0) {
      per_node[workload].erase(it);
    }
    ++per_node[workload][to];
  };
  auto used_nodes = [&]() {
    int n = 0;
    for (const NodePlan& node : plan.nodes) {
      n += node.used_gpus() > 0 ? 1 : 0;
    }
    return n;
  };
  // Whether the slot at `b` holds the same kind of capacity as `a` (swappable tenants).
  auto same_slot = [&](const Where& a, const Where& b) {
    const NodePlan& na = plan.nodes[a.node];
    const NodePlan& nb = plan.nodes[b.node];
    const GpuPlan& ga = na.gpus[a.gpu];
    const GpuPlan& gb = nb.gpus[b.gpu];
    if (na.sharing != nb.sharing || na.slots != nb.slots || ga.mode != gb.mode) {
      return false;
    }
    if (ga.mode == GpuMode::kMig) {
      return ga.layout[ga.tenants[a.tenant].mig_instance].profile ==
             gb.layout[gb.tenants[b.tenant].mig_instance].profile;
    }
    if (ga.mode == GpuMode::kExclusive) {
      return workloads_.workloads[ga.tenants[a.tenant].workload].whole_gpus() <= 1 &&
             workloads_.workloads[gb.tenants[b.tenant].workload].whole_gpus() <= 1;
    }
    return true;
  };
  // Removes tenant `w` from its GPU (and its MIG instance), idling an emptied GPU.
  auto remove_tenant = [&](const Where& w) {
    GpuPlan& gpu = plan.nodes[w.node].gpus[w.gpu];
    Tenant t = gpu.tenants[w.tenant];
    gpu.tenants.erase(gpu.tenants.begin() + w.tenant);
    if (gpu.mode == GpuMode::kMig) {
      gpu.layout.erase(gpu.layout.begin() + t.mig_instance);
      for (Tenant& other : gpu.tenants) {
        if (other.mig_instance > t.mig_instance) {
          --other.mig_instance;
        }
      }
    }
    if (gpu.tenants.empty()) {
      gpu.mode = GpuMode::kIdle;
      gpu.layout.clear();
    }
    return t;
  };
  // Puts tenant `t` (whose shape is `shape`) on GPU `gi` of node `n`, if it fits there.
  auto add_tenant = [&](int n, int gi, Tenant t, const Shape& shape) {
    NodePlan& node = plan.nodes[n];
    GpuPlan& gpu = node.gpus[gi];
    switch (shape.kind) {
      case ShapeKind::kExclusive:
        if (gpu.mode != GpuMode::kIdle || node.sharing != NodeSharing::kNone) {
          return false;
        }
        gpu.mode = GpuMode::kExclusive;
        gpu.tenants.push_back(t);
        return true;
      case ShapeKind::kMig: {
        if (node.sharing != NodeSharing::kNone ||
            (gpu.mode != GpuMode::kIdle && gpu.mode != GpuMode::kMig)) {
          return false;
        }
        std::vector<int> counts = model::LayoutCounts(*pool_.gpu, gpu.layout);
        ++counts[shape.profile];
        GpuPlan trial = gpu;
        trial.mode = GpuMode::kMig;
        t.mig_instance = -1;
        if (!Relayout(packer_, *pool_.gpu, trial, counts)) {
          return false;
        }
        // The new tenant takes the free instance of its profile.
        std::vector<bool> taken(trial.layout.size(), false);
        for (const Tenant& o : trial.tenants) {
          taken[o.mig_instance] = true;
        }
        for (size_t j = 0; j < trial.layout.size(); ++j) {
          if (!taken[j] && trial.layout[j].profile == shape.profile) {
            t.mig_instance = static_cast<int>(j);
            break;
          }
        }
        trial.tenants.push_back(t);
        gpu = std::move(trial);
        return true;
      }
      case ShapeKind::kMps:
      case ShapeKind::kTimeSlicing: {
        GpuMode mode = shape.kind == ShapeKind::kMps ? GpuMode::kMps : GpuMode::kTimeSlicing;
        if (node.sharing != SharingOf(shape.kind) || node.slots != shape.slots ||
            (gpu.mode != GpuMode::kIdle && gpu.mode != mode) ||
            static_cast<int>(gpu.tenants.size()) >= shape.slots) {
          return false;
        }
        gpu.mode = mode;
        gpu.tenants.push_back(t);
        return true;
      }
    }
    return false;
  };

  for (const Member& m : members) {
    if (m.replicas < 2 || (m.shape.kind == ShapeKind::kExclusive && m.shape.gpus >= 2) ||
        spread_ok(m.workload)) {
      continue;
    }
    std::vector<Where> mine = locate(m.workload);
    const Where& victim = mine.back();
    bool fixed = false;
    // 1. Swap with a tenant of the same slot kind on another node, if its workload stays spread.
    for (int n = 0; n < static_cast<int>(plan.nodes.size()) && !fixed; ++n) {
      if (n == victim.node) {
        continue;
      }
      for (int gi = 0; gi < static_cast<int>(plan.nodes[n].gpus.size()) && !fixed; ++gi) {
        std::vector<Tenant>& ts = plan.nodes[n].gpus[gi].tenants;
        for (int ti = 0; ti < static_cast<int>(ts.size()) && !fixed; ++ti) {
          Where other{n, gi, ti};
          int w2 = ts[ti].workload;
          if (w2 == m.workload || !same_slot(victim, other)) {
            continue;
          }
          Tenant& a = plan.nodes[victim.node].gpus[victim.gpu].tenants[victim.tenant];
          Tenant& b = ts[ti];
          std::swap(a.workload, b.workload);
          std::swap(a.replica, b.replica);
          shift(m.workload, victim.node, n);
          shift(w2, n, victim.node);
          if (spread_ok(w2) && spread_ok(m.workload)) {
            fixed = true;
          } else {
            std::swap(a.workload, b.workload);
            std::swap(a.replica, b.replica);
            shift(m.workload, n, victim.node);
            shift(w2, victim.node, n);
          }
        }
      }
    }
    // 2. Move the replica to room on another node (a free slot, MIG space, an idle GPU).
    for (int n = 0; n < static_cast<int>(plan.nodes.size()) && !fixed; ++n) {
      if (n == victim.node) {
        continue;
      }
      for (int gi = 0; gi < static_cast<int>(plan.nodes[n].gpus.size()) && !fixed; ++gi) {
        Tenant t = plan.nodes[victim.node].gpus[victim.gpu].tenants[victim.tenant];
        if (add_tenant(n, gi, t, m.shape)) {
          remove_tenant(victim);
          shift(m.workload, victim.node, n);
          fixed = true;
        }
      }
    }
    // 3. A new node, if the pool may grow.
    if (!fixed && used_nodes() < num_nodes_limit) {
      NodeSharing sharing =
          m.shape.kind == ShapeKind::kMps || m.shape.kind == ShapeKind::kTimeSlicing
              ? SharingOf(m.shape.kind)
              : NodeSharing::kNone;
      plan.nodes.push_back(EmptyNode(pool_.gpus_per_node, sharing,
                                     sharing == NodeSharing::kNone ? 0 : m.shape.slots));
      const int n = static_cast<int>(plan.nodes.size()) - 1;
      Tenant t = plan.nodes[victim.node].gpus[victim.gpu].tenants[victim.tenant];
      if (add_tenant(n, 0, t, m.shape)) {
        remove_tenant(victim);
        shift(m.workload, victim.node, n);
        fixed = true;
      }
    }
    if (!fixed) {
      unspread.push_back(workloads_.workloads[m.workload].key());
    }
  }
  return unspread;
}

}  // namespace tessera::placement
