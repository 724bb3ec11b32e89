#include "adapters/k8s/admission.h"

#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "adapters/io/files.h"
#include "adapters/io/test_scratch_dir.h"
#include "adapters/k8s/extender_protocol.h"
#include "adapters/net/test_certs.h"
#include "adapters/net/tls_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

json Review() {
  absl::StatusOr<std::string> text =
      ReadFile(std::string(TESSERA_SOURCE_DIR) + "/tests/data/extender/admission-review-pod.json");
  EXPECT_TRUE(text.ok()) << text.status();
  return json::parse(*text);
}

json Respond(const json& review, const AdmissionOptions& options = {}) {
  absl::StatusOr<std::string> reply = ReviewAdmission(review.dump(), options);
  EXPECT_TRUE(reply.ok()) << reply.status();
  json r = json::parse(*reply);
  EXPECT_EQ(r["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(r["kind"], "AdmissionReview");
  EXPECT_EQ(r["response"]["uid"], review["request"]["uid"]);
  return r["response"];
}

json PatchOf(const json& response) {
  EXPECT_EQ(response["patchType"], "JSONPatch");
  std::string decoded;
  EXPECT_TRUE(absl::Base64Unescape(response["patch"].get<std::string>(), &decoded));
  return json::parse(decoded);
}

json EnvRef(const std::string& name, const std::string& annotation) {
  return {
      {"name", name},
      {"valueFrom",
       {{"fieldRef",
         {{"apiVersion", "v1"}, {"fieldPath", "metadata.annotations['" + annotation + "']"}}}}}};
}

// A pod a ReplicaSet creates (no name or UID yet), with the two share annotations, two
// containers (one with env already) and the default scheduler, as the API server sends it.
TEST(Admission, SharingPodGetsTheEnvTheBindAnnotationsFillAndTheExtendersScheduler) {
  json review = Review();
  json response = Respond(review);
  EXPECT_EQ(response["allowed"], true);
  EXPECT_FALSE(response.contains("warnings"));
  json patch = PatchOf(response);
  // Applied as the API server applies it (RFC 6902).
  json pod = review["request"]["object"].patch(patch);
  EXPECT_EQ(pod["spec"]["schedulerName"], "tessera-scheduler");
  const json want =
      json::array({EnvRef("NVIDIA_VISIBLE_DEVICES", kVisibleDevicesAnnotation),
                   EnvRef("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", kMpsMemLimitAnnotation),
                   EnvRef("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", kMpsThreadPercentageAnnotation),
                   EnvRef("TESSERA_GPU_MEMORY_FRACTION", kGpuMemoryFractionAnnotation)});
  EXPECT_EQ(pod["spec"]["containers"][0]["env"], want);
  // The container with env keeps its own, first.
  json second = json::array({{{"name", "LISTEN"}, {"value", "9100"}}});
  for (const json& e : want) second.push_back(e);
  EXPECT_EQ(pod["spec"]["containers"][1]["env"], second);
  // Each annotation the env reads is one the extender's bind writes.
  const auto written = AssignmentAnnotations(
      {.node = "n", .gpus = {0}, .milli_per_gpu = 214, .user = ""}, int64_t{1} << 30);
  for (const auto& [var, annotation] : ShareEnv()) {
    EXPECT_TRUE(written.contains(annotation)) << var << " reads " << annotation;
  }
  // Called again on its own result (reinvocation), it changes and warns nothing.
  absl::StatusOr<PodMutation> again = MutatePod(pod, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->patch, json::array());
  EXPECT_TRUE(again->warnings.empty());
}

TEST(Admission, LeavesPodsThatShareNoGpuAndWarnsWhereItLeavesTheUsersChoice) {
  json review = Review();
  json& pod = review["request"]["object"];
  // No annotations: nothing.
  json plain = review;
  plain["request"]["object"]["metadata"].erase("annotations");
  json r = Respond(plain);
  EXPECT_EQ(r["allowed"], true);
  EXPECT_FALSE(r.contains("patch"));
  // Whole GPUs from the device plugin (nvidia.com/gpu, no annotations): its env, not ours.
  plain["request"]["object"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 2;
  r = Respond(plain);
  EXPECT_FALSE(r.contains("patch"));
  // Empty share annotations are no ask (as the extender reads them): still the device plugin's.
  plain["request"]["object"]["metadata"]["annotations"] = {{"tessera.io/gpu-memory", ""},
                                                           {"tessera.io/gpu-compute", ""}};
  EXPECT_FALSE(Respond(plain).contains("patch"));
  // What is wrong with a pod that asks no share is not the webhook's to refuse.
  plain["request"]["object"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] =
      "two";
  EXPECT_EQ(Respond(plain)["allowed"], true);

  // A container that sets one of the variables keeps its value, with a warning; another
  // scheduler named by the pod is kept, with a warning.
  pod["spec"]["containers"][1]["env"].push_back(
      {{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}});
  pod["spec"]["schedulerName"] = "my-scheduler";
  r = Respond(review);
  EXPECT_EQ(r["allowed"], true);
  json patched = pod.patch(PatchOf(r));
  EXPECT_EQ(patched["spec"]["schedulerName"], "my-scheduler");
  const json& env = patched["spec"]["containers"][1]["env"];
  EXPECT_EQ(env.size(), 5u);  // LISTEN, its own NVIDIA_VISIBLE_DEVICES, and three of ours
  EXPECT_EQ(env[1], json({{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}}));
  EXPECT_THAT(r["warnings"].dump(),
              HasSubstr("container metrics-proxy sets NVIDIA_VISIBLE_DEVICES"));
  EXPECT_THAT(r["warnings"].dump(), HasSubstr("spec.schedulerName is \\\"my-scheduler\\\""));

  // No scheduler named: set. With scheduler_name "" the webhook leaves it alone.
  pod["spec"].erase("schedulerName");
  EXPECT_EQ(pod.patch(PatchOf(Respond(review)))["spec"]["schedulerName"], "tessera-scheduler");
  EXPECT_FALSE(pod.patch(PatchOf(Respond(
      review,
      {.scheduler_name = "", .mps_directory = "", .log = nullptr, .metrics = nullptr})))["spec"]
                   .contains("schedulerName"));

  // Not a pod's CREATE: allowed unchanged.
  json update = Review();
  update["request"]["operation"] = "UPDATE";
  EXPECT_FALSE(Respond(update).contains("patch"));
  json deployment = Review();
  deployment["request"]["kind"] = {{"group", "apps"}, {"version", "v1"}, {"kind", "Deployment"}};
  EXPECT_FALSE(Respond(deployment).contains("patch"));
}

TEST(Admission, RefusesPodsWithWrongAnnotationsAndAnswers400ToWhatIsNotAReview) {
  json review = Review();
  review["request"]["object"]["metadata"]["annotations"]["tessera.io/gpu-memory"] = "30Gx";
  json r = Respond(review);
  EXPECT_EQ(r["allowed"], false);
  EXPECT_EQ(r["status"]["code"], 400);
  EXPECT_THAT(r["status"]["message"].get<std::string>(),
              HasSubstr("pod.metadata.annotations[\"tessera.io/gpu-memory\"]"));
  EXPECT_FALSE(r.contains("patch"));
  review["request"]["object"]["metadata"]["annotations"].erase("tessera.io/gpu-memory");
  EXPECT_THAT(Respond(review)["status"]["message"].get<std::string>(), HasSubstr("set both"));

  EXPECT_THAT(ReviewAdmission("{", {}).status().message(), HasSubstr("AdmissionReview"));
  json v1beta1 = Review();
  v1beta1["apiVersion"] = "admission.k8s.io/v1beta1";
  EXPECT_THAT(ReviewAdmission(v1beta1.dump(), {}).status().message(),
              HasSubstr("expected apiVersion admission.k8s.io/v1"));
  json no_uid = Review();
  no_uid["request"].erase("uid");
  EXPECT_EQ(ReviewAdmission(no_uid.dump(), {}).status().message(),
            "AdmissionReview.request.uid: required string missing");
  json no_object = Review();
  no_object["request"]["object"] = nullptr;
  EXPECT_EQ(ReviewAdmission(no_object.dump(), {}).status().message(),
            "AdmissionReview.request.object: required object missing");
  // Shapes a real API server never sends (it decodes the pod first), but anyone who reaches the
  // port can: answered, not thrown.
  json odd = Review();
  odd["request"]["object"]["spec"]["containers"][1]["env"] =
      json::array({{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"valueFrom", {{"fieldRef", "x"}}}},
                   {{"name", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"},
                    {"valueFrom", {{"fieldRef", {{"fieldPath", 7}}}}}},
                   {{"name", 5}},
                   "loose"});
  json odd_response = Respond(odd);
  EXPECT_EQ(odd_response["allowed"], true);
  EXPECT_THAT(odd_response["warnings"].dump(), HasSubstr("sets CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"));
  json bad_env = Review();
  bad_env["request"]["object"]["spec"]["containers"][1]["env"] = "LISTEN=9100";
  EXPECT_THAT(Respond(bad_env)["status"]["message"].get<std::string>(),
              HasSubstr("pod.spec.containers[1].env: expected an array"));
}

// The options of a webhook run with --mps-directory=/run/tessera/mps.
AdmissionOptions WithMps() {
  AdmissionOptions options;
  options.mps_directory = "/run/tessera/mps";
  return options;
}

// Review()'s pod with every container running as one user (root, as the vLLM image does), so
// that all of them are MPS clients.
json ReviewAsOneUser() {
  json review = Review();
  review["request"]["object"]["spec"]["securityContext"]["runAsUser"] = 0;
  return review;
}

// With --mps-directory, a sharing pod's containers also reach the MPS daemon of the GPU they are
// assigned: the daemons' pipes mounted, their shared memory at /dev/shm (hostPath volumes of
// type Directory: a node without them does not start the pod), and the pipe directory of GPU
// $(NVIDIA_VISIBLE_DEVICES), which the kubelet expands from the variable before it.
TEST(Admission, WithAnMpsDirectorySharingPodsReachTheDaemonsPipesAndSharedMemory) {
  const AdmissionOptions mps = WithMps();
  json review = ReviewAsOneUser();
  json response = Respond(review, mps);
  EXPECT_EQ(response["allowed"], true);
  EXPECT_FALSE(response.contains("warnings"));
  json pod = review["request"]["object"].patch(PatchOf(response));
  const json dir_volume = {
      {"name", "tessera-mps"},
      {"hostPath", {{"path", "/run/tessera/mps/pipes"}, {"type", "Directory"}}}};
  const json shm_volume = {{"name", "tessera-mps-shm"},
                           {"hostPath", {{"path", "/run/tessera/mps/shm"}, {"type", "Directory"}}}};
  // The pod's own volume stays first.
  ASSERT_EQ(pod["spec"]["volumes"].size(), 3u);
  EXPECT_EQ(pod["spec"]["volumes"][0]["name"], "kube-api-access-x7k2p");
  EXPECT_EQ(pod["spec"]["volumes"][1], dir_volume);
  EXPECT_EQ(pod["spec"]["volumes"][2], shm_volume);
  const json mounts =
      json::array({{{"name", "tessera-mps"}, {"mountPath", "/run/tessera/mps/pipes"}},
                   {{"name", "tessera-mps-shm"}, {"mountPath", "/dev/shm"}}});
  // The first container had a mount (the service account token): ours are appended. The second
  // had none: the list is made.
  const json& first = pod["spec"]["containers"][0];
  ASSERT_EQ(first["volumeMounts"].size(), 3u);
  EXPECT_EQ(first["volumeMounts"][1], mounts[0]);
  EXPECT_EQ(first["volumeMounts"][2], mounts[1]);
  EXPECT_EQ(pod["spec"]["containers"][1]["volumeMounts"], mounts);
  const json pipe_env = {{"name", "CUDA_MPS_PIPE_DIRECTORY"},
                         {"value", "/run/tessera/mps/pipes/gpu-$(NVIDIA_VISIBLE_DEVICES)"}};
  for (const json& c : pod["spec"]["containers"]) {
    EXPECT_EQ(c["env"].back(), pipe_env) << c["name"];
    EXPECT_EQ(c["env"].size(), c["name"] == "vllm" ? 5u : 6u) << c["name"];
    // Defined before it, so that the kubelet expands it.
    EXPECT_EQ(c["env"][c["env"].size() - 5]["name"], "NVIDIA_VISIBLE_DEVICES") << c["name"];
  }
  // Reinvocation changes and warns nothing.
  absl::StatusOr<PodMutation> again = MutatePod(pod, mps);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->patch, json::array());
  EXPECT_TRUE(again->warnings.empty());
  // Without the option, neither volumes nor mounts (the first test checks the env).
  json plain = review["request"]["object"].patch(PatchOf(Respond(review)));
  EXPECT_EQ(plain["spec"]["volumes"].size(), 1u);
  EXPECT_FALSE(plain["spec"]["containers"][1].contains("volumeMounts"));
  // A pod with no volumes at all gets the list made.
  json bare = ReviewAsOneUser();
  bare["request"]["object"]["spec"].erase("volumes");
  bare["request"]["object"]["spec"]["containers"][0].erase("volumeMounts");
  json bare_pod = bare["request"]["object"].patch(PatchOf(Respond(bare, mps)));
  EXPECT_EQ(bare_pod["spec"]["volumes"], json::array({dir_volume, shm_volume}));
  EXPECT_EQ(bare_pod["spec"]["containers"][0]["volumeMounts"], mounts);
  // A pod that asks no share is left alone.
  json other = Review();
  other["request"]["object"]["metadata"].erase("annotations");
  EXPECT_FALSE(Respond(other, mps).contains("patch"));
}

// With MPS, a sharing pod is marked with the user it runs as (MpsUserOf), which the extender
// reads as "an MPS client: one user per GPU". A value someone else wrote is corrected; pods of
// whole GPUs, and any pod without MPS, are not marked.
TEST(Admission, WithAnMpsDirectorySharingPodsAreMarkedWithTheirUser) {
  const AdmissionOptions mps = WithMps();
  json review = Review();
  json pod = review["request"]["object"].patch(PatchOf(Respond(review, mps)));
  EXPECT_EQ(pod["metadata"]["annotations"][kMpsUserAnnotation], "image:vllm/vllm-openai:latest");
  json as_user = Review();
  as_user["request"]["object"]["spec"]["securityContext"]["runAsUser"] = 1000;
  as_user["request"]["object"]["metadata"]["annotations"][kMpsUserAnnotation] = "0";
  json corrected = as_user["request"]["object"].patch(PatchOf(Respond(as_user, mps)));
  EXPECT_EQ(corrected["metadata"]["annotations"][kMpsUserAnnotation], "1000");
  absl::StatusOr<PodMutation> again = MutatePod(corrected, mps);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->patch, json::array());
  // A runAsUser that is no user ID is refused with its field.
  json bad = Review();
  bad["request"]["object"]["spec"]["containers"][0]["securityContext"]["runAsUser"] = -1;
  json refused = Respond(bad, mps);
  EXPECT_EQ(refused["allowed"], false);
  EXPECT_THAT(refused["status"]["message"].get<std::string>(),
              HasSubstr("pod.spec.containers[0].securityContext.runAsUser: expected a user ID"));
  json whole = Review();
  whole["request"]["object"]["metadata"]["annotations"]["tessera.io/gpu-compute"] = "1";
  json whole_pod = whole["request"]["object"].patch(PatchOf(Respond(whole, mps)));
  EXPECT_FALSE(whole_pod["metadata"]["annotations"].contains(kMpsUserAnnotation));
  json plain = review["request"]["object"].patch(PatchOf(Respond(review)));
  EXPECT_FALSE(plain["metadata"]["annotations"].contains(kMpsUserAnnotation));
}

TEST(Admission, WithAnMpsDirectoryRefusesPodsWhoseMountsOrVolumesWouldHideTheDaemon) {
  const AdmissionOptions mps = WithMps();
  // vLLM manifests often mount an emptyDir of medium Memory at /dev/shm: MPS clients need the
  // daemon's shared memory there instead, so the pod is refused with what to change.
  json shm = Review();
  json& spec = shm["request"]["object"]["spec"];
  spec["volumes"].push_back({{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}}}});
  spec["containers"][0]["volumeMounts"].push_back({{"name", "dshm"}, {"mountPath", "/dev/shm"}});
  json r = Respond(shm, mps);
  EXPECT_EQ(r["allowed"], false);
  EXPECT_EQ(r["status"]["code"], 400);
  EXPECT_THAT(r["status"]["message"].get<std::string>(),
              HasSubstr("pod.spec.containers[0].volumeMounts[1]: container vllm mounts \"dshm\" "
                        "at /dev/shm; under MPS the webhook mounts the MPS daemons' shared "
                        "memory there"));
  EXPECT_THAT(r["status"]["message"].get<std::string>(), HasSubstr("remove this mount"));
  // Without MPS the same pod is fine.
  EXPECT_EQ(Respond(shm)["allowed"], true);
  // Something else mounted where the daemons' pipes go: refused too.
  json pipe = ReviewAsOneUser();
  pipe["request"]["object"]["spec"]["containers"][1]["volumeMounts"] =
      json::array({{{"name", "kube-api-access-x7k2p"}, {"mountPath", "/run/tessera/mps/pipes"}}});
  EXPECT_THAT(Respond(pipe, mps)["status"]["message"].get<std::string>(),
              HasSubstr("pod.spec.containers[1].volumeMounts[0]: container metrics-proxy mounts "
                        "\"kube-api-access-x7k2p\" at /run/tessera/mps/pipes; under MPS the "
                        "webhook mounts the MPS daemons' pipes there"));
  // A volume of the pod's own under one of the webhook's names: refused, not merged.
  json named = Review();
  named["request"]["object"]["spec"]["volumes"].push_back(
      {{"name", "tessera-mps-shm"}, {"emptyDir", json::object()}});
  EXPECT_THAT(Respond(named, mps)["status"]["message"].get<std::string>(),
              HasSubstr("pod.spec.volumes[1]: the name tessera-mps-shm is the one Tessera's "
                        "webhook gives the MPS daemons' shared memory (hostPath "
                        "/run/tessera/mps/shm): rename this volume"));
  // A container that sets its own pipe directory keeps it, with a warning; the mounts still
  // come.
  json own = ReviewAsOneUser();
  own["request"]["object"]["spec"]["containers"][1]["env"].push_back(
      {{"name", "CUDA_MPS_PIPE_DIRECTORY"}, {"value", "/tmp/nvidia-mps"}});
  json own_response = Respond(own, mps);
  EXPECT_EQ(own_response["allowed"], true);
  EXPECT_THAT(own_response["warnings"].dump(),
              HasSubstr("container metrics-proxy sets CUDA_MPS_PIPE_DIRECTORY itself"));
  json own_pod = own["request"]["object"].patch(PatchOf(own_response));
  EXPECT_EQ(own_pod["spec"]["containers"][1]["volumeMounts"].size(), 2u);
  // Shapes the API server never sends: answered, not thrown.
  json odd = Review();
  odd["request"]["object"]["spec"]["volumes"] = "none";
  EXPECT_THAT(Respond(odd, mps)["status"]["message"].get<std::string>(),
              HasSubstr("pod.spec.volumes: expected an array"));
  json odd_mounts = ReviewAsOneUser();
  odd_mounts["request"]["object"]["spec"]["containers"][1]["volumeMounts"] = 3;
  EXPECT_THAT(Respond(odd_mounts, mps)["status"]["message"].get<std::string>(),
              HasSubstr("pod.spec.containers[1].volumeMounts: expected an array"));
  json loose = ReviewAsOneUser();
  loose["request"]["object"]["spec"]["containers"][1]["volumeMounts"] =
      json::array({"loose", {{"mountPath", 4}}, {{"mountPath", "/dev/shm"}}});
  EXPECT_THAT(Respond(loose, mps)["status"]["message"].get<std::string>(),
              HasSubstr("container metrics-proxy mounts a volume at /dev/shm"));
}

// MPS serves one user per GPU at a time: a container of another user than the main one would
// wait at its first CUDA call until the main one exits. So it gets the share's env (its GPU) but
// not the daemon's pipes, and the client is told.
TEST(Admission, WithAnMpsDirectoryContainersOfAnotherUserAreNotMadeClients) {
  const AdmissionOptions mps = WithMps();
  const std::string pipe_env = "CUDA_MPS_PIPE_DIRECTORY";
  auto names = [](const json& env) {
    std::vector<std::string> out;
    for (const json& e : env) out.push_back(e["name"].get<std::string>());
    return out;
  };
  // Review()'s sidecar is nginx:1.27 with no runAsUser: another image, so maybe another user.
  json review = Review();
  json response = Respond(review, mps);
  EXPECT_EQ(response["allowed"], true);
  EXPECT_THAT(response["warnings"].dump(),
              HasSubstr("container metrics-proxy runs as image:nginx:1.27, not as the main "
                        "container vllm (image:vllm/vllm-openai:latest): it is not given the MPS "
                        "daemon's pipes"));
  json pod = review["request"]["object"].patch(PatchOf(response));
  const json& vllm = pod["spec"]["containers"][0];
  const json& sidecar = pod["spec"]["containers"][1];
  EXPECT_EQ(vllm["env"].back()["name"], pipe_env);
  EXPECT_EQ(vllm["volumeMounts"].size(), 3u);
  EXPECT_THAT(
      names(sidecar["env"]),
      ::testing::ElementsAre("LISTEN", "NVIDIA_VISIBLE_DEVICES", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
                             "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "TESSERA_GPU_MEMORY_FRACTION"));
  EXPECT_FALSE(sidecar.contains("volumeMounts"));
  // Counted and named in the log with its pod, since a ReplicaSet's pods' warnings reach only
  // the controller.
  AdmissionMetrics metrics;
  std::vector<std::string> lines;
  AdmissionOptions observed = mps;
  observed.metrics = &metrics;
  observed.log = [&](const std::string& line) { lines.push_back(line); };
  Respond(review, observed);
  EXPECT_THAT(metrics.Text(), HasSubstr("\ntessera_webhook_mps_outside_containers_total 1\n"));
  EXPECT_THAT(lines, ::testing::ElementsAre(
                         "pod inference/chat-small-7d9f8b6c5-*: metrics-proxy (image:nginx:1.27) "
                         "runs as another user than the main container and is left outside MPS: "
                         "CUDA there is not held to the share"));
  Respond(ReviewAsOneUser(), observed);
  EXPECT_EQ(lines.size(), 1u);
  // Reinvocation changes nothing, warns again, and counts and logs nothing again.
  absl::StatusOr<PodMutation> again = MutatePod(pod, mps);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->patch, json::array());
  EXPECT_EQ(again->warnings.size(), 1u);
  EXPECT_TRUE(again->outside_mps.empty());
  // The API server calls it again because a sidecar injector ran after it (istio-proxy, 1337):
  // only the container it added is counted and logged.
  json injected = review;
  injected["request"]["object"] = pod;
  injected["request"]["object"]["spec"]["containers"].push_back(
      {{"name", "istio-proxy"},
       {"image", "docker.io/istio/proxyv2:1.24.0"},
       {"securityContext", {{"runAsUser", 1337}}}});
  json reinvoked = Respond(injected, observed);
  EXPECT_EQ(PatchOf(reinvoked).size(), 1u);
  EXPECT_THAT(metrics.Text(), HasSubstr("\ntessera_webhook_mps_outside_containers_total 2\n"));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1],
            "pod inference/chat-small-7d9f8b6c5-*: istio-proxy (1337) runs as another user than "
            "the main container and is left outside MPS: CUDA there is not held to the share");
  // Not a client, so its own /dev/shm is in nobody's way.
  json shm = Review();
  json& shm_spec = shm["request"]["object"]["spec"];
  shm_spec["volumes"].push_back({{"name", "cache"}, {"emptyDir", {{"medium", "Memory"}}}});
  shm_spec["containers"][1]["volumeMounts"] =
      json::array({{{"name", "cache"}, {"mountPath", "/dev/shm"}}});
  EXPECT_EQ(Respond(shm, mps)["allowed"], true);
  // A runAsUser of its own (istio-proxy's 1337) against the pod's: the container's wins.
  json istio = ReviewAsOneUser();
  istio["request"]["object"]["spec"]["containers"][1]["securityContext"]["runAsUser"] = 1337;
  EXPECT_THAT(Respond(istio, mps)["warnings"].dump(),
              HasSubstr("container metrics-proxy runs as 1337, not as the main container vllm "
                        "(0)"));
  // The main container is the one kubectl.kubernetes.io/default-container names.
  json named = Review();
  named["request"]["object"]["metadata"]["annotations"][kDefaultContainerAnnotation] =
      "metrics-proxy";
  json named_response = Respond(named, mps);
  EXPECT_THAT(named_response["warnings"].dump(),
              HasSubstr("container vllm runs as image:vllm/vllm-openai:latest, not as the main "
                        "container metrics-proxy (image:nginx:1.27)"));
  json named_pod = named["request"]["object"].patch(PatchOf(named_response));
  EXPECT_EQ(named_pod["spec"]["containers"][0]["volumeMounts"].size(), 1u);
  EXPECT_EQ(named_pod["spec"]["containers"][1]["env"].back()["name"], pipe_env);
  EXPECT_EQ(named_pod["metadata"]["annotations"][kMpsUserAnnotation], "image:nginx:1.27");
  // A whole GPU is reached through its daemon too: the same rule.
  json whole = Review();
  whole["request"]["object"]["metadata"]["annotations"]["tessera.io/gpu-compute"] = "1";
  EXPECT_THAT(Respond(whole, mps)["warnings"].dump(), HasSubstr("container metrics-proxy runs as"));
  // Several GPUs are reached through no daemon: nothing to wait for, nothing said.
  json two = Review();
  two["request"]["object"]["metadata"]["annotations"]["tessera.io/gpu-compute"] = "2";
  json two_response = Respond(two, mps);
  EXPECT_FALSE(two_response.contains("warnings"));
  json two_pod = two["request"]["object"].patch(PatchOf(two_response));
  EXPECT_EQ(two_pod["spec"]["containers"][1]["env"].back()["name"], pipe_env);
  // Without MPS there is no daemon to wait for either.
  EXPECT_FALSE(Respond(review).contains("warnings"));
  // A sidecar's runAsUser that is no user ID is refused with its field.
  json bad = Review();
  bad["request"]["object"]["spec"]["containers"][1]["securityContext"]["runAsUser"] = "root";
  EXPECT_THAT(Respond(bad, mps)["status"]["message"].get<std::string>(),
              HasSubstr("pod.spec.containers[1].securityContext.runAsUser: expected a user ID"));
}

// Init containers (sidecars with restartPolicy Always among them) get the share's env too: a
// CUDA image's NVIDIA_VISIBLE_DEVICES=all would otherwise show them every GPU of the node. Under
// MPS they follow the containers' rule.
TEST(Admission, InitContainersGetTheShareToo) {
  json review = ReviewAsOneUser();
  json& spec = review["request"]["object"]["spec"];
  spec["initContainers"] = json::array(
      {{{"name", "build-engine"}, {"image", "nvcr.io/nvidia/tensorrt:24.05-py3"}},
       {{"name", "log-shipper"},
        {"image", "fluent/fluent-bit:3.0"},
        {"restartPolicy", "Always"},
        {"securityContext", {{"runAsUser", 65534}}},
        {"env", json::array({{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "none"}}})}}});
  json plain = review["request"]["object"].patch(PatchOf(Respond(review)));
  const json& init = plain["spec"]["initContainers"];
  ASSERT_EQ(init[0]["env"].size(), 4u);
  EXPECT_EQ(init[0]["env"][0], EnvRef("NVIDIA_VISIBLE_DEVICES", kVisibleDevicesAnnotation));
  // One that sets a variable itself keeps it, with a warning naming it as an init container.
  EXPECT_EQ(init[1]["env"][0]["value"], "none");
  EXPECT_EQ(init[1]["env"].size(), 4u);
  EXPECT_THAT(Respond(review)["warnings"].dump(),
              HasSubstr("init container log-shipper sets NVIDIA_VISIBLE_DEVICES itself"));
  // Under MPS: the one of the pod's user is a client, the other is not, and is named.
  json response = Respond(review, WithMps());
  EXPECT_THAT(response["warnings"].dump(),
              HasSubstr("init container log-shipper runs as 65534, not as the main container "
                        "vllm (0)"));
  json pod = review["request"]["object"].patch(PatchOf(response));
  const json& mps_init = pod["spec"]["initContainers"];
  EXPECT_EQ(mps_init[0]["env"].back()["name"], "CUDA_MPS_PIPE_DIRECTORY");
  EXPECT_EQ(mps_init[0]["volumeMounts"].size(), 2u);
  EXPECT_NE(mps_init[1]["env"].back()["name"], "CUDA_MPS_PIPE_DIRECTORY");
  EXPECT_FALSE(mps_init[1].contains("volumeMounts"));
  absl::StatusOr<PodMutation> again = MutatePod(pod, WithMps());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->patch, json::array());
  // Wrong shapes are named by their own path.
  json odd = ReviewAsOneUser();
  odd["request"]["object"]["spec"]["initContainers"] = json::array({{{"name", "x"}, {"env", 1}}});
  EXPECT_THAT(Respond(odd)["status"]["message"].get<std::string>(),
              HasSubstr("pod.spec.initContainers[0].env: expected an array"));
  odd["request"]["object"]["spec"]["initContainers"] = "x";
  EXPECT_THAT(Respond(odd)["status"]["message"].get<std::string>(),
              HasSubstr("pod.spec.initContainers: expected an array"));
}

// The review the API server sends when `kubectl debug --image=nvidia/cuda:... --target=vllm`
// adds an ephemeral container to a running sharing pod (created through the webhook with MPS):
// an UPDATE of the pod's ephemeralcontainers subresource, the whole pod before and after.
json EphemeralReview() {
  absl::StatusOr<std::string> text = ReadFile(
      std::string(TESSERA_SOURCE_DIR) + "/tests/data/extender/admission-review-ephemeral.json");
  EXPECT_TRUE(text.ok()) << text.status();
  return json::parse(*text);
}

// Sets `path`'s value in the review's pod before and after the update alike.
void SetInBoth(json& review, const json::json_pointer& path, const json& value) {
  review["request"]["object"][path] = value;
  review["request"]["oldObject"][path] = value;
}

// A debugging container added to a running sharing pod gets the share's env too (a CUDA image
// would otherwise see every GPU of the node), and under MPS the containers' rule; the ones the
// pod had, and the rest of the pod, are left alone.
TEST(Admission, EphemeralContainersGetTheShareWhenTheyAreAdded) {
  json review = EphemeralReview();
  const json& before = review["request"]["object"];
  json response = Respond(review);
  EXPECT_EQ(response["allowed"], true);
  const json patch = PatchOf(response);
  ASSERT_EQ(patch.size(), 1u);
  EXPECT_EQ(patch[0]["path"], "/spec/ephemeralContainers/1/env");
  json pod = before.patch(patch);
  EXPECT_EQ(pod["spec"]["ephemeralContainers"][1]["env"][0],
            EnvRef("NVIDIA_VISIBLE_DEVICES", kVisibleDevicesAnnotation));
  EXPECT_EQ(pod["spec"]["ephemeralContainers"][1]["env"].size(), 4u);
  EXPECT_FALSE(pod["spec"]["ephemeralContainers"][0].contains("env"));  // the API server's to keep
  // Reinvocation changes nothing.
  absl::StatusOr<PodMutation> again =
      MutateEphemeralContainers(pod, review["request"]["oldObject"], {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->patch, json::array());

  // Under MPS the debugging image is another user than vllm's: the share's env, no pipes, and the
  // pod named in the log and counted.
  AdmissionMetrics metrics;
  std::vector<std::string> lines;
  AdmissionOptions mps = WithMps();
  mps.metrics = &metrics;
  mps.log = [&](const std::string& line) { lines.push_back(line); };
  json outside = Respond(review, mps);
  EXPECT_THAT(outside["warnings"].dump(),
              HasSubstr("ephemeral container debugger-7xk2q runs as "
                        "image:nvidia/cuda:12.4.1-base-ubuntu22.04, not as the main container vllm "
                        "(image:vllm/vllm-openai:latest)"));
  json outside_pod = before.patch(PatchOf(outside));
  EXPECT_EQ(outside_pod["spec"]["ephemeralContainers"][1]["env"].size(), 4u);
  EXPECT_FALSE(outside_pod["spec"]["ephemeralContainers"][1].contains("volumeMounts"));
  EXPECT_THAT(lines, ::testing::ElementsAre(
                         "pod inference/chat-small-7d9f8b6c5-x2x9w: debugger-7xk2q "
                         "(image:nvidia/cuda:12.4.1-base-ubuntu22.04) runs as another user than "
                         "the main container and is left outside MPS: CUDA there is not held to "
                         "the share"));
  EXPECT_THAT(metrics.Text(), HasSubstr("\ntessera_webhook_mps_outside_containers_total 1\n"));
  json reinvoked = review;
  reinvoked["request"]["object"] = outside_pod;
  EXPECT_FALSE(Respond(reinvoked, mps).contains("patch"));
  EXPECT_EQ(lines.size(), 1u);  // counted and logged once

  // Of the pod's user (root for the whole pod): a client, through the volumes the pod has.
  json same = EphemeralReview();
  SetInBoth(same, "/spec/securityContext/runAsUser"_json_pointer, 0);
  json client = Respond(same, WithMps());
  EXPECT_FALSE(client.contains("warnings"));
  json client_pod = same["request"]["object"].patch(PatchOf(client));
  const json& debugger = client_pod["spec"]["ephemeralContainers"][1];
  EXPECT_EQ(debugger["env"].back(),
            json({{"name", "CUDA_MPS_PIPE_DIRECTORY"},
                  {"value", "/run/tessera/mps/pipes/gpu-$(NVIDIA_VISIBLE_DEVICES)"}}));
  EXPECT_EQ(debugger["volumeMounts"],
            json::parse(R"([{"name": "tessera-mps", "mountPath": "/run/tessera/mps/pipes"},
                            {"name": "tessera-mps-shm", "mountPath": "/dev/shm"}])"));
  EXPECT_EQ(client_pod["spec"]["volumes"], same["request"]["object"]["spec"]["volumes"]);
  // A pod created before the webhook had an MPS directory has no MPS volumes, and an ephemeral
  // container cannot add any: it is left outside MPS, and told why.
  json no_volumes = same;
  SetInBoth(no_volumes, "/spec/volumes"_json_pointer,
            json::array({same["request"]["object"]["spec"]["volumes"][0]}));
  json unmounted = Respond(no_volumes, WithMps());
  EXPECT_THAT(unmounted["warnings"].dump(),
              HasSubstr("ephemeral container debugger-7xk2q is not given the MPS daemon's pipes: "
                        "the pod has no volumes tessera-mps and tessera-mps-shm"));
  const json unmounted_patch = PatchOf(unmounted);
  ASSERT_EQ(unmounted_patch.size(), 1u);
  EXPECT_EQ(unmounted_patch[0]["value"].size(), 4u);

  // Wrong shapes are named by their own path, and a review without the pod before is malformed.
  json odd = EphemeralReview();
  odd["request"]["object"]["spec"]["ephemeralContainers"][1]["env"] = "X=1";
  EXPECT_THAT(Respond(odd)["status"]["message"].get<std::string>(),
              HasSubstr("pod.spec.ephemeralContainers[1].env: expected an array"));
  json no_old = EphemeralReview();
  no_old["request"]["oldObject"] = nullptr;
  absl::StatusOr<std::string> refused = ReviewAdmission(no_old.dump(), {});
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("AdmissionReview.request.oldObject: required object missing"));
  // A pod that shares no GPU, and other updates of a sharing pod, are let through unchanged.
  json unshared = EphemeralReview();
  SetInBoth(unshared, "/metadata/annotations"_json_pointer, json::object());
  EXPECT_FALSE(Respond(unshared).contains("patch"));
  json status = EphemeralReview();
  status["request"]["subResource"] = "status";
  EXPECT_FALSE(Respond(status).contains("patch"));
}

TEST(Admission, MpsDirectoryMustBeAnAbsoluteCleanPath) {
  EXPECT_TRUE(CheckMpsDirectory("/run/tessera/mps").ok());
  EXPECT_TRUE(CheckMpsDirectory("/mps").ok());
  for (const char* bad : {"", "run/tessera/mps", "/", "/run/tessera/mps/", "/run//mps",
                          "/run/./mps", "/run/../mps", "/.."}) {
    absl::Status s = CheckMpsDirectory(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("MPS directory \"", bad, "\": expected")))
        << bad;
  }
}

// The expiry sample the webhook's metrics show while serving the certificate in `pem_file`.
std::string ExpiryLine(const std::string& pem_file) {
  absl::StatusOr<std::string> pem = ReadFile(pem_file);
  EXPECT_TRUE(pem.ok()) << pem.status();
  absl::StatusOr<absl::Time> not_after = CertificateNotAfter(pem.ok() ? *pem : "");
  EXPECT_TRUE(not_after.ok()) << not_after.status();
  return absl::StrCat("tessera_webhook_tls_certificate_expiry_timestamp_seconds ",
                      not_after.ok() ? absl::ToUnixSeconds(*not_after) : 0, "\n");
}

// What each review came to, as ServeAdmissionWebhook counts it for its metrics.
TEST(Admission, SaysWhatEachReviewCameTo) {
  auto outcome_of = [](const json& review) {
    ReviewOutcome outcome = ReviewOutcome::kPatched;
    absl::StatusOr<std::string> reply = ReviewAdmission(review.dump(), {}, &outcome);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return outcome;
  };
  json review = Review();
  EXPECT_EQ(outcome_of(review), ReviewOutcome::kPatched);
  // Patched once, the pod needs nothing more (a reinvocation).
  json patched = review;
  patched["request"]["object"] = review["request"]["object"].patch(PatchOf(Respond(review)));
  EXPECT_EQ(outcome_of(patched), ReviewOutcome::kUnchanged);
  json plain = review;
  plain["request"]["object"]["metadata"].erase("annotations");
  EXPECT_EQ(outcome_of(plain), ReviewOutcome::kUnchanged);
  json wrong = review;
  wrong["request"]["object"]["metadata"]["annotations"]["tessera.io/gpu-memory"] = "30Gx";
  EXPECT_EQ(outcome_of(wrong), ReviewOutcome::kRefused);
  // Not a review: an error, and the outcome untouched.
  ReviewOutcome untouched = ReviewOutcome::kRefused;
  EXPECT_FALSE(ReviewAdmission("{", {}, &untouched).ok());
  EXPECT_EQ(untouched, ReviewOutcome::kRefused);
}

// Two throw-away PKIs, and the files under the test's temporary directory (DIR/tls.crt and
// DIR/tls.key) that a server reads its certificate and key from, as from a Secret volume.
struct RenewalFiles {
  explicit RenewalFiles(const std::string& name)
      : dir(testing::NewScratchDir(name)), cert(dir + "/tls.crt"), key(dir + "/tls.key") {}
  bool ok() const { return first.ok() && second.ok(); }
  std::string error() const { return first.error() + second.error(); }

  testing::TestCerts first, second;
  const std::string dir, cert, key;
};

TEST(Admission, MetricsTextCountsReviewsAndTheCertificatesRenewals) {
  AdmissionMetrics m;
  // Before the server has loaded its certificate: every family declared, no expiry sample.
  std::string text = m.Text();
  EXPECT_THAT(text, HasSubstr("# TYPE tessera_webhook_reviews_total counter\n"));
  EXPECT_THAT(text, HasSubstr("tessera_webhook_reviews_total{outcome=\"patched\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE tessera_webhook_tls_certificate_expiry_timestamp_seconds "
                              "gauge\n"));
  EXPECT_THAT(text, Not(HasSubstr("\ntessera_webhook_tls_certificate_expiry_timestamp_seconds ")));
  EXPECT_THAT(text, HasSubstr("tessera_webhook_tls_reloads_total{outcome=\"refused\"} 0\n"));
  m.CountReview(ReviewOutcome::kPatched);
  m.CountReview(ReviewOutcome::kPatched);
  m.CountReview(ReviewOutcome::kUnchanged);
  m.CountReview(ReviewOutcome::kRefused);
  m.CountMalformed();
  // The files served: renewed once, then two broken renewals, each refused.
  RenewalFiles files_at("webhook-metrics-certs");
  ASSERT_TRUE(files_at.ok()) << files_at.error();
  const testing::TestCerts &first = files_at.first, &second = files_at.second;
  const std::string &cert = files_at.cert, &key = files_at.key;
  auto put = [](const std::string& from, const std::string& to) {
    std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
  };
  put(first.server_cert(), cert);
  put(first.server_key(), key);
  absl::StatusOr<std::unique_ptr<TlsFiles>> files = TlsFiles::Load(cert, key, "");
  ASSERT_TRUE(files.ok()) << files.status();
  std::shared_ptr<TlsFiles> served = std::move(*files);
  m.ShowTls(served);
  put(second.server_cert(), cert);
  put(second.server_key(), key);
  EXPECT_EQ(served->Reload().outcome, TlsFiles::Outcome::kRenewed);
  put(second.server_key(), cert);  // a certificate file that holds a key
  EXPECT_EQ(served->Reload().outcome, TlsFiles::Outcome::kRefused);
  put(first.server_key(), cert);  // another one
  EXPECT_EQ(served->Reload().outcome, TlsFiles::Outcome::kRefused);
  const std::string expiry = ExpiryLine(second.server_cert());
  text = m.Text();
  for (const char* line :
       {"tessera_webhook_reviews_total{outcome=\"patched\"} 2\n",
        "tessera_webhook_reviews_total{outcome=\"unchanged\"} 1\n",
        "tessera_webhook_reviews_total{outcome=\"refused\"} 1\n",
        "tessera_webhook_reviews_total{outcome=\"malformed\"} 1\n", expiry.c_str(),
        "tessera_webhook_tls_reloads_total{outcome=\"renewed\"} 1\n",
        "tessera_webhook_tls_reloads_total{outcome=\"refused\"} 2\n"}) {
    EXPECT_THAT(text, HasSubstr(line));
  }
}

// Over HTTPS, as the API server calls it; the certificate is read at each handshake, so
// replacing the files (cert-manager renewing the Secret) is served from the next connection.
TEST(Admission, ServesOverTlsAndPicksUpARenewedCertificate) {
  RenewalFiles files_at("webhook-certs");
  ASSERT_TRUE(files_at.ok()) << files_at.error();
  const testing::TestCerts &first = files_at.first, &second = files_at.second;
  const std::string &dir = files_at.dir, &cert = files_at.cert, &key = files_at.key;
  auto install = [&](const testing::TestCerts& pki) {
    // As the kubelet updates a Secret volume: new files renamed into place.
    std::filesystem::copy_file(pki.server_cert(), cert + ".new",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(pki.server_key(), key + ".new",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::rename(key + ".new", key);
    std::filesystem::rename(cert + ".new", cert);
  };
  auto install_key = [&](const testing::TestCerts& pki) {
    std::filesystem::copy_file(pki.server_key(), key,
                               std::filesystem::copy_options::overwrite_existing);
  };
  install(first);

  EXPECT_THAT(ServeAdmissionWebhook("127.0.0.1", 0, dir + "/missing.crt", key, {}, nullptr, nullptr)
                  .message(),
              HasSubstr("cannot load a PEM certificate chain and its private key"));
  EXPECT_THAT(
      ServeAdmissionWebhook("127.0.0.1", 0, cert, second.server_key(), {}, nullptr, nullptr)
          .message(),
      HasSubstr("cannot load a PEM certificate chain and its private key: " + second.server_key() +
                ": the private key is not the one of the "
                "certificate in " +
                cert));

  std::atomic<bool> stop{false};
  std::atomic<int> port{0};
  absl::Status served;
  std::mutex log_mu;
  std::vector<std::string> log;
  AdmissionMetrics metrics;
  AdmissionOptions options;
  options.metrics = &metrics;
  options.log = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(log_mu);
    log.push_back(line);
  };
  auto logged = [&] {
    std::lock_guard<std::mutex> lock(log_mu);
    return log;
  };
  std::thread server(
      [&] { served = ServeAdmissionWebhook("127.0.0.1", 0, cert, key, options, &stop, &port); });
  while (port.load() == 0 && served.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto post = [&](const std::string& ca, const std::string& body) {
    httplib::SSLClient c("127.0.0.1", port.load());
    c.set_ca_cert_path(ca.c_str());
    c.enable_server_certificate_verification(true);
    return c.Post("/mutate", body, "application/json");
  };
  httplib::Result r = post(first.ca(), Review().dump());
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["response"]["allowed"], true);
  EXPECT_FALSE(post(second.ca(), Review().dump()));  // not the certificate it serves
  r = post(first.ca(), "not json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("AdmissionReview"));
  EXPECT_THAT(metrics.Text(), HasSubstr("tessera_webhook_reviews_total{outcome=\"patched\"} 1\n"));
  EXPECT_THAT(metrics.Text(),
              HasSubstr("tessera_webhook_reviews_total{outcome=\"malformed\"} 1\n"));
  EXPECT_THAT(metrics.Text(), HasSubstr(ExpiryLine(first.server_cert())));

  install(second);
  EXPECT_FALSE(post(first.ca(), Review().dump()));
  r = post(second.ca(), Review().dump());
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(logged().empty());
  EXPECT_THAT(metrics.Text(), HasSubstr(ExpiryLine(second.server_cert())));
  EXPECT_THAT(metrics.Text(),
              HasSubstr("tessera_webhook_tls_reloads_total{outcome=\"renewed\"} 1\n"));

  // A renewal that does not load (the certificate's file holds a key): the last good pair is
  // still served, and the failure reported once however many connections come.
  std::filesystem::copy_file(second.server_key(), cert,
                             std::filesystem::copy_options::overwrite_existing);
  for (int i = 0; i < 3; ++i) {
    r = post(second.ca(), Review().dump());
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200);
  }
  ASSERT_EQ(logged().size(), 1u);
  EXPECT_THAT(metrics.Text(),
              HasSubstr("tessera_webhook_tls_reloads_total{outcome=\"refused\"} 1\n"));
  EXPECT_THAT(metrics.Text(), HasSubstr(ExpiryLine(second.server_cert())));  // still served
  EXPECT_THAT(logged()[0], HasSubstr("TLS: the files changed but do not load; the certificate "
                                     "served so far stays in use: " +
                                     cert + ": expected a PEM certificate chain"));
  // Mended, as a chain (leaf, then its CA): served, and nothing more reported.
  std::filesystem::remove(cert);
  {
    std::ofstream chain(cert, std::ios::binary);
    chain << std::ifstream(first.server_cert()).rdbuf() << std::ifstream(first.ca()).rdbuf();
  }
  install_key(first);
  r = post(first.ca(), Review().dump());
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(logged().size(), 1u);
  EXPECT_THAT(metrics.Text(), HasSubstr(ExpiryLine(first.server_cert())));
  EXPECT_THAT(metrics.Text(),
              HasSubstr("tessera_webhook_tls_reloads_total{outcome=\"renewed\"} 2\n"));
  EXPECT_THAT(metrics.Text(),
              HasSubstr("tessera_webhook_tls_reloads_total{outcome=\"refused\"} 1\n"));
  EXPECT_THAT(metrics.Text(), HasSubstr("tessera_webhook_reviews_total{outcome=\"patched\"} 6\n"));
  stop.store(true);
  server.join();
  EXPECT_TRUE(served.ok()) << served;
}

}  // namespace
}  // namespace tessera::adapters
