// The online scheduler's view of a cluster of GPU-sharing nodes: per node free CPU, memory and
// per-GPU free share in milli-GPU (Alibaba's GPU-sharing model: a pod asks for CPU, memory,
// and either a share d < 1000 of one GPU or k whole GPUs; "0.6 GPU" = 60% of a GPU's memory
// and compute time). Used by the scheduling policies, the trace benchmark and the extender.
// Pure value code; each node has a version that changes with every placement, so scores can
// be cached per (node, pod class) and only the changed node rescored.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace tessera::placement::gpushare {

inline constexpr int64_t kGpuMilli = 1000;

struct NodeSpec {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;
  std::string model;  // "" for CPU-only nodes
};

struct PodSpec {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpu = 0;                    // 0 for CPU-only
  int64_t gpu_milli = 0;              // per-GPU share; 1000 for whole and multi-GPU pods
  std::vector<std::string> gpu_spec;  // allowed models; empty = any

  bool sharing() const { return num_gpu == 1 && gpu_milli < kGpuMilli; }
  int64_t gpu_request() const { return num_gpu * gpu_milli; }
  // Everything the filter and the scores see (the name aside): pods with equal keys place alike.
  using RequestKey = std::tuple<int64_t, int64_t, int, int64_t, std::vector<std::string>>;
  RequestKey request_key() const { return {cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec}; }
};

// Whether `count` of the GPUs have at least `milli` free each (one GPU with room for a sharing
// pod; `count` fully free GPUs for whole-GPU pods). Inline: the filter's hot path.
inline bool GpusHaveRoom(const std::vector<int64_t>& gpu_free, int64_t milli, int count) {
  int room = 0;
  for (int64_t g : gpu_free) {
    room += g >= milli ? 1 : 0;
  }
  return room >= count;
}

struct NodeState {
  int64_t cpu_free = 0;
  int64_t memory_free = 0;
  std::vector<int64_t> gpu_free;  // milli per GPU
  int model = -1;                 // index into ClusterState::models(); -1 CPU-only
  uint64_t version = 0;
  // GPU pods placed here by request type ("affinity"): [0] sharing pods, [k] k-whole-GPU pods
  // (k = 1..8); GpuClustering bands nodes by it.
  std::array<int, 9> affinity{};

  int64_t gpu_free_total() const;
};

class ClusterState {
 public:
  explicit ClusterState(const std::vector<NodeSpec>& nodes);

  // Appends a node (all free) and returns its index.
  int AddNode(const NodeSpec& spec);

  int size() const { return static_cast<int>(nodes_.size()); }
  const NodeState& node(int i) const { return nodes_[i]; }
  const std::vector<std::string>& models() const { return models_; }
  int64_t total_gpu_milli() const { return total_gpu_milli_; }
  int64_t used_gpu_milli() const { return used_gpu_milli_; }

  // Kubernetes-style filter: CPU, memory, GPU model, and GPU room (one GPU with free >= d for
  // a sharing pod; k fully free GPUs otherwise).
  bool Fits(int node, const PodSpec& pod) const;
  // Whether GPU model `model` is allowed by `spec` (empty: any).
  bool ModelAllowed(int model, const std::vector<std::string>& spec) const;

  // Places `pod` on `node` using `gpus` (one index for a sharing pod, k for whole GPUs, none
  // for CPU-only). Requires Fits and that the GPUs have room.
  void Assign(int node, const PodSpec& pod, const std::vector<int>& gpus);
  // Undoes Assign(node, pod, gpus) (a pod that left).
  void Release(int node, const PodSpec& pod, const std::vector<int>& gpus);
  // Removes `node`, which must hold nothing (every pod on it released); the nodes after it move
  // down one index.
  void RemoveEmptyNode(int node);

 private:
  std::vector<NodeState> nodes_;
  std::vector<std::string> models_;
  int64_t total_gpu_milli_ = 0;
  int64_t used_gpu_milli_ = 0;
};

// GPU choice "best" (Open-Gpu-Share's default): a sharing pod takes the GPU with the least free
// share that still fits (lowest index on ties); a whole-GPU pod the lowest-index fully free
// GPUs; a CPU-only pod none. Empty when nothing fits.
std::vector<int> BestFitGpus(const NodeState& node, const PodSpec& pod);

}  // namespace tessera::placement::gpushare
