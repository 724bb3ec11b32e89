#include "placement/gpushare/cluster_state.h"

#include <algorithm>
#include <cstdlib>

namespace tessera::placement::gpushare {

int64_t NodeState::gpu_free_total() const {
  int64_t t = 0;
  for (int64_t g : gpu_free) {
    t += g;
  }
  return t;
}

ClusterState::ClusterState(const std::vector<NodeSpec>& nodes) {
  for (const NodeSpec& spec : nodes) {
    AddNode(spec);
  }
}

int ClusterState::AddNode(const NodeSpec& spec) {
  NodeState n;
  n.cpu_free = spec.cpu_milli;
  n.memory_free = spec.memory_mib;
  n.gpu_free.assign(spec.gpus, kGpuMilli);
  if (!spec.model.empty()) {
    auto it = std::find(models_.begin(), models_.end(), spec.model);
    n.model = static_cast<int>(it - models_.begin());
    if (it == models_.end()) {
      models_.push_back(spec.model);
    }
  }
  total_gpu_milli_ += spec.gpus * kGpuMilli;
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size()) - 1;
}

void ClusterState::RemoveEmptyNode(int node) {
  total_gpu_milli_ -= static_cast<int64_t>(nodes_[node].gpu_free.size()) * kGpuMilli;
  nodes_.erase(nodes_.begin() + node);
}

bool ClusterState::ModelAllowed(int model, const std::vector<std::string>& spec) const {
  if (spec.empty()) {
    return true;
  }
  return model >= 0 && std::find(spec.begin(), spec.end(), models_[model]) != spec.end();
}

bool ClusterState::Fits(int i, const PodSpec& pod) const {
  const NodeState& n = nodes_[i];
  if (n.cpu_free < pod.cpu_milli || n.memory_free < pod.memory_mib) {
    return false;
  }
  if (pod.num_gpu == 0) {
    return true;
  }
  if (!ModelAllowed(n.model, pod.gpu_spec)) {
    return false;
  }
  return GpusHaveRoom(n.gpu_free, pod.gpu_milli, pod.num_gpu);
}

void ClusterState::Assign(int i, const PodSpec& pod, const std::vector<int>& gpus) {
  NodeState& n = nodes_[i];
  n.cpu_free -= pod.cpu_milli;
  n.memory_free -= pod.memory_mib;
  for (int g : gpus) {
    n.gpu_free[g] -= pod.gpu_milli;
    if (n.gpu_free[g] < 0) {
      std::abort();  // callers choose GPUs with room; anything else is a bug
    }
  }
  used_gpu_milli_ += static_cast<int64_t>(gpus.size()) * pod.gpu_milli;
  if (pod.num_gpu > 0) {
    ++n.affinity[pod.sharing() ? 0 : std::min(pod.num_gpu, 8)];
  }
  ++n.version;
}

void ClusterState::Release(int i, const PodSpec& pod, const std::vector<int>& gpus) {
  NodeState& n = nodes_[i];
  n.cpu_free += pod.cpu_milli;
  n.memory_free += pod.memory_mib;
  for (int g : gpus) {
    n.gpu_free[g] += pod.gpu_milli;
    if (n.gpu_free[g] > kGpuMilli) {
      std::abort();  // releasing what was never assigned is a bug
    }
  }
  used_gpu_milli_ -= static_cast<int64_t>(gpus.size()) * pod.gpu_milli;
  if (pod.num_gpu > 0) {
    --n.affinity[pod.sharing() ? 0 : std::min(pod.num_gpu, 8)];
  }
  ++n.version;
}

std::vector<int> BestFitGpus(const NodeState& node, const PodSpec& pod) {
  std::vector<int> out;
  if (pod.num_gpu == 0) {
    return out;
  }
  if (pod.sharing()) {
    int best = -1;
    for (size_t j = 0; j < node.gpu_free.size(); ++j) {
      if (node.gpu_free[j] >= pod.gpu_milli &&
          (best < 0 || node.gpu_free[j] < node.gpu_free[best])) {
        best = static_cast<int>(j);
      }
    }
    if (best >= 0) {
      out.push_back(best);
    }
    return out;
  }
  for (size_t j = 0; j < node.gpu_free.size() && static_cast<int>(out.size()) < pod.num_gpu; ++j) {
    if (node.gpu_free[j] >= kGpuMilli) {
      out.push_back(static_cast<int>(j));
    }
  }
  if (static_cast<int>(out.size()) < pod.num_gpu) {
    out.clear();
  }
  return out;
}

}  // namespace tessera::placement::gpushare
