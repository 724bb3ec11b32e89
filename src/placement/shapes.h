// The shapes a workload's replicas may take on a pool: the legal ways (exclusive GPUs, a MIG
// profile, an MPS or time-slicing slot) to give a replica its memory and compute under its
// isolation level. The planner chooses among them; the validator re-checks them.
//
// Example:
//   ShapeChoice c = CandidateShapes(workload, pool, options);
//   if (c.shapes.empty()) report(c.reason);
#pragma once

#include <string>
#include <vector>

#include "model/fleet.h"
#include "placement/plan.h"

namespace tessera::placement {

struct PlannerOptions {
  // Time-slicing may oversubscribe compute by this factor: the compute shares of one
  // time-sliced GPU add up to at most this (1.0: no oversubscription). MPS and MIG never
  // oversubscribe.
  double time_slicing_oversubscription = 1.0;
  // Most replicas one GPU is shared by under MPS or time-slicing (MPS allows 48 clients).
  int max_slots = 48;
  bool allow_mps = true;
  bool allow_time_slicing = true;
  // Spread each workload's replicas over at least two nodes where the pool allows (for
  // availability; it can cost a GPU per small sharing class).
  bool spread_replicas = true;
  // Local-search passes that try each workload in each of its other shapes (0: greedy only).
  int improvement_passes = 2;
};

struct ShapeChoice {
  std::vector<Shape> shapes;  // best first (fewest GPUs per replica, then better isolation)
  std::string reason;         // why there is none, when `shapes` is empty
};

// The shapes `w` may take on `pool`. Memory and compute are per replica; an N-GPU replica
// (compute >= 1000 milli) only takes exclusive N GPUs on one node.
ShapeChoice CandidateShapes(const model::Workload& w, const model::Pool& pool,
                            const PlannerOptions& options);

// The smallest non-media MIG profile of `pool` that gives `memory_bytes` and `compute_milli`,
// or -1.
int SmallestMigProfile(const model::Pool& pool, int64_t memory_bytes, int64_t compute_milli);

// The largest slot count (replicas per GPU) under which a replica with this memory and
// compute fits: memory <= gpu_memory / slots and compute <= cap / slots, at most max_slots.
int MaxSlots(int64_t gpu_memory_bytes, int64_t memory_bytes, int64_t compute_milli,
             double compute_cap, int max_slots);

// Whether `shape` on `pool` holds one replica of `w` (the validator's check of a shape).
bool ShapeFits(const model::Workload& w, const model::Pool& pool, const Shape& shape,
               const PlannerOptions& options, std::string* why);

}  // namespace tessera::placement
