// Tessera's mutating admission webhook for pods (admission.k8s.io/v1 AdmissionReview). A pod that
// asks for a share of a GPU with the planner's annotations (tessera.io/gpu-memory and
// tessera.io/gpu-compute) gets, in each of its containers and init containers, the env that reads
// what the extender's bind writes (extender_protocol.h: NVIDIA_VISIBLE_DEVICES from
// tessera.io/visible-devices, ...), and is sent to the extender's scheduler profile. So a pod needs
// only the two annotations to be placed on a share and to use exactly that share.
//
// Example:
//   absl::StatusOr<std::string> reply = ReviewAdmission(body, {.scheduler_name =
//   "tessera-scheduler"});
//   // reply: {"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":...,
//   //   "allowed":true,"patchType":"JSONPatch","patch":"<base64 JSON Patch>"}}
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "adapters/net/tls_files.h"
#include "adapters/net/tls_handshakes.h"
#include "base/mutex.h"
#include "nlohmann/json.hpp"

namespace tessera::adapters {

class AdmissionMetrics;

struct AdmissionOptions {
  // Set as spec.schedulerName where the pod names none or "default-scheduler"; "" leaves it.
  std::string scheduler_name = "tessera-scheduler";
  // The host directory of the nodes' MPS control daemons (deploy/mps: one per GPU, GPU i's
  // pipes in DIR/pipes/gpu-i, DIR/pipes there only while they run; the shared memory their
  // clients reach them through in DIR/shm). When set, each container of a sharing pod also gets
  // DIR/pipes mounted at DIR/pipes, DIR/shm at /dev/shm (hostPath volumes of type Directory: a
  // node without them does not start the pod until they exist) and
  // CUDA_MPS_PIPE_DIRECTORY=DIR/pipes/gpu-$(NVIDIA_VISIBLE_DEVICES), which the kubelet expands to
  // the daemon of the GPU the extender assigned, so that the MPS limits the env sets are
  // enforced there; and a pod sharing a GPU is marked with the user it runs as
  // (kMpsUserAnnotation, MpsUserOf), so that the extender keeps its GPU to that user's pods.
  // In a pod of one GPU, a container that runs as another user than the main one gets neither
  // the mounts nor the pipe directory (it would wait for the main one's MPS server to end), and
  // a warning says so. "": the env only.
  std::string mps_directory;
  // Where ServeAdmissionWebhook reports what an operator must see (renewed TLS files that do not
  // load), a line at a time, from any thread; none: not reported.
  std::function<void(const std::string& line)> log;
  // Where ServeAdmissionWebhook counts what it answers and its TLS files' renewals; none: not
  // counted. Must outlive the server.
  AdmissionMetrics* metrics = nullptr;
};

// What a review came to: the pod patched, let through unchanged (anything but a sharing pod's
// CREATE or the addition of ephemeral containers to one, or one already patched), or refused (wrong
// share annotations; with an MPS directory, a mount or volume in the daemons' way).
enum class ReviewOutcome { kPatched, kUnchanged, kRefused };

// What a webhook has answered and the certificate it serves, in Prometheus' text format, for
// `--metrics-listen` (docs/scheduler-extender.md lists the metrics). Thread-safe.
class AdmissionMetrics {
 public:
  void CountReview(ReviewOutcome outcome);
  void CountMalformed();  // a body that is not an AdmissionReview request (HTTP 400)
  // Containers of a patched pod left outside MPS (PodMutation::outside_mps).
  void CountOutsideMps(int64_t containers);
  // The TLS files whose expiry and reloads Text() shows (ServeAdmissionWebhook sets them).
  void ShowTls(std::shared_ptr<const TlsFiles> files);
  // Where ServeAdmissionWebhook counts its TLS handshakes (TlsHandshakes::Watch).
  TlsHandshakes& handshakes() { return handshakes_; }

  std::string Text() const;

 private:
  std::atomic<int64_t> patched_{0}, unchanged_{0}, refused_{0}, malformed_{0}, outside_mps_{0};
  TlsHandshakes handshakes_;
  mutable Mutex mu_;
  std::shared_ptr<const TlsFiles> tls_ ABSL_GUARDED_BY(mu_);
};

// The volumes MutatePod adds with AdmissionOptions::mps_directory, by name.
inline constexpr char kMpsVolume[] = "tessera-mps";
inline constexpr char kMpsShmVolume[] = "tessera-mps-shm";

// Whether `dir` can be AdmissionOptions::mps_directory: an absolute path, not "/", without "."
// or ".." components, empty ones ("//") or a trailing "/". The error names what is wrong.
absl::Status CheckMpsDirectory(absl::string_view dir);

// The env a sharing pod's containers get: variable name and the annotation it reads.
const std::vector<std::pair<std::string, std::string>>& ShareEnv();

struct PodMutation {
  nlohmann::json patch = nlohmann::json::array();  // RFC 6902 operations; empty: nothing to do
  std::vector<std::string> warnings;               // shown to the client (kubectl) as warnings
  // With an MPS directory: the containers (init and ephemeral ones too) of another user than the
  // main container that this review leaves outside MPS and gives their env, each as "NAME
  // (USER)". A reinvocation, which finds their env there, lists none (it warns again).
  std::vector<std::string> outside_mps;
};

// What the webhook does to `pod` (the object as the API server sends it at CREATE: it may have
// no name yet). An error (the pod is refused) when its GPU annotations are wrong, with the
// field and what was expected, as the extender would report them at filter.
absl::StatusOr<PodMutation> MutatePod(const nlohmann::json& pod, const AdmissionOptions& options);

// What the webhook does to the ephemeral containers (kubectl debug) that an UPDATE of the
// ephemeralcontainers subresource adds to a running `pod` (those `old_pod`, the pod before the
// update, does not have; the API server refuses any change to the others): the same as to the
// containers of MutatePod, since a debugging image built on CUDA says NVIDIA_VISIBLE_DEVICES=all
// and would see every GPU of the node. With an MPS directory it is made a client only if it runs
// as the main container's user and the pod has the MPS volumes (a pod created without them cannot
// be given volumes afterwards). Nothing else of the pod is changed.
absl::StatusOr<PodMutation> MutateEphemeralContainers(const nlohmann::json& pod,
                                                      const nlohmann::json& old_pod,
                                                      const AdmissionOptions& options);

// Answers one AdmissionReview request body with its AdmissionReview response: a pod's CREATE
// (MutatePod) and the UPDATE of its ephemeralcontainers subresource (MutateEphemeralContainers).
// Pods refused by either are answered allowed: false with the reason; anything else is allowed
// unchanged. Containers left outside MPS are counted in options.metrics and named in a line to
// options.log with their pod (its warnings reach only the client that created the pod, most
// often a ReplicaSet controller). InvalidArgument (HTTP 400) when the body is not an
// admission.k8s.io/v1 AdmissionReview request. `outcome`, when given, is set for each review
// answered.
absl::StatusOr<std::string> ReviewAdmission(absl::string_view body, const AdmissionOptions& options,
                                            ReviewOutcome* outcome = nullptr);

// Serves POST /mutate (ReviewAdmission) and GET /healthz over HTTPS on host:port (port 0: any
// free one, stored in *bound_port) until *stop. The certificate chain and key are read from
// their files at every TLS handshake, so a renewed certificate (a Secret volume updated by
// cert-manager) is served from the next connection on; files that no longer load are reported
// (options.log, once per change) and the last pair that loaded is served meanwhile. Fails at
// start if they do not load. With options.metrics, every answer, change of the files and TLS
// handshake is counted there.
absl::Status ServeAdmissionWebhook(const std::string& host, int port, const std::string& cert_file,
                                   const std::string& key_file, const AdmissionOptions& options,
                                   const std::atomic<bool>* stop, std::atomic<int>* bound_port);

}  // namespace tessera::adapters
