// The scheduler extender end to end: real HTTP on 127.0.0.1 both ways. A fake Kubernetes API
// (cpp-httplib) serves recorded-shape Node and Pod objects (tests/data/extender) and checks every
// request the extender makes: the bearer token, the merge-patch content type and body, the
// Binding object. The extender is driven over HTTP with kube-scheduler's messages.
#include "adapters/k8s/extender_service.h"

#include <httplib.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "adapters/io/files.h"
#include "adapters/io/test_scratch_dir.h"
#include "adapters/k8s/yaml_reader.h"
#include "adapters/net/test_certs.h"
#include "adapters/net/test_http_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/gpushare/tessera_policy.h"

namespace tessera::adapters {
namespace {

using nlohmann::json;
using placement::gpushare::Assignment;
using placement::gpushare::MakeTesseraPolicy;
using placement::gpushare::OnlineNode;
using ::testing::HasSubstr;

json ExtenderFixture(const std::string& name) {
  absl::StatusOr<std::string> text =
      ReadFile(std::string(TESSERA_SOURCE_DIR) + "/tests/data/extender/" + name);
  EXPECT_TRUE(text.ok()) << text.status();
  return json::parse(*text);
}

std::string TempDir() { return testing::NewScratchDir("extender"); }

// A minimal API server: nodes and pods in memory, every extender request checked.
class FakeApi {
 public:
  static constexpr char kToken[] = "test-token-0123456789";

  FakeApi() {
    nodes_ = {ExtenderFixture("node-h100.json"), ExtenderFixture("node-l4.json"),
              ExtenderFixture("node-cpu.json")};
    server_ = std::make_unique<testing::LocalHttpServer>([this](httplib::Server& s) {
      s.Get("/api/v1/nodes", [this](const httplib::Request& req, httplib::Response& res) {
        if (!Authorized(req, res)) return;
        if (req.get_param_value("watch") == "1") return ServeWatch(req, res, &node_events_);
        ServeList(req, res, "NodeList", [this] {
          ++node_list_pages_;
          return nodes_;
        });
      });
      s.Get(R"(/api/v1/nodes/([^/]+))",
            [this](const httplib::Request& req, httplib::Response& res) {
              if (!Authorized(req, res)) return;
              std::lock_guard<std::mutex> l(mu_);
              for (const json& n : nodes_) {
                if (n["metadata"]["name"] == req.matches[1].str()) {
                  res.set_content(n.dump(), "application/json");
                  return;
                }
              }
              NotFound(res, "nodes", req.matches[1].str());
            });
      s.Get("/api/v1/pods", [this](const httplib::Request& req, httplib::Response& res) {
        if (!Authorized(req, res)) return;
        if (req.has_param("fieldSelector")) {  // pending pods are wanted too (nominations)
          Reject(res, "expected every pod, no fieldSelector");
          return;
        }
        if (req.get_param_value("watch") == "1") return ServeWatch(req, res, &events_);
        ServeList(req, res, "PodList", [this] { return PodsLocked(); });
      });
      s.Get("/apis/policy/v1/poddisruptionbudgets",
            [this](const httplib::Request& req, httplib::Response& res) {
              if (!Authorized(req, res)) return;
              bool listed;
              {
                std::lock_guard<std::mutex> l(mu_);
                listed = budgets_.has_value();
              }
              if (!listed) return NotFound(res, "poddisruptionbudgets", "");
              ServeList(req, res, "PodDisruptionBudgetList", [this] { return *budgets_; });
            });
      s.Get(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+))",
            [this](const httplib::Request& req, httplib::Response& res) {
              if (!Authorized(req, res)) return;
              std::lock_guard<std::mutex> l(mu_);
              auto it = pods_.find(req.matches[1].str() + "/" + req.matches[2].str());
              if (it == pods_.end()) return NotFound(res, "pods", req.matches[2].str());
              res.set_content(it->second.dump(), "application/json");
            });
      s.Patch(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+))",
              [this](const httplib::Request& req, httplib::Response& res) {
                if (!Authorized(req, res)) return;
                Patch(req, res);
              });
      s.Patch(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/status)",
              [this](const httplib::Request& req, httplib::Response& res) {
                if (!Authorized(req, res)) return;
                PatchStatus(req, res);
              });
      s.Delete(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+))",
               [this](const httplib::Request& req, httplib::Response& res) {
                 if (!Authorized(req, res)) return;
                 Delete(req, res);
               });
      s.Post(R"(/api/v1/namespaces/([^/]+)/events)",
             [this](const httplib::Request& req, httplib::Response& res) {
               if (!Authorized(req, res)) return;
               json e = json::parse(req.body, nullptr, false);
               if (!e.is_object() || e["kind"] != "Event" || e["apiVersion"] != "v1" ||
                   e["metadata"]["namespace"] != req.matches[1].str() ||
                   e["involvedObject"]["namespace"] != req.matches[1].str()) {
                 return Reject(res, "unexpected event " + req.body);
               }
               std::lock_guard<std::mutex> l(mu_);
               events_posted_.push_back(e);
               res.status = 201;
               res.set_content(e.dump(), "application/json");
             });
      s.Post(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding)",
             [this](const httplib::Request& req, httplib::Response& res) {
               if (!Authorized(req, res)) return;
               Bind(req, res);
             });
    });
  }
  ~FakeApi() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
    }
    changed_.notify_all();
    server_.reset();  // open watches see stopping_ and end
  }

  void AddPod(json pod) {
    std::lock_guard<std::mutex> l(mu_);
    std::string key = pod["metadata"]["namespace"].get<std::string>() + "/" +
                      pod["metadata"]["name"].get<std::string>();
    Changed(key, &pod);
  }
  // A node leaves, comes or changes: a new resourceVersion and the event a node watch sees.
  void DeleteNode(const std::string& name) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = std::find_if(nodes_.begin(), nodes_.end(),
                           [&](const json& n) { return n["metadata"]["name"] == name; });
    if (it == nodes_.end()) return;
    json gone = *it;
    nodes_.erase(it);
    gone["metadata"]["resourceVersion"] = std::to_string(++version_);
    node_events_.push_back({version_, "DELETED", gone});
    changed_.notify_all();
  }
  void PutNode(json node) {
    std::lock_guard<std::mutex> l(mu_);
    node["metadata"]["resourceVersion"] = std::to_string(++version_);
    auto it = std::find_if(nodes_.begin(), nodes_.end(), [&](const json& n) {
      return n["metadata"]["name"] == node["metadata"]["name"];
    });
    node_events_.push_back({version_, it == nodes_.end() ? "ADDED" : "MODIFIED", node});
    if (it == nodes_.end()) {
      nodes_.push_back(node);
    } else {
      *it = node;
    }
    changed_.notify_all();
  }
  void DeletePod(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    Changed(key, nullptr);
  }
  void SetPhase(const std::string& key, const std::string& phase) {
    std::lock_guard<std::mutex> l(mu_);
    json pod = pods_.at(key);
    pod["status"]["phase"] = phase;
    Changed(key, &pod);
  }
  // A BOOKMARK for watchers: nothing changed up to the current version.
  void Bookmark() {
    std::lock_guard<std::mutex> l(mu_);
    json mark = {{"kind", "Pod"},
                 {"apiVersion", "v1"},
                 {"metadata", {{"resourceVersion", std::to_string(++version_)}}}};
    events_.push_back({version_, "BOOKMARK", mark});
    changed_.notify_all();
  }
  // An event that is not what the API server sends, as the next in the stream.
  void OddEvent(const json& object) {
    std::lock_guard<std::mutex> l(mu_);
    events_.push_back({++version_, "UPDATED", object});
    changed_.notify_all();
  }
  // Changes outside the watched selection, then a compaction up to them: open watches end, and
  // one resuming from any earlier version gets 410 (a new list's version is fine).
  void Compact() {
    std::lock_guard<std::mutex> l(mu_);
    compacted_ = ++version_;
    ++watch_epoch_;
    changed_.notify_all();
  }
  // Every request answers 503 from now on.
  void GoUnavailable() { unavailable_ = true; }
  // Watches end at once, with no event (as through a proxy that does not stream).
  void EndWatchesAtOnce() { end_watches_ = true; }
  int node_list_pages() {
    std::lock_guard<std::mutex> l(mu_);
    return node_list_pages_;
  }
  int watches() {  // of the pods
    std::lock_guard<std::mutex> l(mu_);
    return watches_.at(&events_);
  }
  int node_watches() {
    std::lock_guard<std::mutex> l(mu_);
    return watches_.at(&node_events_);
  }
  json Pod(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    return pods_.at(key);
  }
  std::vector<json> Pods() {
    std::lock_guard<std::mutex> l(mu_);
    return PodsLocked();
  }
  std::vector<std::string> Problems() {
    std::lock_guard<std::mutex> l(mu_);
    return problems_;
  }
  // The PodDisruptionBudgets listed from now on (none set: the list answers 404).
  void SetBudgets(std::vector<json> budgets) {
    std::lock_guard<std::mutex> l(mu_);
    budgets_ = std::move(budgets);
  }
  // Called as each binding arrives, before it is applied (set before the extender binds).
  void BeforeBinding(std::function<void()> f) {
    std::lock_guard<std::mutex> l(mu_);
    before_binding_ = std::move(f);
  }
  void FailBindingOf(const std::string& name) {
    std::lock_guard<std::mutex> l(mu_);
    fail_binding_.insert(name);
  }
  int patches() {
    std::lock_guard<std::mutex> l(mu_);
    return patches_;
  }
  int nominations_cleared() {
    std::lock_guard<std::mutex> l(mu_);
    return nominations_cleared_;
  }
  int deletes() {
    std::lock_guard<std::mutex> l(mu_);
    return deletes_;
  }
  std::vector<json> events_posted() {
    std::lock_guard<std::mutex> l(mu_);
    return events_posted_;
  }
  // Deletions answer 403, as without RBAC for them.
  void ForbidDeletes(bool forbid) {
    std::lock_guard<std::mutex> l(mu_);
    forbid_deletes_ = forbid;
  }
  // Lists answer at most `n` objects a page (the API server may return fewer than the limit).
  void CapPagesAt(size_t n) {
    std::lock_guard<std::mutex> l(mu_);
    page_cap_ = n;
  }
  // The next list call that carries a continue token gets 410 Gone (the snapshot was compacted).
  void ExpireNextContinue() {
    std::lock_guard<std::mutex> l(mu_);
    expire_next_continue_ = true;
  }
  int list_pages() {
    std::lock_guard<std::mutex> l(mu_);
    return list_pages_;
  }

  // A kubeconfig pointing at this server with a bearer token.
  std::string WriteKubeconfig(const std::string& dir) {
    std::string path = dir + "/kubeconfig";
    std::ofstream(path) << "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
                        << "clusters:\n- name: local\n  cluster:\n    server: http://127.0.0.1:"
                        << server_->port() << "/\n"
                        << "contexts:\n- name: test\n  context: {cluster: local, user: sched}\n"
                        << "users:\n- name: sched\n  user:\n    token: " << kToken << "\n";
    return path;
  }

 private:
  bool Authorized(const httplib::Request& req, httplib::Response& res) {
    if (unavailable_) {
      res.status = 503;
      res.set_content(
          R"({"kind":"Status","status":"Failure","message":"etcdserver: leader changed","code":503})",
          "application/json");
      return false;
    }
    if (req.get_header_value("Authorization") != std::string("Bearer ") + kToken) {
      res.status = 401;
      res.set_content(R"({"kind":"Status","status":"Failure","message":"Unauthorized","code":401})",
                      "application/json");
      std::lock_guard<std::mutex> l(mu_);
      problems_.push_back("request without the bearer token: " + req.path);
      return false;
    }
    return true;
  }
  // A list as the API server chunks it: `limit` objects at most, metadata.continue naming where
  // the next page starts ("" on the last), 410 Gone for a token that expired.
  std::vector<json> PodsLocked() {
    std::vector<json> out;
    for (const auto& [k, p] : pods_) out.push_back(p);
    return out;
  }
  // `items_now` is called with mu_ held, so the objects and the list's resourceVersion agree.
  void ServeList(const httplib::Request& req, httplib::Response& res, const std::string& kind,
                 const std::function<std::vector<json>()>& items_now) {
    size_t limit = 0;
    if (!absl::SimpleAtoi(req.get_param_value("limit"), &limit) || limit == 0) {
      return Reject(res, "a list without a positive limit: " + req.path);
    }
    std::string token = req.get_param_value("continue");
    size_t start = 0;
    std::lock_guard<std::mutex> l(mu_);
    const std::vector<json> items = items_now();
    if (!token.empty()) {
      if (expire_next_continue_) {
        expire_next_continue_ = false;
        res.status = 410;
        res.set_content(json{{"kind", "Status"},
                             {"status", "Failure"},
                             {"reason", "Expired"},
                             {"message", "The provided continue parameter is too old"},
                             {"code", 410}}
                            .dump(),
                        "application/json");
        return;
      }
      if (!absl::StartsWith(token, "next:") || !absl::SimpleAtoi(token.substr(5), &start) ||
          start >= items.size()) {
        res.status = 400;
        problems_.push_back("bad continue token " + token);
        return;
      }
    }
    ++list_pages_;
    size_t end = std::min(items.size(), start + std::min(limit, page_cap_));
    json page = json::array();
    for (size_t i = start; i < end; ++i) page.push_back(items[i]);
    json meta = {{"resourceVersion", std::to_string(version_)}};
    if (end < items.size()) meta["continue"] = absl::StrCat("next:", end);
    res.set_content(
        json{{"apiVersion", "v1"}, {"kind", kind}, {"metadata", meta}, {"items", page}}.dump(),
        "application/json");
  }
  // A pod changes (mu_ held; `after` null: deleted): a new resourceVersion, and the event a
  // watch of every pod sees: ADDED for a new pod, DELETED for one removed, MODIFIED otherwise.
  void Changed(const std::string& key, json* after) {
    auto it = pods_.find(key);
    json before = it == pods_.end() ? json() : it->second;
    const bool was = it != pods_.end(), is = after != nullptr;
    std::string rv = std::to_string(++version_);
    if (after != nullptr) {
      (*after)["metadata"]["resourceVersion"] = rv;
      pods_[key] = *after;
    } else if (it != pods_.end()) {
      before["metadata"]["resourceVersion"] = rv;
      pods_.erase(it);
    }
    if (was || is) {
      const char* type = !was ? "ADDED" : !is ? "DELETED" : "MODIFIED";
      events_.push_back({version_, type, is ? *after : before});
      changed_.notify_all();
    }
  }
  // A watch of `events` (the pods' or the nodes'): every event after `resourceVersion`, one JSON
  // line each, then new ones as they come, until timeoutSeconds; an ERROR event with code 410
  // for a compacted version.
  using Events = std::vector<std::tuple<int64_t, std::string, json>>;
  void ServeWatch(const httplib::Request& req, httplib::Response& res, const Events* events) {
    int64_t from = 0, timeout = 0;
    if (!absl::SimpleAtoi(req.get_param_value("resourceVersion"), &from) ||
        !absl::SimpleAtoi(req.get_param_value("timeoutSeconds"), &timeout) || timeout <= 0 ||
        req.get_param_value("allowWatchBookmarks") != "true") {
      return Reject(res,
                    "a watch without resourceVersion, timeoutSeconds or bookmarks: " + req.path);
    }
    int epoch = 0;
    {
      std::lock_guard<std::mutex> l(mu_);
      ++watches_[events];
      epoch = watch_epoch_;
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
    res.set_chunked_content_provider(
        "application/json",
        [this, from, deadline, epoch, events](size_t, httplib::DataSink& sink) mutable {
          std::unique_lock<std::mutex> l(mu_);
          std::string out;
          bool end = epoch != watch_epoch_ || end_watches_;
          if (from < compacted_) {
            out = json{{"type", "ERROR"},
                       {"object",
                        {{"kind", "Status"},
                         {"apiVersion", "v1"},
                         {"status", "Failure"},
                         {"message", "too old resource version: " + std::to_string(from)},
                         {"reason", "Expired"},
                         {"code", 410}}}}
                      .dump() +
                  "\n";
            end = true;
          }
          for (const auto& [version, type, object] : *events) {
            if (end || version <= from) continue;
            out += json{{"type", type}, {"object", object}}.dump() + "\n";
            from = version;
          }
          if (out.empty()) {
            end = end || stopping_ || std::chrono::steady_clock::now() >= deadline;
            if (!end) changed_.wait_for(l, std::chrono::milliseconds(20));
          }
          l.unlock();
          if (!out.empty() && !sink.write(out.data(), out.size())) return false;
          if (end) sink.done();
          return true;
        });
  }
  void Reject(httplib::Response& res, const std::string& why) {
    res.status = 400;
    res.set_content(json{{"kind", "Status"}, {"status", "Failure"}, {"message", why}}.dump(),
                    "application/json");
    std::lock_guard<std::mutex> l(mu_);
    problems_.push_back(why);
  }
  static void NotFound(httplib::Response& res, const std::string& kind, const std::string& name) {
    res.status = 404;
    res.set_content(json{{"kind", "Status"},
                         {"status", "Failure"},
                         {"reason", "NotFound"},
                         {"message", kind + " \"" + name + "\" not found"},
                         {"code", 404}}
                        .dump(),
                    "application/json");
  }
  void Patch(const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Content-Type") != "application/merge-patch+json") {
      return Reject(res, "patch content type " + req.get_header_value("Content-Type"));
    }
    json patch = json::parse(req.body, nullptr, false);
    if (!patch.is_object() || !patch["metadata"].is_object() ||
        !patch["metadata"]["annotations"].is_object() ||
        !patch["metadata"]["annotations"][kGpuAssignmentAnnotation].is_string() ||
        patch["metadata"].size() != 2 || patch.size() != 1) {
      return Reject(res, "unexpected patch " + req.body);
    }
    std::lock_guard<std::mutex> l(mu_);
    auto it = pods_.find(req.matches[1].str() + "/" + req.matches[2].str());
    if (it == pods_.end()) return NotFound(res, "pods", req.matches[2].str());
    if (patch["metadata"]["uid"] != it->second["metadata"]["uid"]) {
      res.status = 409;
      res.set_content(R"({"kind":"Status","message":"Precondition failed: UID in precondition"})",
                      "application/json");
      return;
    }
    json pod = it->second;
    for (const auto& [key, value] : patch["metadata"]["annotations"].items()) {
      pod["metadata"]["annotations"][key] = value;  // a merge patch of the annotations
    }
    Changed(it->first, &pod);
    ++patches_;
    res.set_content(pod.dump(), "application/json");
  }
  // A 409 for an object whose UID is not the precondition's, as the API server answers.
  static bool UidDiffers(const json& want, const json& pod, httplib::Response& res) {
    if (want == pod["metadata"]["uid"]) return false;
    res.status = 409;
    res.set_content(R"({"kind":"Status","message":"Precondition failed: UID in precondition"})",
                    "application/json");
    return true;
  }
  // The status subresource: a merge patch of status.nominatedNodeName, or a strategic merge
  // patch of status.conditions (merged by type), each with metadata.uid as precondition; or a
  // JSON patch removing status.nominatedNodeName after testing the UID and the node (a failed
  // test: 422, as the API server answers).
  void PatchStatus(const httplib::Request& req, httplib::Response& res) {
    json patch = json::parse(req.body, nullptr, false);
    const std::string type = req.get_header_value("Content-Type");
    if (type == "application/json-patch+json") return ClearNomination(req, patch, res);
    const bool nominate = type == "application/merge-patch+json" && patch.is_object() &&
                          patch.size() == 2 && patch["status"].is_object() &&
                          patch["status"].size() == 1 &&
                          patch["status"]["nominatedNodeName"].is_string();
    const bool condition =
        type == "application/strategic-merge-patch+json" && patch.is_object() &&
        patch.size() == 2 && patch["status"].is_object() && patch["status"].size() == 1 &&
        patch["status"]["conditions"].is_array() && patch["status"]["conditions"].size() == 1 &&
        patch["status"]["conditions"][0]["type"].is_string();
    if ((!nominate && !condition) || !patch["metadata"].is_object() ||
        patch["metadata"].size() != 1 || !patch["metadata"]["uid"].is_string()) {
      return Reject(res, "unexpected status patch (" + type + ") " + req.body);
    }
    std::lock_guard<std::mutex> l(mu_);
    auto it = pods_.find(req.matches[1].str() + "/" + req.matches[2].str());
    if (it == pods_.end()) return NotFound(res, "pods", req.matches[2].str());
    if (UidDiffers(patch["metadata"]["uid"], it->second, res)) return;
    json pod = it->second;
    if (nominate) {
      pod["status"]["nominatedNodeName"] = patch["status"]["nominatedNodeName"];
    } else {
      json& conditions = pod["status"]["conditions"];
      if (!conditions.is_array()) conditions = json::array();
      const json& c = patch["status"]["conditions"][0];
      auto same = std::find_if(conditions.begin(), conditions.end(),
                               [&](const json& x) { return x["type"] == c["type"]; });
      if (same == conditions.end()) {
        conditions.push_back(c);
      } else {
        *same = c;
      }
    }
    Changed(it->first, &pod);
    res.set_content(pod.dump(), "application/json");
  }
  void ClearNomination(const httplib::Request& req, const json& patch, httplib::Response& res) {
    const json expected_ops = {"test", "test", "remove"};
    const json expected_paths = {"/metadata/uid", "/status/nominatedNodeName",
                                 "/status/nominatedNodeName"};
    json ops = json::array(), paths = json::array();
    for (const json& op : patch.is_array() ? patch : json::array()) {
      ops.push_back(op.value("op", ""));
      paths.push_back(op.value("path", ""));
    }
    if (ops != expected_ops || paths != expected_paths) {
      return Reject(res, "unexpected JSON patch " + req.body);
    }
    std::lock_guard<std::mutex> l(mu_);
    auto it = pods_.find(req.matches[1].str() + "/" + req.matches[2].str());
    if (it == pods_.end()) return NotFound(res, "pods", req.matches[2].str());
    json pod;
    try {
      pod = it->second.patch(patch);
    } catch (const json::exception& e) {
      res.status = 422;
      res.set_content(json{{"kind", "Status"},
                           {"status", "Failure"},
                           {"reason", "Invalid"},
                           {"message", std::string("the server rejected our request: ") + e.what()},
                           {"code", 422}}
                          .dump(),
                      "application/json");
      return;
    }
    ++nominations_cleared_;
    Changed(it->first, &pod);
    res.set_content(pod.dump(), "application/json");
  }
  // A graceful deletion: the pod stays, with deletionTimestamp, until DeletePod (its kubelet).
  void Delete(const httplib::Request& req, httplib::Response& res) {
    json options = json::parse(req.body, nullptr, false);
    if (!options.is_object() || options["kind"] != "DeleteOptions" ||
        !options["preconditions"]["uid"].is_string()) {
      return Reject(res, "unexpected delete options " + req.body);
    }
    std::lock_guard<std::mutex> l(mu_);
    if (forbid_deletes_) {
      res.status = 403;
      res.set_content(json{{"kind", "Status"},
                           {"status", "Failure"},
                           {"reason", "Forbidden"},
                           {"message", "pods \"" + req.matches[2].str() +
                                           "\" is forbidden: User \"system:serviceaccount:"
                                           "tessera-system:tessera-scheduler\" cannot delete "
                                           "resource \"pods\" in API group \"\""},
                           {"code", 403}}
                          .dump(),
                      "application/json");
      return;
    }
    auto it = pods_.find(req.matches[1].str() + "/" + req.matches[2].str());
    if (it == pods_.end()) return NotFound(res, "pods", req.matches[2].str());
    if (UidDiffers(options["preconditions"]["uid"], it->second, res)) return;
    json pod = it->second;
    if (!pod["metadata"].contains("deletionTimestamp")) {
      pod["metadata"]["deletionTimestamp"] = "2026-12-01T10:41:09Z";
      pod["metadata"]["deletionGracePeriodSeconds"] = 30;
      Changed(it->first, &pod);
    }
    ++deletes_;
    res.set_content(pod.dump(), "application/json");
  }
  void Bind(const httplib::Request& req, httplib::Response& res) {
    json b = json::parse(req.body, nullptr, false);
    std::string ns = req.matches[1].str(), name = req.matches[2].str();
    if (!b.is_object() || b["apiVersion"] != "v1" || b["kind"] != "Binding" ||
        b["metadata"]["name"] != name || b["metadata"]["namespace"] != ns ||
        b["target"]["kind"] != "Node" || !b["target"]["name"].is_string() ||
        req.get_header_value("Content-Type") != "application/json") {
      return Reject(res, "unexpected binding " + req.body);
    }
    std::function<void()> before_binding;
    {
      std::lock_guard<std::mutex> l(mu_);
      before_binding = before_binding_;
    }
    if (before_binding) before_binding();
    std::lock_guard<std::mutex> l(mu_);
    if (fail_binding_.contains(name)) {
      res.status = 409;
      res.set_content(R"({"kind":"Status","message":"pod is already assigned to node x"})",
                      "application/json");
      return;
    }
    auto it = pods_.find(ns + "/" + name);
    if (it == pods_.end()) return NotFound(res, "pods", name);
    json pod = it->second;
    pod["spec"]["nodeName"] = b["target"]["name"];
    pod["status"]["phase"] = "Running";
    Changed(it->first, &pod);
    res.status = 201;
    res.set_content(R"({"kind":"Status","status":"Success","code":201})", "application/json");
  }

  std::mutex mu_;
  std::vector<json> nodes_;
  std::map<std::string, json> pods_;
  std::vector<std::string> problems_;
  std::set<std::string> fail_binding_;
  std::optional<std::vector<json>> budgets_;
  std::function<void()> before_binding_;
  int patches_ = 0;
  int deletes_ = 0;
  bool forbid_deletes_ = false;
  std::vector<json> events_posted_;
  int nominations_cleared_ = 0;
  size_t page_cap_ = 1000;
  bool expire_next_continue_ = false;
  int list_pages_ = 0;
  int64_t version_ = 100;  // the last resourceVersion given out
  int64_t compacted_ = 0;  // watches from before it get 410
  int watch_epoch_ = 0;    // a Compact ends the watches of earlier epochs
  int node_list_pages_ = 0;
  std::unique_ptr<testing::LocalHttpServer> server_;  // last: started once the state is in place
  std::atomic<bool> unavailable_{false};
  std::atomic<bool> end_watches_{false};
  Events events_;       // of every pod, in order
  Events node_events_;  // of every node, in order
  std::condition_variable changed_;
  bool stopping_ = false;
  std::map<const Events*, int> watches_ = {{&events_, 0}, {&node_events_, 0}};
};

// The extender, served over HTTP on a free port.
class Served {
 public:
  explicit Served(const std::string& kubeconfig) {
    absl::StatusOr<KubeConfig> cfg = LoadKubeconfig(kubeconfig);
    EXPECT_TRUE(cfg.ok()) << cfg.status();
    svc =
        std::make_unique<ExtenderService>(MakeTesseraPolicy(), std::make_unique<KubeClient>(*cfg));
    thread_ =
        std::thread([this] { status_ = ServeExtender(*svc, "127.0.0.1", 0, &stop_, &port_); });
    while (port_.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ~Served() {
    stop_ = true;
    thread_.join();
    EXPECT_TRUE(status_.ok()) << status_;
  }
  httplib::Result Post(const std::string& verb, const std::string& body) {
    httplib::Client c("127.0.0.1", port_.load());
    return c.Post(("/" + verb).c_str(), body, "application/json");
  }
  httplib::Result Get(const std::string& path) {
    httplib::Client c("127.0.0.1", port_.load());
    return c.Get(path.c_str());
  }
  std::unique_ptr<ExtenderService> svc;

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> port_{0};
  absl::Status status_;
  std::thread thread_;
};

// Polls `done` every 10 ms, 5 s at most; its last answer.
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 500 && !done(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// A metric of the extender's /metrics (-1 if absent).
int64_t Metric(const Served& s, const std::string& name) {
  std::string m = s.svc->Metrics().body;
  size_t at = m.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::atoll(m.c_str() + at + name.size() + 2);
}

json ArgsWithNodes(const json& pod, const std::vector<std::string>& node_files) {
  json items = json::array();
  for (const std::string& f : node_files) items.push_back(ExtenderFixture(f));
  return {{"pod", pod},
          {"nodes", {{"metadata", json::object()}, {"items", items}}},
          {"nodenames", nullptr}};
}

std::string SharePodUid(int i) {
  return "00000000-0000-4000-8000-" + std::to_string(100000000000 + i);
}

json SharePod(int i, const std::string& memory, const std::string& compute) {
  json p = ExtenderFixture("pod-share.json");
  p["metadata"]["name"] = "chat-" + std::to_string(i);
  p["metadata"]["uid"] = SharePodUid(i);
  p["metadata"]["annotations"]["tessera.io/gpu-memory"] = memory;
  p["metadata"]["annotations"]["tessera.io/gpu-compute"] = compute;
  return p;
}

TEST(ExtenderProtocol, DecodesRecordedNodesAndPods) {
  absl::StatusOr<OnlineNode> h100 = DecodeNode(ExtenderFixture("node-h100.json"));
  ASSERT_TRUE(h100.ok()) << h100.status();
  EXPECT_EQ(h100->model, "H100-80GB");
  EXPECT_EQ(h100->gpus, 8);
  EXPECT_EQ(h100->gpu_memory_bytes, int64_t{81559} << 20);
  absl::StatusOr<OnlineNode> cpu = DecodeNode(ExtenderFixture("node-cpu.json"));
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->gpus, 0);
  // A model outside the catalog: shared by the memory GFD reports, under its product name; one
  // such node made the whole node list fail (the extender could not start). Without the memory
  // label it is not shared, as a node without GFD labels.
  json a40 = ExtenderFixture("node-l4.json");
  a40["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-A40";
  a40["metadata"]["labels"]["nvidia.com/gpu.memory"] = "46068";
  absl::StatusOr<OnlineNode> other = DecodeNode(a40);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->model, "NVIDIA-A40");
  EXPECT_EQ(other->gpus, 2);
  EXPECT_EQ(other->gpu_memory_bytes, int64_t{46068} << 20);
  a40["metadata"]["labels"].erase("nvidia.com/gpu.memory");
  other = DecodeNode(a40);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->model, "");
  absl::StatusOr<std::vector<OnlineNode>> list = DecodeNodeListJson(
      json{{"items", {ExtenderFixture("node-h100.json"), a40, ExtenderFixture("node-l4.json")}}}
          .dump());
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->size(), 3u);

  absl::StatusOr<PodInfo> share = DecodePod(ExtenderFixture("pod-share.json"));
  ASSERT_TRUE(share.ok()) << share.status();
  EXPECT_EQ(share->ns, "inference");
  EXPECT_EQ(share->request.num_gpu, 1);
  EXPECT_EQ(share->request.memory_bytes, int64_t{18} << 30);
  EXPECT_EQ(share->request.compute_milli, 200);
  EXPECT_FALSE(share->active());
  absl::StatusOr<PodInfo> whole = DecodePod(ExtenderFixture("pod-whole.json"));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->request.num_gpu, 2);  // nvidia.com/gpu limits, sidecar adds none
  EXPECT_TRUE(whole->request.whole());

  json bad = ExtenderFixture("pod-share.json");
  bad["metadata"]["annotations"]["tessera.io/gpu-memory"] = "18Gx";
  absl::StatusOr<PodInfo> e = DecodePod(bad);
  ASSERT_TRUE(e.ok());  // the object is well-formed; its GPU ask is not
  EXPECT_THAT(e->request_error, HasSubstr("pod.metadata.annotations[\"tessera.io/gpu-memory\"]"));
  EXPECT_EQ(e->request.num_gpu, 0);
  bad["metadata"]["annotations"].erase("tessera.io/gpu-memory");
  EXPECT_THAT(DecodePod(bad)->request_error, HasSubstr("set both"));

  Assignment a{.node = "gpu-h100-1", .gpus = {5}, .milli_per_gpu = 400, .user = ""};
  EXPECT_EQ(EncodeAssignment(a), R"({"gpus":[5],"milliPerGpu":400,"node":"gpu-h100-1"})");
  // 30Gi with compute 0.2 on an H200 (143771 MiB): 214 milli, 30766.99 MiB. These are the values
  // bench/gpu/mps-check ran under MPS on an H200 (docs/scheduler-extender.md).
  placement::gpushare::OnlineCluster cluster(MakeTesseraPolicy());
  absl::StatusOr<int64_t> h200_share = cluster.ShareOn({.num_gpu = 1,
                                                        .memory_bytes = int64_t{30} << 30,
                                                        .compute_milli = 200,
                                                        .models = {},
                                                        .user = ""},
                                                       {.name = "gpu-h200-1",
                                                        .gpus = 8,
                                                        .model = "H200-141GB",
                                                        .gpu_memory_bytes = int64_t{143771} << 20});
  ASSERT_TRUE(h200_share.ok()) << h200_share.status();
  Assignment h200{.node = "gpu-h200-1", .gpus = {5}, .milli_per_gpu = *h200_share, .user = ""};
  EXPECT_EQ(AssignmentAnnotations(h200, int64_t{143771} << 20),
            (std::map<std::string, std::string>{{kGpuAssignmentAnnotation, EncodeAssignment(h200)},
                                                {kVisibleDevicesAnnotation, "5"},
                                                {kMpsMemLimitAnnotation, "0=30766M"},
                                                {kMpsThreadPercentageAnnotation, "22"},
                                                {kGpuMemoryFractionAnnotation, "0.214"}}));
  // Whole GPUs: each visible ordinal gets the whole memory, and every thread.
  std::map<std::string, std::string> two = AssignmentAnnotations(
      {.node = "gpu-h100-1", .gpus = {2, 6}, .milli_per_gpu = 1000, .user = ""},
      int64_t{81559} << 20);
  EXPECT_EQ(two[kVisibleDevicesAnnotation], "2,6");
  EXPECT_EQ(two[kMpsMemLimitAnnotation], "0=81559M,1=81559M");
  EXPECT_EQ(two[kMpsThreadPercentageAnnotation], "100");
  EXPECT_EQ(two[kGpuMemoryFractionAnnotation], "1.000");
  // The smallest share still gets a thread; an unknown memory size writes no limit at all
  // rather than a wrong one.
  std::map<std::string, std::string> tiny =
      AssignmentAnnotations({.node = "n", .gpus = {0}, .milli_per_gpu = 1, .user = ""}, 0);
  EXPECT_EQ(tiny[kMpsThreadPercentageAnnotation], "1");
  EXPECT_FALSE(tiny.contains(kMpsMemLimitAnnotation));
  EXPECT_EQ(*DecodeAssignment(EncodeAssignment(a)), a);
  EXPECT_FALSE(DecodeAssignment(R"({"node":"x","gpus":[-1],"milliPerGpu":1})").ok());
  EXPECT_FALSE(DecodeAssignment("not json").ok());
  // Anyone who can edit a pod can write this annotation, and the extender reads every pod's on
  // start. A value nested 100,000 deep (200 KB, under Kubernetes' 256 KB for annotations) was
  // quoted whole in the error, and quoting it overflowed the stack.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  absl::StatusOr<Assignment> d =
      DecodeAssignment(absl::StrCat(R"({"node":"x","milliPerGpu":1,"gpus":[)", deep, "]}"));
  EXPECT_EQ(d.status().message(), "tessera.io/gpu-assignment: JSON nested deeper than 100 levels");
  // Shallower values are quoted by kind and size, not whole.
  EXPECT_THAT(DecodeAssignment(R"({"node":"x","milliPerGpu":1,"gpus":[[1,2]]})").status().message(),
              HasSubstr("expected GPU indices 0-63, found an array of 2 elements"));
}

// kube-scheduler's effective request: max(app containers + sidecars, each regular init container
// + the sidecars before it); a sidecar is an init container with restartPolicy Always.
// Watch events as the API server streams them, one JSON object a line.
// deploy/shared-gpu-example's container reads the bind annotations through the Downward API.
// Each it reads must be one bind writes, under the env variable it is meant for; a misspelt key
// would read as "" in the pod (NVIDIA_VISIBLE_DEVICES="" mounts no GPU) with no error anywhere.
TEST(ExtenderProtocol, SharedGpuExampleReadsTheAnnotationsBindWrites) {
  const std::string file =
      std::string(TESSERA_SOURCE_DIR) + "/deploy/shared-gpu-example/deployment.yaml";
  absl::StatusOr<std::string> text = ReadFile(file);
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<std::vector<YAML::Node>> docs = ParseYamlDocuments(file, *text);
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 1u);
  const std::map<std::string, std::string> written = AssignmentAnnotations(
      {.node = "n", .gpus = {0}, .milli_per_gpu = 214, .user = ""}, int64_t{1} << 30);
  std::map<std::string, std::string> read;  // env name -> annotation
  for (const YAML::Node& c : (*docs)[0]["spec"]["template"]["spec"]["containers"]) {
    for (const YAML::Node& e : c["env"]) {
      if (!e["valueFrom"]) continue;
      const std::string path = e["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>();
      const std::string prefix = "metadata.annotations['";
      ASSERT_TRUE(absl::StartsWith(path, prefix) && absl::EndsWith(path, "']")) << path;
      const std::string key = path.substr(prefix.size(), path.size() - prefix.size() - 2);
      EXPECT_TRUE(written.contains(key)) << key << " is not written by bind";
      read[e["name"].as<std::string>()] = key;
    }
  }
  EXPECT_EQ(read, (std::map<std::string, std::string>{
                      {"NVIDIA_VISIBLE_DEVICES", kVisibleDevicesAnnotation},
                      {"TESSERA_GPU_MEMORY_FRACTION", kGpuMemoryFractionAnnotation},
                      {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", kMpsMemLimitAnnotation},
                      {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", kMpsThreadPercentageAnnotation}}));
  // And the pods go to the scheduler profile that has the extender.
  EXPECT_EQ((*docs)[0]["spec"]["template"]["spec"]["schedulerName"].as<std::string>(),
            "tessera-scheduler");
}

// Under MPS, the user a sharing pod runs as: its main container's runAsUser, else the pod's, else
// its image (whose USER the API does not show); the extender reads it only from pods the webhook
// marked as MPS clients, and a restored assignment carries it.
TEST(ExtenderProtocol, MpsUserComesFromTheMainContainersSecurityContext) {
  json pod = ExtenderFixture("pod-share.json");
  EXPECT_EQ(*MpsUserOf(pod), "image:vllm/vllm-openai:v0.6.3");
  pod["spec"]["securityContext"]["runAsUser"] = 1000;
  EXPECT_EQ(*MpsUserOf(pod), "1000");
  pod["spec"]["containers"][0]["securityContext"]["runAsUser"] = 0;
  EXPECT_EQ(*MpsUserOf(pod), "0");
  // A sidecar listed first: the main container is the one kubectl's annotation names.
  json sidecar = {
      {"name", "metrics"}, {"image", "exporter:1"}, {"securityContext", {{"runAsUser", 65532}}}};
  pod["spec"]["containers"].insert(pod["spec"]["containers"].begin(), sidecar);
  EXPECT_EQ(*MpsUserOf(pod), "65532");
  pod["metadata"]["annotations"][kDefaultContainerAnnotation] = "server";
  EXPECT_EQ(*MpsUserOf(pod), "0");
  pod["spec"]["containers"][1]["securityContext"]["runAsUser"] = "root";
  absl::StatusOr<std::string> bad = MpsUserOf(pod);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "pod.spec.containers[1].securityContext.runAsUser: expected a user ID (an integer "
            ">= 0), found \"root\"");
  EXPECT_THAT(
      std::string(MpsUserOf(json{{"spec", {{"containers", json::array()}}}}).status().message()),
      HasSubstr("pod.spec.containers: expected a non-empty array"));

  // Only a pod the webhook marked is held to one user per GPU; the marker's value is not read.
  json share = ExtenderFixture("pod-share.json");
  absl::StatusOr<PodInfo> plain = DecodePod(share);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->request.user, "");
  share["metadata"]["annotations"][kMpsUserAnnotation] = "edited";
  share["metadata"]["annotations"][kGpuAssignmentAnnotation] =
      EncodeAssignment({.node = "gpu-h100-1", .gpus = {2}, .milli_per_gpu = 226, .user = ""});
  absl::StatusOr<PodInfo> marked = DecodePod(share);
  ASSERT_TRUE(marked.ok()) << marked.status();
  EXPECT_EQ(marked->request.user, "image:vllm/vllm-openai:v0.6.3");
  ASSERT_TRUE(marked->assignment.has_value());
  EXPECT_EQ(marked->assignment->user, "image:vllm/vllm-openai:v0.6.3");
  // In a user namespace of its own (hostUsers: false) the pod runs as host user IDs no other pod
  // has, whatever its runAsUser: the user is the pod's own, so two such pods never share a GPU
  // under MPS, nor does one with a pod of the same runAsUser outside a user namespace.
  json userns = share;
  userns["spec"]["securityContext"]["runAsUser"] = 0;
  userns["spec"]["hostUsers"] = false;
  absl::StatusOr<PodInfo> own = DecodePod(userns);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->request.user, "userns:1f2e3d4c-5b6a-4789-8a7b-6c5d4e3f2a10:0");
  userns["metadata"]["uid"] = "0c1d2e3f-4a5b-4c6d-8e7f-901a2b3c4d5e";
  EXPECT_EQ(DecodePod(userns)->request.user, "userns:0c1d2e3f-4a5b-4c6d-8e7f-901a2b3c4d5e:0");
  userns["metadata"].erase("uid");  // at admission
  EXPECT_EQ(*MpsUserOf(userns), "userns:new:0");
  userns["spec"]["hostUsers"] = true;
  EXPECT_EQ(*MpsUserOf(userns), "0");
  userns["spec"]["hostUsers"] = "no";
  EXPECT_EQ(MpsUserOf(userns).status().message(),
            "pod.spec.hostUsers: expected true or false, found \"no\"");
  // Whole GPUs share with no one.
  share["metadata"]["annotations"]["tessera.io/gpu-compute"] = "1";
  share["metadata"]["annotations"][kGpuAssignmentAnnotation] =
      EncodeAssignment({.node = "gpu-h100-1", .gpus = {2}, .milli_per_gpu = 1000, .user = ""});
  absl::StatusOr<PodInfo> whole = DecodePod(share);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->request.user, "");
  EXPECT_EQ(whole->assignment->user, "");
}

TEST(ExtenderProtocol, DecodesPodWatchEvents) {
  json pod = ExtenderFixture("pod-share.json");
  pod["metadata"]["resourceVersion"] = "8812";
  absl::StatusOr<PodEvent> added = DecodePodEvent(json{{"type", "ADDED"}, {"object", pod}}.dump());
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(added->type, "ADDED");
  EXPECT_EQ(added->resource_version, "8812");
  EXPECT_EQ(added->pod.uid, pod["metadata"]["uid"]);
  EXPECT_EQ(added->pod.nominated_node, "");
  EXPECT_FALSE(added->pod.ending);
  // A preemptor waiting on the node it was nominated to; a victim being deleted.
  absl::StatusOr<PodEvent> waiting = DecodePodEvent(
      json{{"type", "MODIFIED"}, {"object", ExtenderFixture("pod-nominated.json")}}.dump());
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(waiting->pod.nominated_node, "gpu-h100-1");
  EXPECT_EQ(waiting->pod.priority, 1000);
  EXPECT_EQ(waiting->pod.request.compute_milli, 200);
  pod["metadata"]["deletionTimestamp"] = "2026-12-01T10:41:09Z";
  absl::StatusOr<PodEvent> ending =
      DecodePodEvent(json{{"type", "MODIFIED"}, {"object", pod}}.dump());
  ASSERT_TRUE(ending.ok()) << ending.status();
  EXPECT_TRUE(ending->pod.ending);
  pod["status"]["nominatedNodeName"] = 3;
  absl::StatusOr<PodEvent> bad = DecodePodEvent(json{{"type", "MODIFIED"}, {"object", pod}}.dump());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("event.object.status.nominatedNodeName: expected a string"));
  absl::StatusOr<PodEvent> mark = DecodePodEvent(
      R"({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"9000","annotations":{"k8s.io/initial-events-end":"true"}}}})");
  ASSERT_TRUE(mark.ok()) << mark.status();
  EXPECT_EQ(mark->resource_version, "9000");
  absl::StatusOr<PodEvent> gone = DecodePodEvent(
      R"js({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (8812)","reason":"Expired","code":410}})js");
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_EQ(gone->error_code, 410);
  EXPECT_EQ(gone->error_message, "too old resource version: 1 (8812)");
  for (const auto& [line, error] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type":"UPDATED","object":{}})",
            "event.type: expected ADDED, MODIFIED, DELETED, BOOKMARK or ERROR, found \"UPDATED\""},
           {R"({"type":"ADDED"})", "event.object: required object missing"},
           {R"({"type":"DELETED","object":{"metadata":{}}})",
            "event.object.metadata.resourceVersion: required string missing"},
           {R"({"type":"ADDED","object":[]})", "event.object: expected an object, found array"},
           {R"({"type":"ADDED")", "watch event"}}) {
    absl::StatusOr<PodEvent> e = DecodePodEvent(line);
    ASSERT_FALSE(e.ok()) << line;
    EXPECT_THAT(e.status().message(), HasSubstr(error)) << line;
  }
}

// A node watch's events as the API server sends them: the node decoded as a list's would be; a
// deleted node by name only (its object may no longer be one the extender shares).
TEST(ExtenderProtocol, DecodesNodeWatchEvents) {
  json node = ExtenderFixture("node-l4.json");
  node["metadata"]["resourceVersion"] = "7100";
  absl::StatusOr<NodeEvent> added =
      DecodeNodeEvent(json{{"type", "ADDED"}, {"object", node}}.dump());
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(added->name, "gpu-l4-1");
  EXPECT_EQ(added->resource_version, "7100");
  absl::StatusOr<OnlineNode> listed = DecodeNode(node);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(added->node.name, listed->name);
  EXPECT_EQ(added->node.gpus, 2);
  EXPECT_EQ(added->node.model, listed->model);
  EXPECT_EQ(added->node.gpu_memory_bytes, listed->gpu_memory_bytes);
  node["status"]["allocatable"]["nvidia.com/gpu"] = "two";
  absl::StatusOr<NodeEvent> bad =
      DecodeNodeEvent(json{{"type", "MODIFIED"}, {"object", node}}.dump());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("event.object: expected a GPU count"));
  absl::StatusOr<NodeEvent> deleted =
      DecodeNodeEvent(json{{"type", "DELETED"}, {"object", node}}.dump());
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(deleted->name, "gpu-l4-1");
  absl::StatusOr<NodeEvent> mark = DecodeNodeEvent(
      R"({"type":"BOOKMARK","object":{"kind":"Node","apiVersion":"v1","metadata":{"resourceVersion":"7200"}}})");
  ASSERT_TRUE(mark.ok()) << mark.status();
  EXPECT_EQ(mark->resource_version, "7200");
  EXPECT_EQ(mark->name, "");
  absl::StatusOr<NodeEvent> gone = DecodeNodeEvent(
      R"js({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 7100 (7300)","reason":"Expired","code":410}})js");
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_EQ(gone->error_code, 410);
  for (const auto& [line, error] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type":"DELETED","object":{"metadata":{"resourceVersion":"1"}}})",
            "event.object.metadata.name: required string missing"},
           {R"({"type":"DELETED","object":{"metadata":{"resourceVersion":"1","name":""}}})",
            "event.object.metadata.name: expected a node name"},
           {R"({"type":"UPDATED","object":{}})", "event.type: expected ADDED, MODIFIED"}}) {
    absl::StatusOr<NodeEvent> e = DecodeNodeEvent(line);
    ASSERT_FALSE(e.ok()) << line;
    EXPECT_THAT(e.status().message(), HasSubstr(error)) << line;
  }
}

TEST(ExtenderProtocol, DecodesDisruptionBudgetsAndMatchesTheirSelectors) {
  std::string next, version;
  absl::StatusOr<std::vector<DisruptionBudget>> list =
      DecodeDisruptionBudgetList(ExtenderFixture("pdb-list.json").dump(), &next, &version);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ(version, "1002577");
  const DisruptionBudget& gold = (*list)[0];
  const DisruptionBudget& batch = (*list)[1];
  EXPECT_EQ(gold.ns, "inference");
  EXPECT_EQ(gold.name, "chat-gold");
  EXPECT_EQ(gold.disruptions_allowed, 1);
  EXPECT_EQ(batch.disruptions_allowed, 0);
  EXPECT_EQ(batch.disrupted, std::vector<std::string>{"chat-9"});
  using Labels = std::map<std::string, std::string>;
  EXPECT_TRUE(gold.Covers("inference", "p", Labels{{"app", "chat-small"}, {"tier", "gold"}}));
  EXPECT_FALSE(gold.Covers("inference", "p", Labels{{"app", "chat-small"}}));
  EXPECT_FALSE(gold.Covers("default", "p", Labels{{"app", "chat-small"}, {"tier", "gold"}}));
  EXPECT_TRUE(batch.Covers("inference", "p", Labels{{"tier", "spot"}}));
  EXPECT_FALSE(batch.Covers("inference", "p", Labels{{"tier", "spot"}, {"canary", "1"}}));
  EXPECT_FALSE(batch.Covers("inference", "p", Labels{{"tier", "gold"}}));
  EXPECT_FALSE(batch.Covers("inference", "chat-9", Labels{{"tier", "spot"}}));  // disrupted
  LabelSelector s;
  s.match_expressions = {{.key = "tier", .op = "NotIn", .values = {"gold"}},
                         {.key = "app", .op = "Exists", .values = {}}};
  EXPECT_TRUE(s.Matches(Labels{{"app", "x"}}));
  EXPECT_TRUE(s.Matches(Labels{{"app", "x"}, {"tier", "spot"}}));
  EXPECT_FALSE(s.Matches(Labels{{"app", "x"}, {"tier", "gold"}}));
  EXPECT_FALSE(s.Matches(Labels{{"tier", "spot"}}));
  // A budget without a selector, or with an empty one, covers no pod.
  DisruptionBudget everything = gold;
  everything.selector = LabelSelector();
  EXPECT_FALSE(everything.Covers("inference", "p", Labels{}));
  for (const auto& [mutate, error] :
       std::vector<std::pair<std::function<void(json&)>, std::string>>{
           {[](json& b) { b["spec"]["selector"]["matchExpressions"][0]["operator"] = "Near"; },
            "items[1].spec.selector.matchExpressions[0].operator: expected In, NotIn, Exists or "
            "DoesNotExist, found \"Near\""},
           {[](json& b) { b["status"]["disruptionsAllowed"] = -1; },
            "items[1].status.disruptionsAllowed: expected a 32-bit integer >= 0"},
           {[](json& b) {
              b["spec"]["selector"]["matchLabels"] = {{"tier", 3}};
            },
            "items[1].spec.selector.matchLabels[\"tier\"]: expected a string, found number"},
           {[](json& b) { b["spec"]["selector"]["matchExpressions"] = "tier"; },
            "items[1].spec.selector.matchExpressions: expected an array, found string"}}) {
    json doc = ExtenderFixture("pdb-list.json");
    mutate(doc["items"][1]);
    absl::StatusOr<std::vector<DisruptionBudget>> bad = DecodeDisruptionBudgetList(doc.dump());
    ASSERT_FALSE(bad.ok()) << error;
    EXPECT_THAT(bad.status().message(), HasSubstr(error));
  }
  // Pods' labels, which budgets select by.
  absl::StatusOr<PodInfo> pod = DecodePod(ExtenderFixture("pod-share.json"));
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->labels, (Labels{{"app", "chat-small"}, {"pod-template-hash", "7d9f8b6c5"}}));
  json bad_labels = ExtenderFixture("pod-share.json");
  bad_labels["metadata"]["labels"]["tier"] = true;
  EXPECT_THAT(DecodePod(bad_labels).status().message(),
              HasSubstr("pod.metadata.labels[\"tier\"]: expected a string, found boolean"));
}

TEST(ExtenderProtocol, WholeGpuCountIsThePodsEffectiveRequest) {
  auto gpus = [](const json& init) {
    json p =
        ExtenderFixture("pod-whole.json");  // app containers: 2 GPUs (limits) + a sidecar with none
    p["spec"]["initContainers"] = init;
    absl::StatusOr<PodInfo> pod = DecodePod(p);
    EXPECT_TRUE(pod.ok()) << pod.status();
    EXPECT_EQ(pod->request_error, "");
    return pod->request.num_gpu;
  };
  auto c = [](const std::string& name, int n, bool sidecar = false) {
    json j = {{"name", name}, {"image", "busybox:1.36"}};
    if (n > 0) j["resources"] = {{"limits", {{"nvidia.com/gpu", std::to_string(n)}}}};
    if (sidecar) j["restartPolicy"] = "Always";
    return j;
  };
  EXPECT_EQ(gpus(json::array()), 2);
  EXPECT_EQ(gpus(json::array({c("warm-up", 1)})), 2);      // init runs before the app: max
  EXPECT_EQ(gpus(json::array({c("burn-in", 4)})), 4);      // a larger init phase wins
  EXPECT_EQ(gpus(json::array({c("proxy", 1, true)})), 3);  // a sidecar runs beside the app
  // The init phase: burn-in (3) runs beside the sidecar listed before it (1); the one after it
  // starts later. Running phase: 2 + 1 + 1 = 4; init phase: 1 + 3 = 4, then 1 + 1 = 2.
  EXPECT_EQ(gpus(json::array({c("a", 1, true), c("burn-in", 3), c("b", 1, true)})), 4);
  EXPECT_EQ(gpus(json::array({c("a", 1, true), c("burn-in", 4), c("b", 1, true)})), 5);
  EXPECT_EQ(gpus(json::array({c("burn-in", 4), c("a", 1, true)})), 4);  // sidecar after it

  json p = ExtenderFixture("pod-whole.json");
  p["spec"]["initContainers"] = json::array({c("x", 0)});
  p["spec"]["initContainers"][0]["resources"] = {{"requests", {{"nvidia.com/gpu", "one"}}}};
  EXPECT_THAT(DecodePod(p)->request_error,
              HasSubstr("pod.spec.initContainers[0].resources.requests[\"nvidia.com/gpu\"]: "
                        "expected a whole number of GPUs"));
  p["spec"]["initContainers"][0]["resources"] = {
      {"requests", {{"nvidia.com/gpu", 18446744073709551615ULL}}}};
  EXPECT_THAT(DecodePod(p)->request_error,
              HasSubstr("expected 0 to 64 GPUs, found 18446744073709551615"));
  p["spec"]["initContainers"][0]["resources"] = {{"requests", {{"nvidia.com/gpu", "65"}}}};
  EXPECT_THAT(DecodePod(p)->request_error, HasSubstr("expected 0 to 64 GPUs, found \"65\""));
  p["spec"]["initContainers"] = "none";
  EXPECT_THAT(DecodePod(p)->request_error,
              HasSubstr("pod.spec.initContainers: expected an array, found string"));
}

TEST(ExtenderProtocol, KubeconfigWithCertificatesAndRelativeFiles) {
  std::string dir = TempDir();
  std::ofstream(dir + "/config") << R"(apiVersion: v1
kind: Config
current-context: prod
clusters:
- name: other
  cluster: {server: "https://other:6443"}
- name: prod
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority: pki/ca.crt
contexts:
- name: prod
  context: {cluster: prod, user: admin}
users:
- name: admin
  user:
    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
    client-key: /etc/keys/admin.key
)";
  absl::StatusOr<KubeConfig> c = LoadKubeconfig(dir + "/config");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");
  EXPECT_EQ(c->ca_file, dir + "/pki/ca.crt");
  EXPECT_EQ(c->client_cert_data, "-----BEGIN CERTIFICATE-----\n");
  EXPECT_EQ(c->client_key_file, "/etc/keys/admin.key");
  std::ofstream(dir + "/exec") << "current-context: a\nclusters: [{name: c, cluster: {server: "
                                  "'https://x'}}]\ncontexts: [{name: a, context: {cluster: c, "
                                  "user: u}}]\nusers: [{name: u, user: {exec: {command: aws}}}]\n";
  EXPECT_THAT(std::string(LoadKubeconfig(dir + "/exec").status().message()),
              HasSubstr("users[0].user.exec.apiVersion: required field is missing"));
  std::ofstream(dir + "/nocontext") << "current-context: missing\ncontexts: []\n";
  EXPECT_THAT(LoadKubeconfig(dir + "/nocontext").status().message(), HasSubstr("missing"));
}

TEST(ExtenderProtocol, KubeconfigErrorsNameFileLineAndField) {
  const std::string ok_head =
      "current-context: a\nclusters: [{name: c, cluster: {server: 'https://x'}}]\n";
  struct Case {
    std::string text, want;
  } cases[] = {
      // A list entry that is not a map threw out of yaml-cpp ("operator[] call on a scalar").
      {"current-context: a\ncontexts: [foo]\n",
       "kc:2:12: contexts[0]: expected a map, found a scalar"},
      {"current-context: a\ncontexts: {a: b}\n", "kc:2:11: contexts: expected a list, found a map"},
      {"current-context: a\ncontexts: [{name: a, context: x}]\n",
       "contexts[0].context: expected a map, found a scalar"},
      {"current-context: a\ncontexts: [{name: [a], context: {}}]\n",
       "contexts[0].name: expected a string, found a list"},
      {"current-context: prod\ncontexts:\n- {name: dev, context: {cluster: c}}\n",
       "kc:3:1: contexts: no entry named \"prod\" (current-context); found \"dev\""},
      {"contexts: []\n", "kc:1:1: current-context: required field is missing"},
      {"- a\n", "kc:1:1: document: expected a map, found a list"},
      {"", "kc: empty; expected a kubeconfig"},
      {ok_head + "contexts: [{name: a, context: {cluster: d}}]\n",
       "clusters: no entry named \"d\" (the cluster of context \"a\"); found \"c\""},
      {"current-context: a\nclusters: [{name: c, cluster: {server: [x]}}]\n"
       "contexts: [{name: a, context: {cluster: c}}]\n",
       "kc:2:40: clusters[0].cluster.server: expected a string, found a list"},
      {"current-context: a\nclusters: [{name: c, cluster: {server: 'x:6443'}}]\n"
       "contexts: [{name: a, context: {cluster: c}}]\n",
       "server: expected an https:// (or http://) URL, found \"x:6443\""},
      {"current-context: a\nclusters: [{name: c, cluster: {server: 'https://x', "
       "insecure-skip-tls-verify: maybe}}]\ncontexts: [{name: a, context: {cluster: c}}]\n",
       "insecure-skip-tls-verify: expected true or false, found \"maybe\""},
      {"current-context: a\nclusters: [{name: c, cluster: {server: 'https://x', "
       "certificate-authority-data: '%%%'}}]\ncontexts: [{name: a, context: {cluster: c}}]\n",
       "certificate-authority-data: invalid base64"},
      {"current-context: a\nclusters: [{name: c, cluster: {server: 'https://x', proxy-url: "
       "'p:3128'}}]\ncontexts: [{name: a, context: {cluster: c}}]\n",
       "clusters[0].cluster.proxy-url: expected an http://, https:// or socks5:// URL, found "
       "\"p:3128\""},
      {"current-context: a\nclusters: [{name: c, cluster: {server: 'https://x', "
       "tls-server-name: 'kube/x'}}]\ncontexts: [{name: a, context: {cluster: c}}]\n",
       "kc:2:70: clusters[0].cluster.tls-server-name: expected a DNS name or an IP address, found "
       "\"kube/x\""},
      {"current-context: a\nclusters: [{name: c, cluster: {server: 'https://x', "
       "tls-server-name: '[]'}}]\ncontexts: [{name: a, context: {cluster: c}}]\n",
       "tls-server-name: expected a DNS name or an IP address, found \"[]\""},
      {ok_head + "contexts: [{name: a, context: {cluster: c, user: u}}]\nusers: []\n",
       "users: no entry named \"u\" (the user of context \"a\"); found none"},
      {ok_head + "contexts: [{name: a, context: {cluster: c, user: u}}]\n",
       "users: no entry named \"u\""},
      {ok_head + "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
                 "users: [{name: u, user: {username: admin, password: x}}]\n",
       "users[0].user.username: basic authentication"},
      {ok_head + "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
                 "users: [{name: u, user: {token: t, as: admin}}]\n",
       "users[0].user.as: impersonation"},
      {ok_head + "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
                 "users: [{name: u, user: {client-certificate: u.crt}}]\n",
       "users[0].user: a client certificate without its client-key[-data]"},
      {ok_head + "contexts: [{name: a, context: {cluster: c}}, {name: a, context: {}}]\n",
       "kc:3:53: contexts[1].name: a second entry named \"a\""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<KubeConfig> k = DecodeKubeconfig("kc", c.text);
    ASSERT_FALSE(k.ok()) << c.text;
    EXPECT_THAT(k.status().message(), HasSubstr(c.want)) << c.text;
  }
  // kubectl's precedence: token over tokenFile, *-data over the file beside it; YAML booleans.
  absl::StatusOr<KubeConfig> k = DecodeKubeconfig(
      "/etc/tessera/kc",
      "current-context: a\nclusters: [{name: c, cluster: {server: 'https://x/', "
      "certificate-authority: ca.crt, certificate-authority-data: QUJD, "
      "insecure-skip-tls-verify: yes}}]\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
      "users: [{name: u, user: {token: t, tokenFile: tok, client-certificate: u.crt, "
      "client-key: u.key}}]\n");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->server, "https://x");
  EXPECT_EQ(k->ca_data, "ABC");
  EXPECT_EQ(k->ca_file, "");
  EXPECT_TRUE(k->insecure_skip_tls_verify);
  EXPECT_EQ(k->token, "t");
  EXPECT_EQ(k->token_file, "");
  EXPECT_EQ(k->client_cert_file, "/etc/tessera/u.crt");
  EXPECT_EQ(k->client_key_file, "/etc/tessera/u.key");
  // No user: anonymous, as kubectl would connect.
  k = DecodeKubeconfig("kc", ok_head + "contexts: [{name: a, context: {cluster: c}}]\n");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->token, "");
  EXPECT_EQ(k->token_file, "");
}

TEST(Extender, FilterAndPrioritizeInBothNodeCacheModes) {
  FakeApi api;
  Served ext(api.WriteKubeconfig(TempDir()));

  // nodeCacheCapable: true. Names only; the extender looks nodes up in the API.
  httplib::Result r = ext.Post("filter", ExtenderFixture("filter-args-nodenames.json").dump());
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  ASSERT_EQ(r->status, 200) << r->body;
  json f = json::parse(r->body);
  EXPECT_EQ(f["nodenames"], json({"gpu-h100-1"}));
  EXPECT_EQ(f["error"], "");
  // 30Gi does not fit an L4's 23 GB: no preemption can help.
  EXPECT_THAT(f["failedAndUnresolvableNodes"]["gpu-l4-1"].get<std::string>(),
              HasSubstr("GPU memory"));
  EXPECT_TRUE(f["failedAndUnresolvableNodes"].contains("cpu-1"));
  EXPECT_TRUE(f["failedAndUnresolvableNodes"].contains("gpu-unknown-9"));

  // nodeCacheCapable: false. Whole Node objects in, the fitting ones echoed back.
  r = ext.Post("filter", ArgsWithNodes(ExtenderFixture("pod-whole.json"),
                                       {"node-h100.json", "node-l4.json", "node-cpu.json"})
                             .dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  f = json::parse(r->body);
  ASSERT_EQ(f["nodes"]["items"].size(), 2u);
  EXPECT_EQ(f["nodes"]["items"][0], ExtenderFixture("node-h100.json"));
  EXPECT_EQ(f["nodes"]["items"][1]["metadata"]["name"], "gpu-l4-1");

  // A GPU model outside the catalog (48 GB A40s here): the 18Gi share pod fits it by the memory
  // GFD reports; the whole request was refused with "unknown GPU model" before.
  json a40 = ExtenderFixture("node-l4.json");
  a40["metadata"]["name"] = "gpu-a40-1";
  a40["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-A40";
  a40["metadata"]["labels"]["nvidia.com/gpu.memory"] = "46068";
  json args = ArgsWithNodes(ExtenderFixture("pod-share.json"), {"node-cpu.json"});
  args["nodes"]["items"].push_back(a40);
  r = ext.Post("filter", args.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  f = json::parse(r->body);
  ASSERT_EQ(f["nodes"]["items"].size(), 1u) << r->body;
  EXPECT_EQ(f["nodes"]["items"][0]["metadata"]["name"], "gpu-a40-1");

  r = ext.Post(
      "prioritize",
      ArgsWithNodes(ExtenderFixture("pod-share.json"), {"node-h100.json", "node-l4.json"}).dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json p = json::parse(r->body);
  ASSERT_TRUE(p.is_array());
  ASSERT_EQ(p.size(), 2u);
  for (const json& h : p) {
    EXPECT_GE(h["score"].get<int>(), 0);
    EXPECT_LE(h["score"].get<int>(), 10);
  }
  EXPECT_TRUE(api.Problems().empty()) << api.Problems()[0];
}

TEST(Extender, MalformedRequestsGet400WithAMessage) {
  FakeApi api;
  Served ext(api.WriteKubeconfig(TempDir()));
  struct Case {
    const char* verb;
    std::string body;
    const char* message;
  };
  json no_names = ExtenderFixture("filter-args-nodenames.json");
  no_names.erase("nodenames");
  json bad_names = ExtenderFixture("filter-args-nodenames.json");
  bad_names["nodenames"] = "gpu-h100-1";
  json no_pod_name = ExtenderFixture("filter-args-nodenames.json");
  no_pod_name["pod"]["metadata"].erase("name");
  // A node object nested 100,000 deep: nodes are copied to be echoed back, and the copy
  // recursed once per level until the stack overflowed (the extender crashed).
  std::string deep_node = json{{"pod", ExtenderFixture("pod-share.json")},
                               {"nodes", {{"items", {ExtenderFixture("node-h100.json")}}}}}
                              .dump();
  deep_node.replace(deep_node.find("\"metadata\""), 0,
                    "\"x\": " + std::string(100000, '[') + std::string(100000, ']') + ", ");
  for (const Case& c : std::vector<Case>{
           {"filter", "{", "invalid JSON"},
           {"filter", "[]", "expected an object"},
           {"filter", R"({"nodenames": []})", "pod: required"},
           {"prioritize", no_names.dump(), "expected nodes"},
           {"prioritize", bad_names.dump(), "nodenames: expected an array"},
           {"filter", no_pod_name.dump(), "pod.metadata.name"},
           {"bind", R"({"podName": "a", "podNamespace": "b", "node": "c"})", "podUID"},
           {"bind", "", "invalid JSON"},
           // A number JSON can write and a double cannot hold (found by extender_request_fuzz).
           {"filter", R"({"nodenames": [], "x": 1E400})", "invalid JSON"},
           {"filter", deep_node, "ExtenderArgs: JSON nested deeper than 100 levels"},
       }) {
    httplib::Result r = ext.Post(c.verb, c.body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << c.verb << " " << c.body;
    EXPECT_THAT(r->body, HasSubstr(c.message)) << c.body;
  }
  // A well-formed request for a pod with a wrong annotation: the protocol's error field.
  json args = ExtenderFixture("filter-args-nodenames.json");
  args["pod"]["metadata"]["annotations"]["tessera.io/gpu-compute"] = "1.5";
  httplib::Result r = ext.Post("filter", args.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(json::parse(r->body)["error"].get<std::string>(),
              HasSubstr("tessera.io/gpu-compute"));
}

TEST(Extender, BindAnnotatesThenBindsAndRestartRestores) {
  FakeApi api;
  std::string kubeconfig = api.WriteKubeconfig(TempDir());
  json pod = ExtenderFixture("pod-share.json");
  api.AddPod(pod);
  std::optional<Assignment> held;
  {
    Served ext(kubeconfig);
    ASSERT_TRUE(ext.Post("filter", ArgsWithNodes(pod, {"node-h100.json"}).dump()));
    httplib::Result r = ext.Post("bind", ExtenderFixture("binding-args.json").dump());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    EXPECT_EQ(json::parse(r->body), json({{"error", ""}}));
    json stored = api.Pod("inference/chat-small-7d9f8b6c5-x2x4q");
    EXPECT_EQ(stored["spec"]["nodeName"], "gpu-h100-1");
    absl::StatusOr<Assignment> a = DecodeAssignment(
        stored["metadata"]["annotations"][kGpuAssignmentAnnotation].get<std::string>());
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->node, "gpu-h100-1");
    EXPECT_EQ(a->gpus.size(), 1u);
    // 18Gi of 81559 MiB = 226 milli; the compute ask (200) is smaller.
    EXPECT_EQ(a->milli_per_gpu, 226);
    // The same patch wrote what the pod's env reads (Downward API) to use exactly that share:
    // 226 milli of 81559 MiB is 18432.3 MiB.
    const json& notes = stored["metadata"]["annotations"];
    EXPECT_EQ(notes[kVisibleDevicesAnnotation], absl::StrCat(a->gpus[0]));
    EXPECT_EQ(notes[kMpsMemLimitAnnotation], "0=18432M");
    EXPECT_EQ(notes[kMpsThreadPercentageAnnotation], "23");
    EXPECT_EQ(notes[kGpuMemoryFractionAnnotation], "0.226");
    held = ext.svc->Held(pod["metadata"]["uid"]);
    ASSERT_TRUE(held.has_value());
    EXPECT_EQ(*held, *a);
  }
  // Two running pods whose annotation anyone who can edit a pod could have written: not JSON,
  // and nested 100,000 deep. Before, either made the whole pod list unreadable, so the extender
  // could not start (nor resync).
  for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
           {"edited", "{\"node\": \"gpu-h100-1\", \"gpus\": \"0\"}"},
           {"deep", std::string(100000, '[') + std::string(100000, ']')}}) {
    json other = ExtenderFixture("pod-share.json");
    other["metadata"]["name"] = name;
    other["metadata"]["uid"] = "uid-" + name;
    other["metadata"]["annotations"][kGpuAssignmentAnnotation] = text;
    other["spec"]["nodeName"] = "gpu-h100-1";
    other["status"]["phase"] = "Running";
    api.AddPod(other);
  }
  // A new process: Sync lists nodes and pods and holds the same GPUs again.
  Served again(kubeconfig);
  absl::StatusOr<std::vector<std::string>> problems = again.svc->Sync();
  ASSERT_TRUE(problems.ok()) << problems.status();
  EXPECT_EQ(again.svc->Held(pod["metadata"]["uid"]), held);
  EXPECT_EQ(again.svc->held_pods(), 1);
  ASSERT_EQ(problems->size(), 2u);
  EXPECT_THAT((*problems)[0],
              HasSubstr("pod inference/deep on gpu-h100-1: items[1].metadata.annotations["
                        "\"tessera.io/gpu-assignment\"]: tessera.io/gpu-assignment: JSON nested "
                        "deeper than 100 levels; the GPUs it holds are not counted"));
  EXPECT_THAT((*problems)[1], HasSubstr("pod inference/edited on gpu-h100-1: "));
  EXPECT_THAT((*problems)[1],
              HasSubstr("tessera.io/gpu-assignment.gpus: expected an array of indices"));
  EXPECT_THAT(again.svc->Metrics().body, HasSubstr("\ntessera_extender_restore_problems 2\n"));
  EXPECT_TRUE(api.Problems().empty()) << api.Problems()[0];
}

// A pod bound to `node` holding `milli` of GPU `gpu` at `priority`, as the API lists it; pod i
// started at minute 30 - i (the higher i, the earlier).
json RunningSharePod(int i, const std::string& node, int gpu, int64_t milli, int priority) {
  json p = SharePod(i, "8Gi", "0.1");
  p["spec"]["nodeName"] = node;
  p["spec"]["priority"] = priority;
  p["status"]["phase"] = "Running";
  p["status"]["startTime"] = absl::StrCat("2026-12-01T10:", 30 - i, ":00Z");
  p["metadata"]["annotations"][kGpuAssignmentAnnotation] =
      EncodeAssignment({.node = node, .gpus = {gpu}, .milli_per_gpu = milli, .user = ""});
  return p;
}

// Under MPS, each GPU is kept to one user's pods, also across a restart: the held pods' users
// come from their specs in the API's list. Eight Triton pods running as user 1000 share every GPU
// of the H100 node: a vLLM pod (its image's user) does not fit there, another Triton pod does,
// and a pod the webhook did not mark as an MPS client is not held to the rule.
TEST(Extender, KeepsEachGpuToOneUsersPodsUnderMps) {
  FakeApi api;
  auto mps_client = [](json p, std::optional<int> uid) {
    p["metadata"]["annotations"][kMpsUserAnnotation] = "set by the webhook";
    if (uid.has_value()) p["spec"]["securityContext"]["runAsUser"] = *uid;
    return p;
  };
  for (int g = 0; g < 8; ++g) {
    api.AddPod(mps_client(RunningSharePod(g, "gpu-h100-1", g, 300, 0), 1000));
  }
  Served ext(api.WriteKubeconfig(TempDir()));
  absl::StatusOr<std::vector<std::string>> problems = ext.svc->Sync();
  ASSERT_TRUE(problems.ok()) << problems.status();
  EXPECT_TRUE(problems->empty()) << (*problems)[0];
  EXPECT_EQ(ext.svc->held_pods(), 8);
  EXPECT_THAT(ext.svc->Metrics().body, HasSubstr("\ntessera_extender_mps_mixed_user_gpus 0\n"));
  auto filter = [&](const json& pod) {
    httplib::Result r = ext.Post("filter", ArgsWithNodes(pod, {"node-h100.json"}).dump());
    EXPECT_TRUE(r && r->status == 200);
    return r ? json::parse(r->body) : json();
  };
  json vllm = filter(mps_client(SharePod(100, "8Gi", "0.1"), std::nullopt));
  EXPECT_EQ(vllm["nodes"]["items"].size(), 0u);
  EXPECT_EQ(vllm["failedNodes"]["gpu-h100-1"],
            "the GPUs with 101 milli-GPU free are shared by pods of another user (1000), and MPS "
            "serves one user's pods per GPU at a time");
  json triton = filter(mps_client(SharePod(101, "8Gi", "0.1"), 1000));
  EXPECT_EQ(triton["nodes"]["items"].size(), 1u);
  json unmarked = filter(SharePod(102, "8Gi", "0.1"));
  EXPECT_EQ(unmarked["nodes"]["items"].size(), 1u);
  // A vLLM pod bound to GPU 3 by someone else: the resync names the GPU, its users and pods,
  // and the gauge counts it.
  api.AddPod(mps_client(RunningSharePod(20, "gpu-h100-1", 3, 300, 0), std::nullopt));
  problems = ext.svc->Sync();
  ASSERT_TRUE(problems.ok()) << problems.status();
  ASSERT_EQ(problems->size(), 1u);
  EXPECT_EQ((*problems)[0],
            "GPU 3 of node gpu-h100-1 is shared by MPS clients of users 1000, "
            "image:vllm/vllm-openai:v0.6.3 (pods inference/chat-20, inference/chat-3): an MPS "
            "daemon serves one user at a time, so the pods of all users but one wait at CUDA "
            "start until its pods exit; delete the pods of all users but one there");
  EXPECT_THAT(ext.svc->Metrics().body, HasSubstr("\ntessera_extender_mps_mixed_user_gpus 1\n"));
  EXPECT_THAT(ext.svc->Metrics().body, HasSubstr("\ntessera_extender_restore_problems 1\n"));

  // GET /state shows who holds that GPU, as whom, and what is left.
  httplib::Result r = ext.Get("/state?node=gpu-h100-1");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json state = json::parse(r->body);
  ASSERT_EQ(state["nodes"].size(), 1u);
  const json& node = state["nodes"][0];
  EXPECT_EQ(node["name"], "gpu-h100-1");
  EXPECT_EQ(node["model"], "H100-80GB");
  ASSERT_EQ(node["gpus"].size(), 8u);
  EXPECT_EQ(node["gpus"][3], json::parse(R"({"index": 3, "freeMilli": 400, "pods": [
      {"pod": "inference/chat-3", "uid": ")" +
                                         SharePodUid(3) + R"(", "milliPerGpu": 300,
       "priority": 0, "ending": false, "user": "1000"},
      {"pod": "inference/chat-20", "uid": ")" +
                                         SharePodUid(20) + R"(", "milliPerGpu": 300,
       "priority": 0, "ending": false, "user": "image:vllm/vllm-openai:v0.6.3"}]})"));
  EXPECT_EQ(node["nominated"], json::array());
  r = ext.Get("/state");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["nodes"].size(), 3u);
  r = ext.Get("/state?node=gpu-x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_THAT(r->body, HasSubstr("node gpu-x unknown to the extender"));
}

// kube-scheduler's preempt verb, in both nodeCacheCapable forms: the GPU holders of lower
// priority whose eviction makes room for the share are added to its victims, its own victims
// count as freeing their GPUs, and nodes where no eviction helps are left out. Before, the
// extender had no preempt verb: kube-scheduler chose victims by CPU and memory alone, evicting
// pods on nodes whose GPUs still had no room, and never GPU holders.
TEST(Extender, PreemptAddsTheGpuHoldersTheShareNeeds) {
  FakeApi api;
  // gpu-h100-1's 8 GPUs each hold 900 milli: GPUs 0-3 for pods of priority 1000, 4-7 of 0;
  // GPU 4 also holds pod 8's 100 milli.
  for (int i = 0; i < 8; ++i)
    api.AddPod(RunningSharePod(i, "gpu-h100-1", i, 900, i < 4 ? 1000 : 0));
  api.AddPod(RunningSharePod(8, "gpu-h100-1", 4, 100, 0));
  Served ext(api.WriteKubeconfig(TempDir()));
  absl::StatusOr<std::vector<std::string>> problems = ext.svc->Sync();
  ASSERT_TRUE(problems.ok()) << problems.status();
  ASSERT_EQ(ext.svc->held_pods(), 9);

  // nodeCacheCapable: true. The preemptor (priority 1000000) asks 40Gi, 503 milli of an H100;
  // kube-scheduler's own filters needed no victim on gpu-h100-1 (an empty list). The priority-0
  // pods (4-8) all go, then are given back the earliest started first: pods 8, 7, 6 and 5 stay,
  // and pod 4, the latest started, goes: without it GPU 4 has 900 milli free, pod 8's 100 still
  // there (by UID alone pod 8 would have gone). The 40Gi never fit an L4's 23 GB: gpu-l4-1 is
  // left out whatever kube-scheduler chose there.
  httplib::Result r = ext.Post("preempt", ExtenderFixture("preempt-args-metavictims.json").dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body),
            json::parse(R"({"NodeNameToMetaVictims": {"gpu-h100-1": {"Pods": [{"UID": ")" +
                        SharePodUid(4) + R"("}], "NumPDBViolations": 0}}})"));

  // nodeCacheCapable: false: whole victim pods. kube-scheduler chose pod 5 (for its CPU, say)
  // and counted a PDB violation: GPU 5 is then free enough, nothing is added, the count stays.
  json args = ExtenderFixture("preempt-args-metavictims.json");
  args.erase("NodeNameToMetaVictims");
  args["NodeNameToVictims"] = {
      {"gpu-h100-1",
       {{"Pods", {RunningSharePod(5, "gpu-h100-1", 5, 900, 0)}}, {"NumPDBViolations", 1}}}};
  r = ext.Post("preempt", args.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["NodeNameToMetaVictims"],
            json::parse(R"({"gpu-h100-1": {"Pods": [{"UID": ")" + SharePodUid(5) +
                        R"("}], "NumPDBViolations": 1}})"));

  // A preemptor of priority 0 outranks none of the GPU holders: the node is left out (so are
  // the L4 nodes, each time: 3 dropped in all).
  args = ExtenderFixture("preempt-args-metavictims.json");
  args["Pod"]["spec"]["priority"] = 0;
  r = ext.Post("preempt", args.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body), json::parse(R"({"NodeNameToMetaVictims": {}})"));
  // Asking changed nothing: every pod still holds its GPUs.
  EXPECT_EQ(ext.svc->held_pods(), 9);
  std::string metrics = ext.svc->Metrics().body;
  EXPECT_THAT(metrics,
              HasSubstr("tessera_extender_preempt_nodes_total{outcome=\"victims_added\"} 1\n"));
  EXPECT_THAT(metrics, HasSubstr("tessera_extender_preempt_nodes_total{outcome=\"dropped\"} 3\n"));
  EXPECT_THAT(metrics,
              HasSubstr("tessera_extender_requests_total{verb=\"preempt\",code=\"200\"} 3\n"));

  // Malformed: 400 with the field.
  json bad_priority = ExtenderFixture("preempt-args-metavictims.json");
  bad_priority["Pod"]["spec"]["priority"] = "high";
  json bad_start = ExtenderFixture("preempt-args-metavictims.json");
  bad_start["Pod"]["status"]["startTime"] = "yesterday";
  json bad_uid = ExtenderFixture("preempt-args-metavictims.json");
  bad_uid["NodeNameToMetaVictims"]["gpu-l4-1"]["Pods"][0] = {{"UID", 7}};
  for (const auto& [body, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"Pod": {"metadata": {"name": "p"}}})", "expected NodeNameToVictims"},
           {R"({"NodeNameToMetaVictims": {}})", "Pod: required"},
           {bad_priority.dump(), "Pod.spec.priority: expected a 32-bit integer"},
           {bad_start.dump(), "Pod.status.startTime: expected an RFC 3339 time"},
           {bad_uid.dump(), "NodeNameToMetaVictims[\"gpu-l4-1\"].Pods[0].UID: expected a string"},
       }) {
    r = ext.Post("preempt", body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body;
    EXPECT_THAT(r->body, HasSubstr(message));
  }
  EXPECT_TRUE(api.Problems().empty()) << api.Problems()[0];
}

// PodDisruptionBudgets in preemption, as kube-scheduler weighs them for its own victims: GPU
// holders whose eviction would violate a budget are spared before the others, and one still
// taken adds to NumPDBViolations. Before, the extender did not read budgets: it took the least
// important pod whatever protected it and reported no violation, so kube-scheduler, which prefers
// the candidate with the fewest, could pick that node over one where nothing was violated.
TEST(Extender, PreemptSparesWhatDisruptionBudgetsProtect) {
  FakeApi api;
  // gpu-h100-1's 8 GPUs each hold 900 milli of priority-0 pods: 0-3 "gold" (budget chat-gold,
  // one disruption allowed), 4-7 "batch" (budget batch, none allowed). Pod 7 started first.
  for (int i = 0; i < 8; ++i) {
    json p = RunningSharePod(i, "gpu-h100-1", i, 900, 0);
    p["metadata"]["labels"]["tier"] = i < 4 ? "gold" : "batch";
    api.AddPod(p);
  }
  Served ext(api.WriteKubeconfig(TempDir()));
  ASSERT_TRUE(ext.svc->Sync().ok());
  json args = ExtenderFixture("preempt-args-metavictims.json");  // 503 milli at priority 1000000
  args["NodeNameToMetaVictims"].erase("gpu-l4-1");
  auto preempt = [&] {
    httplib::Result r = ext.Post("preempt", args.dump());
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body)["NodeNameToMetaVictims"]["gpu-h100-1"];
  };
  auto victim = [](int i, int violations) {
    return json{{"Pods", {{{"UID", SharePodUid(i)}}}}, {"NumPDBViolations", violations}};
  };
  // No budgets to be had (the list fails): the least important pod, pod 0; counted.
  EXPECT_EQ(preempt(), victim(0, 0));
  EXPECT_THAT(ext.svc->Metrics().body,
              HasSubstr("\ntessera_extender_preempt_without_budgets_total 1\n"));
  // With the budgets: the first gold pod by importance, pod 3, uses chat-gold's one disruption;
  // every other eviction would violate one, so pod 3 is the victim and nothing is violated.
  json budgets = ExtenderFixture("pdb-list.json");
  api.SetBudgets(budgets["items"]);
  EXPECT_EQ(preempt(), victim(3, 0));
  // No disruption left anywhere: the least important pod again, its violation counted on top of
  // kube-scheduler's own (2 here).
  budgets["items"][0]["status"]["disruptionsAllowed"] = 0;
  api.SetBudgets(budgets["items"]);
  args["NodeNameToMetaVictims"]["gpu-h100-1"]["NumPDBViolations"] = 2;
  EXPECT_EQ(preempt(), victim(0, 3));
  // A budget of another namespace, or one whose selector is empty, protects none of them.
  budgets["items"][0]["metadata"]["namespace"] = "other";
  budgets["items"][1]["spec"]["selector"] = json::object();
  api.SetBudgets(budgets["items"]);
  EXPECT_EQ(preempt(), victim(0, 2));
  EXPECT_THAT(ext.svc->Metrics().body,
              HasSubstr("\ntessera_extender_preempt_without_budgets_total 1\n"));
  EXPECT_TRUE(api.Problems().empty()) << api.Problems()[0];
}

// A pod the extender bound itself is held at the priority its filter call carried.
TEST(Extender, PreemptKnowsThePriorityOfPodsItBound) {
  FakeApi api;
  json pod = ExtenderFixture("pod-share.json");
  pod["spec"]["priority"] = 2000;
  api.AddPod(pod);
  Served ext(api.WriteKubeconfig(TempDir()));
  ASSERT_TRUE(ext.Post("filter", ArgsWithNodes(pod, {"node-h100.json"}).dump()));
  httplib::Result r = ext.Post("bind", ExtenderFixture("binding-args.json").dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(json::parse(r->body), json({{"error", ""}}));
  // All 8 GPUs of the node, for a preemptor below and above the bound pod's 2000.
  json args = ExtenderFixture("preempt-args-metavictims.json");
  args["Pod"]["metadata"]["annotations"]["tessera.io/gpu-compute"] = "8";
  args["NodeNameToMetaVictims"].erase("gpu-l4-1");
  for (int priority : {1000, 1000000}) {
    args["Pod"]["spec"]["priority"] = priority;
    r = ext.Post("preempt", args.dump());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["NodeNameToMetaVictims"].contains("gpu-h100-1"), priority > 2000)
        << priority << ": " << r->body;
  }
}

// A pod being deleted, as the API server shows it once kube-scheduler's preemption evicted it:
// deletionTimestamp and its grace period set, the DisruptionTarget condition added.
json Evicted(json pod) {
  pod["metadata"]["deletionTimestamp"] = "2026-12-01T10:41:09Z";
  pod["metadata"]["deletionGracePeriodSeconds"] = 30;
  pod["status"]["conditions"] = {{{"type", "DisruptionTarget"},
                                  {"status", "True"},
                                  {"reason", "PreemptionByScheduler"},
                                  {"message",
                                   "default-scheduler: preempting to accommodate a "
                                   "higher priority pod"},
                                  {"lastTransitionTime", "2026-12-01T10:41:09Z"}}};
  return pod;
}

// After a preemption, kube-scheduler nominates the preemptor to the node (status.
// nominatedNodeName) and it waits there for its victims to end. The GPU room they free is kept
// for it, from the list and from the watch: a pod of lower or equal priority is refused the
// share the preemptor needs, one of higher priority is not, nor is the preemptor itself; room it
// does not need stays usable, and binding the preemptor ends the nomination. Before, the
// extender watched bound pods only and any pod filtered first took the freed GPU; the
// preemptor then preempted again.
TEST(Extender, NominatedPodKeepsTheGpuRoomItPreemptedFor) {
  FakeApi api;
  // gpu-h100-1's 8 GPUs each hold 900 milli of priority-0 pods.
  for (int i = 0; i < 8; ++i) api.AddPod(RunningSharePod(i, "gpu-h100-1", i, 900, 0));
  std::string kubeconfig = api.WriteKubeconfig(TempDir());
  Served watching(kubeconfig);
  ASSERT_TRUE(watching.svc->Sync().ok());
  std::atomic<bool> stop{false};
  std::thread follow([&] {
    RealClock clock;
    watching.svc->Follow(clock, absl::Seconds(30), absl::ZeroDuration(), stop,
                         [](const std::string& line) { ADD_FAILURE() << line; });
  });
  auto nominated = [&](Served& s) { return Metric(s, "tessera_extender_nominated_pods"); };

  // The preemptor (priority 1000, 225 milli of an H100) evicted pod 3; pod 3 is ending.
  const json preemptor = ExtenderFixture("pod-nominated.json");
  api.AddPod(Evicted(RunningSharePod(3, "gpu-h100-1", 3, 900, 0)));
  api.AddPod(preemptor);
  ASSERT_TRUE(Eventually([&] { return nominated(watching) == 1; }));
  Served listing(kubeconfig);
  ASSERT_TRUE(listing.svc->Sync().ok());
  EXPECT_EQ(nominated(listing), 1);

  // Asks `milli` of one H100 GPU at `priority` (`uid` the preemptor's, or another's); "" when
  // gpu-h100-1 fits, else why not.
  auto filter = [](Served& s, int64_t milli, int priority, bool as_preemptor) {
    json pod = as_preemptor ? ExtenderFixture("pod-nominated.json") : SharePod(20, "4Gi", "0.1");
    pod["metadata"]["annotations"]["tessera.io/gpu-compute"] = absl::StrCat(milli / 1000.0);
    pod["spec"]["priority"] = priority;
    httplib::Result r = s.Post("filter", ArgsWithNodes(pod, {"node-h100.json"}).dump());
    EXPECT_TRUE(r);
    if (!r) return std::string("no answer");
    json f = json::parse(r->body);
    if (f["nodes"]["items"].size() == 1) return std::string();
    return f["failedNodes"].value("gpu-h100-1", "not fitting, not failed: " + r->body);
  };
  for (Served* s : {&watching, &listing}) {
    // While pod 3 ends, 100 milli is free on every GPU; the preemptor will take GPU 3 once it
    // has: the 100 milli elsewhere stays usable at any priority.
    EXPECT_EQ(filter(*s, 100, 0, false), "");
    EXPECT_NE(filter(*s, 200, 0, false), "");  // no room now, nominations or not
  }

  // Pod 3 ends: GPU 3 is free, 775 milli of it beyond the preemptor's 225.
  api.DeletePod("inference/chat-3");
  ASSERT_TRUE(listing.svc->Sync().ok());
  ASSERT_TRUE(Eventually([&] { return filter(watching, 900, 2000, false).empty(); }));
  for (Served* s : {&watching, &listing}) {
    EXPECT_THAT(filter(*s, 900, 0, false),
                HasSubstr("kept for the pods nominated to this node (inference/chat-small-"));
    EXPECT_NE(filter(*s, 900, 1000, false), "");  // equal priority: kept too
    EXPECT_EQ(filter(*s, 700, 0, false), "");     // fits beside it
    EXPECT_EQ(filter(*s, 900, 2000, false), "");  // higher priority: not kept from it
    EXPECT_EQ(filter(*s, 225, 1000, true), "");   // the preemptor itself
  }

  // The preemptor is bound (here by the watching replica): nominated no longer, on either. The
  // watch now sees pending pods, the one being bound among them: the event of its annotation,
  // before the binding, must not release what the bind reserved.
  ASSERT_EQ(filter(watching, 225, 1000, true), "");
  const std::string uid = preemptor["metadata"]["uid"];
  const int64_t events = Metric(watching, "tessera_extender_pod_events_total");
  std::mutex held_mu;  // the binding runs on the fake API server's thread
  std::optional<Assignment> held_while_binding;
  api.BeforeBinding([&] {
    EXPECT_TRUE(
        Eventually([&] { return Metric(watching, "tessera_extender_pod_events_total") > events; }));
    std::lock_guard<std::mutex> l(held_mu);
    held_while_binding = watching.svc->Held(uid);
  });
  httplib::Result r = watching.Post("bind", ExtenderFixture("binding-args.json").dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(json::parse(r->body), json({{"error", ""}}));
  EXPECT_EQ(nominated(watching), 0);
  ASSERT_TRUE(listing.svc->Sync().ok());
  EXPECT_EQ(nominated(listing), 0);
  const std::optional<Assignment> held = watching.svc->Held(uid);
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->gpus, std::vector<int>{3});
  {
    std::lock_guard<std::mutex> l(held_mu);
    EXPECT_EQ(held_while_binding, held);
  }
  EXPECT_EQ(listing.svc->Held(uid), held);
  stop = true;
  follow.join();
  EXPECT_TRUE(api.Problems().empty()) << api.Problems()[0];
}

// kube-scheduler's DefaultPreemption never evicts for a GPU share: where its plugins fit the pod
// without evicting anything, the node is no candidate, and a pod that only the extender's filter
// refuses never gets a preemption (the preempt verb is not called). With share preemption on
// (--preempt-shares) the extender does what kube-scheduler would: a delay after filter refused
// the pod, it nominates it to the node whose lower-priority GPU holders it can best evict, marks
// them DisruptionTarget/PreemptionByScheduler and deletes them; it does not preempt again while
// they end, and the freed room is kept for the pod. A pod with preemptionPolicy Never, one of
// no higher priority than the holders, and one kube-scheduler preempted for get nothing.
TEST(Extender, PreemptsForAPodThatOnlyGpuShareKeepsOut) {
  FakeApi api;
  // gpu-h100-1's 8 GPUs each hold 900 milli: GPUs 0-3 for pods of priority 5000, 4-7 of 0
  // (pod i started at 10:(30-i), so pod 4 last).
  for (int i = 0; i < 8; ++i) {
    api.AddPod(RunningSharePod(i, "gpu-h100-1", i, 900, i < 4 ? 5000 : 0));
  }
  json preemptor = ExtenderFixture("pod-nominated.json");  // priority 1000, 225 milli of an H100
  preemptor["status"].erase("nominatedNodeName");
  api.AddPod(preemptor);
  json never = preemptor;
  never["metadata"]["name"] = "chat-small-never";
  never["metadata"]["uid"] = "1f2e3d4c-5b6a-4789-8a7b-6c5d4e3f2a11";
  never["spec"]["preemptionPolicy"] = "Never";
  api.AddPod(never);
  json low = preemptor;  // priority 0: no holder below it
  low["metadata"]["name"] = "chat-small-low";
  low["metadata"]["uid"] = "1f2e3d4c-5b6a-4789-8a7b-6c5d4e3f2a12";
  low["spec"]["priority"] = 0;
  api.AddPod(low);

  api.SetBudgets({});  // the budgets API answers, with none
  Served ext(api.WriteKubeconfig(TempDir()));
  ASSERT_TRUE(ext.svc->Sync().ok());
  std::atomic<bool> stop{false};
  std::thread follow([&] {
    RealClock clock;
    ext.svc->Follow(clock, absl::Seconds(30), absl::ZeroDuration(), stop,
                    [](const std::string& line) { ADD_FAILURE() << line; });
  });
  absl::Cleanup end_follow = [&] {
    stop = true;
    follow.join();
  };
  std::vector<std::string> lines;
  auto log = [&](const std::string& line) { lines.push_back(line); };
  // "" when gpu-h100-1 fits `pod`, else why not.
  auto filter = [&](const json& pod) {
    httplib::Result r = ext.Post("filter", ArgsWithNodes(pod, {"node-h100.json"}).dump());
    EXPECT_TRUE(r);
    if (!r) return std::string("no answer");
    json f = json::parse(r->body);
    if (f["nodes"]["items"].size() == 1) return std::string();
    return f["failedNodes"].value("gpu-h100-1", "not fitting, not failed: " + r->body);
  };
  auto deleting = [&](int i) {
    return api.Pod("inference/chat-" + std::to_string(i))["metadata"].contains("deletionTimestamp");
  };

  // Off by default: refused pods are not remembered.
  ASSERT_NE(filter(preemptor), "");
  SimulatedClock clock(absl::FromUnixSeconds(1796121600));  // 2026-12-01T10:40:00Z
  ext.svc->EnableSharePreemption(&clock, absl::Seconds(2));
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(ext.svc->PreemptBlocked(log), 0);

  for (const json* p : {&preemptor, &never, &low}) ASSERT_NE(filter(*p), "");
  EXPECT_EQ(ext.svc->PreemptBlocked(log), 0);  // not yet: kube-scheduler's preemption goes first
  clock.Advance(absl::Seconds(2));
  EXPECT_EQ(ext.svc->PreemptBlocked(log), 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("preempt: inference/chat-small-7d9f8b6c5-x2x4q (priority 1000) "
                                  "nominated to gpu-h100-1; evicting inference/chat-4"));
  EXPECT_EQ(api.Pod("inference/chat-small-7d9f8b6c5-x2x4q")["status"]["nominatedNodeName"],
            "gpu-h100-1");
  // One victim: of the priority-0 holders, the one started last; marked as kube-scheduler marks
  // its victims, then deleted.
  EXPECT_EQ(api.deletes(), 1);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(deleting(i), i == 4) << i;
  // The condition is merged in by type: the pod's others stay.
  const json conditions = api.Pod("inference/chat-4")["status"]["conditions"];
  ASSERT_EQ(conditions.size(), 2u) << conditions;
  EXPECT_EQ(conditions[0]["type"], "PodScheduled");
  EXPECT_EQ(conditions[1]["type"], "DisruptionTarget");
  EXPECT_EQ(conditions[1]["status"], "True");
  EXPECT_EQ(conditions[1]["reason"], "PreemptionByScheduler");
  EXPECT_EQ(conditions[1]["lastTransitionTime"], "2026-12-01T10:40:07Z");
  // And a Preempted event on it, which outlives the pod.
  const std::vector<json> events = api.events_posted();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["reason"], "Preempted");
  EXPECT_EQ(events[0]["involvedObject"]["name"], "chat-4");
  EXPECT_EQ(events[0]["involvedObject"]["uid"], SharePodUid(4));
  EXPECT_EQ(events[0]["message"],
            "Preempted by pod inference/chat-small-7d9f8b6c5-x2x4q "
            "(1f2e3d4c-5b6a-4789-8a7b-6c5d4e3f2a10) on node gpu-h100-1 for its GPU share");
  auto metric = [&](const std::string& line) {
    return absl::StrContains(ext.svc->Metrics().body, line);
  };
  EXPECT_TRUE(metric("tessera_extender_share_preemptions_total{result=\"ok\"} 1\n"));
  EXPECT_TRUE(metric("tessera_extender_share_preemption_victims_total 1\n"));
  EXPECT_TRUE(metric("tessera_extender_preempt_without_budgets_total 0\n"));

  // While the victim ends, the pod is refused still, and not preempted for again.
  ASSERT_NE(filter(preemptor), "");
  clock.Advance(absl::Seconds(10));
  EXPECT_EQ(ext.svc->PreemptBlocked(log), 0);
  EXPECT_EQ(api.deletes(), 1);

  // The victim is gone: the pod fits, and the room is its own, not a lower-priority pod's.
  api.DeletePod("inference/chat-4");
  ASSERT_TRUE(Eventually([&] { return filter(preemptor).empty(); }));
  json other = low;
  other["metadata"]["annotations"]["tessera.io/gpu-compute"] = "0.9";
  EXPECT_THAT(filter(other), HasSubstr("kept for the pods nominated to this node"));

  // kube-scheduler preempting for an attempt itself (its preempt verb gave victims): the
  // remembered pod is forgotten. Here a pod of two whole GPUs and priority 10000: GPU 4 is free,
  // and kube-scheduler's victim, pod 0 (evicted for its CPU, say), frees GPU 0.
  json big = preemptor;
  big["metadata"]["name"] = "train-0";
  big["metadata"]["uid"] = "1f2e3d4c-5b6a-4789-8a7b-6c5d4e3f2a13";
  big["metadata"]["annotations"]["tessera.io/gpu-compute"] = "2";
  big["metadata"]["annotations"]["tessera.io/gpu-memory"] = "40Gi";
  big["spec"]["priority"] = 10000;
  api.AddPod(big);
  ASSERT_NE(filter(big), "");
  json args = ExtenderFixture("preempt-args-metavictims.json");
  args["Pod"] = big;
  args["NodeNameToMetaVictims"] = {
      {"gpu-h100-1", {{"Pods", {{{"UID", SharePodUid(0)}}}}, {"NumPDBViolations", 0}}}};
  httplib::Result r = ext.Post("preempt", args.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  ASSERT_TRUE(json::parse(r->body)["NodeNameToMetaVictims"].contains("gpu-h100-1")) << r->body;
  clock.Advance(absl::Seconds(10));
  EXPECT_EQ(ext.svc->PreemptBlocked(log), 0);
  EXPECT_EQ(api.deletes(), 1);
  EXPECT_EQ(lines.size(), 1u) << lines.back();
  EXPECT_TRUE(api.Problems().empty()) << api.Problems()[0];
}

// A share preemption the API refuses (no RBAC to delete pods) is logged, counted and tried again
// on the pod's next refusal; the preemptor stays nominated, as kube-scheduler leaves it. One whose
// pod was deleted before it began is no failure.
TEST(Extender, SharePreemptionFailuresAreCountedAndTriedAgain) {
  FakeApi api;
  // Pod 0 started last: the victim.
  for (int i = 0; i < 8; ++i) api.AddPod(RunningSharePod(i, "gpu-h100-1", i, 900, 0));
  json preemptor = ExtenderFixture("pod-nominated.json");
  preemptor["status"].erase("nominatedNodeName");
  api.AddPod(preemptor);
  Served ext(api.WriteKubeconfig(TempDir()));
  ASSERT_TRUE(ext.svc->Sync().ok());
  SimulatedClock clock(absl::FromUnixSeconds(1796121600));
  ext.svc->EnableSharePreemption(&clock, absl::Seconds(2));
  std::vector<std::string> lines;
  auto log = [&](const std::string& line) { lines.push_back(line); };
  auto refuse_and_wait = [&](const json& pod) {
    httplib::Result r = ext.Post("filter", ArgsWithNodes(pod, {"node-h100.json"}).dump());
    ASSERT_TRUE(r);
    ASSERT_TRUE(json::parse(r->body)["failedNodes"].contains("gpu-h100-1")) << r->body;
    clock.Advance(absl::Seconds(2));
  };
  auto metric = [&](const std::string& line) {
    return absl::StrContains(ext.svc->Metrics().body, line);
  };
  const std::string key = "inference/chat-small-7d9f8b6c5-x2x4q";

  api.ForbidDeletes(true);
  refuse_and_wait(preemptor);
  EXPECT_EQ(ext.svc->PreemptBlocked(log), 0);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("preempt: " + key +
                                  " on gpu-h100-1: delete inference/chat-0: "
                                  "HTTP 403: pods \"chat-0\" is forbidden"));
  EXPECT_TRUE(metric("tessera_extender_share_preemptions_total{result=\"failed\"} 1\n"));
  EXPECT_EQ(api.Pod(key)["status"]["nominatedNodeName"], "gpu-h100-1");
  EXPECT_FALSE(api.Pod("inference/chat-0")["metadata"].contains("deletionTimestamp"));

  api.ForbidDeletes(false);
  refuse_and_wait(preemptor);
  EXPECT_EQ(ext.svc->PreemptBlocked(log), 1);
  EXPECT_EQ(api.deletes(), 1);
  EXPECT_TRUE(api.Pod("inference/chat-0")["metadata"].contains("deletionTimestamp"));
  EXPECT_TRUE(metric("tessera_extender_share_preemptions_total{result=\"ok\"} 1\n"));

  // A pod deleted between the filter and the preemption: nothing done, nothing failed.
  json gone = preemptor;
  gone["metadata"]["name"] = "chat-small-gone";
  gone["metadata"]["uid"] = "1f2e3d4c-5b6a-4789-8a7b-6c5d4e3f2a14";
  gone["spec"]["priority"] = 2000;
  api.AddPod(gone);
  refuse_and_wait(gone);
  api.DeletePod("inference/chat-small-gone");
  lines.clear();
  EXPECT_EQ(ext.svc->PreemptBlocked(log), 0);
  EXPECT_TRUE(lines.empty()) << lines[0];
  EXPECT_EQ(api.deletes(), 1);
  EXPECT_TRUE(metric("tessera_extender_share_preemptions_total{result=\"failed\"} 1\n"));
  EXPECT_TRUE(api.Problems().empty()) << api.Problems()[0];
}

// With share preemption on (a 2-s delay, on a simulated clock): filter refuses `preemptor` on
// gpu-h100-1, and once the delay is past, PreemptBlocked preempts for it; its lines in `*lines`.
void RefusedThenPreempted(Served& ext, const json& preemptor, std::vector<std::string>* lines) {
  SimulatedClock clock(absl::FromUnixSeconds(1796121600));
  ext.svc->EnableSharePreemption(&clock, absl::Seconds(2));
  httplib::Result r = ext.Post("filter", ArgsWithNodes(preemptor, {"node-h100.json"}).dump());
  ASSERT_TRUE(r);
  ASSERT_TRUE(json::parse(r->body)["failedNodes"].contains("gpu-h100-1")) << r->body;
  clock.Advance(absl::Seconds(2));
  ASSERT_EQ(ext.svc->PreemptBlocked([&](const std::string& l) { lines->push_back(l); }), 1);
  ext.svc->EnableSharePreemption(nullptr, absl::Seconds(2));  // the clock goes out of scope
}

// A victim already being deleted (by its owner, say) makes room once it is gone: the preemptor is
// nominated, and the victim gets no call at all, as kube-scheduler skips such victims.
TEST(Extender, SharePreemptionSendsNothingToAVictimAlreadyEnding) {
  FakeApi api;
  // Pod 0 started last and is ending already.
  for (int i = 0; i < 8; ++i) {
    json p = RunningSharePod(i, "gpu-h100-1", i, 900, 0);
    api.AddPod(i == 0 ? Evicted(p) : p);
  }
  json preemptor = ExtenderFixture("pod-nominated.json");
  preemptor["status"].erase("nominatedNodeName");
  api.AddPod(preemptor);
  api.SetBudgets({});
  Served ext(api.WriteKubeconfig(TempDir()));
  ASSERT_TRUE(ext.svc->Sync().ok());
  std::vector<std::string> lines;
  ASSERT_NO_FATAL_FAILURE(RefusedThenPreempted(ext, preemptor, &lines));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("nominated to gpu-h100-1; evicting inference/chat-0 for"));
  EXPECT_EQ(api.Pod("inference/chat-small-7d9f8b6c5-x2x4q")["status"]["nominatedNodeName"],
            "gpu-h100-1");
  EXPECT_EQ(api.deletes(), 0);
  EXPECT_TRUE(api.events_posted().empty());
  // Its condition is the one it was evicted with, not a second one of the extender's.
  EXPECT_THAT(api.Pod("inference/chat-0")["status"]["conditions"][0]["message"].get<std::string>(),
              HasSubstr("default-scheduler"));
  EXPECT_TRUE(api.Problems().empty()) << api.Problems()[0];
}

// After its evictions kube-scheduler clears the nominations of the lower-priority pods nominated
// to the node, which may no longer fit there; the share preemption does too, through a JSON patch
// that tests the UID and the node, so that a nomination moved since is left alone.
TEST(Extender, SharePreemptionClearsLowerPriorityNominationsThere) {
  FakeApi api;
  for (int i = 0; i < 8; ++i) api.AddPod(RunningSharePod(i, "gpu-h100-1", i, 900, 0));
  json preemptor = ExtenderFixture("pod-nominated.json");  // priority 1000, 225 milli of an H100
  preemptor["status"].erase("nominatedNodeName");
  api.AddPod(preemptor);
  // Two pods of lower priority nominated to gpu-h100-1 by earlier preemptions.
  json mid = ExtenderFixture("pod-nominated.json");
  mid["metadata"]["name"] = "chat-small-mid";
  mid["metadata"]["uid"] = "1f2e3d4c-5b6a-4789-8a7b-6c5d4e3f2a15";
  mid["spec"]["priority"] = 500;
  api.AddPod(mid);
  json moved = mid;
  moved["metadata"]["name"] = "chat-small-moved";
  moved["metadata"]["uid"] = "1f2e3d4c-5b6a-4789-8a7b-6c5d4e3f2a16";
  moved["spec"]["priority"] = 100;
  api.AddPod(moved);
  api.SetBudgets({});
  Served ext(api.WriteKubeconfig(TempDir()));
  ASSERT_TRUE(ext.svc->Sync().ok());  // no watch: the extender sees the API as listed here
  EXPECT_EQ(Metric(ext, "tessera_extender_nominated_pods"), 2);
  // Since the list, kube-scheduler nominated `moved` to another node.
  moved["status"]["nominatedNodeName"] = "gpu-h100-2";
  api.AddPod(moved);

  std::vector<std::string> lines;
  ASSERT_NO_FATAL_FAILURE(RefusedThenPreempted(ext, preemptor, &lines));
  ASSERT_EQ(lines.size(), 1u) << lines[1];
  EXPECT_THAT(lines[0], HasSubstr("nominated to gpu-h100-1; evicting inference/chat-0 for their "
                                  "GPU share; nomination of lower-priority "
                                  "inference/chat-small-mid cleared"));
  EXPECT_EQ(api.deletes(), 1);
  EXPECT_FALSE(api.Pod("inference/chat-small-mid")["status"].contains("nominatedNodeName"));
  EXPECT_EQ(api.Pod("inference/chat-small-moved")["status"]["nominatedNodeName"], "gpu-h100-2");
  EXPECT_EQ(api.nominations_cleared(), 1);
  EXPECT_EQ(api.Pod("inference/chat-small-7d9f8b6c5-x2x4q")["status"]["nominatedNodeName"],
            "gpu-h100-1");
  // Here too: the preemptor's nomination in, mid's out (moved's stays, to gpu-h100-1 until the
  // watch or the next list says gpu-h100-2).
  EXPECT_EQ(Metric(ext, "tessera_extender_nominated_pods"), 2);
  EXPECT_TRUE(api.Problems().empty()) << api.Problems()[0];
}

// A standby extender follows the leader's binds and the pods that end through its pod watch,
// with no list between them. Before, it learned of them only at its next --resync (30 s by
// default); a failover inside that window could give a GPU the leader had just given away.
TEST(Extender, WatchFollowsBindsAndEndsBetweenLists) {
  FakeApi api;
  std::string kubeconfig = api.WriteKubeconfig(TempDir());
  json pod = ExtenderFixture("pod-share.json");
  const std::string uid = pod["metadata"]["uid"];
  api.AddPod(pod);
  Served leader(kubeconfig);
  Served standby(kubeconfig);
  ASSERT_TRUE(leader.svc->Sync().ok());
  ASSERT_TRUE(standby.svc->Sync().ok());
  const int pages_listed = api.list_pages();
  std::mutex mu;
  std::vector<std::string> logged;
  std::atomic<bool> stop{false};
  std::thread follow([&] {
    RealClock clock;
    standby.svc->Follow(clock, absl::Seconds(30), absl::ZeroDuration(), stop,
                        [&](const std::string& line) {
                          std::lock_guard<std::mutex> l(mu);
                          logged.push_back(line);
                        });
  });

  // The leader binds: the standby holds the same GPUs.
  ASSERT_TRUE(leader.Post("filter", ArgsWithNodes(pod, {"node-h100.json"}).dump()));
  httplib::Result r = leader.Post("bind", ExtenderFixture("binding-args.json").dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(json::parse(r->body), json({{"error", ""}}));
  const std::optional<Assignment> held = leader.svc->Held(uid);
  ASSERT_TRUE(held.has_value());
  EXPECT_TRUE(Eventually([&] { return standby.svc->Held(uid) == held; }));

  // A pod bound with an annotation that cannot be read is reported, not held.
  json edited = ExtenderFixture("pod-share.json");
  edited["metadata"]["name"] = "edited";
  edited["metadata"]["uid"] = "uid-edited";
  edited["metadata"]["annotations"][kGpuAssignmentAnnotation] =
      R"({"node": "gpu-h100-1", "gpus": "0"})";
  edited["spec"]["nodeName"] = "gpu-h100-1";
  edited["status"]["phase"] = "Running";
  api.AddPod(edited);
  EXPECT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> l(mu);
    return !logged.empty();
  }));
  {
    std::lock_guard<std::mutex> l(mu);
    ASSERT_EQ(logged.size(), 1u);
    EXPECT_THAT(logged[0], HasSubstr("watch: pod inference/edited on gpu-h100-1: "));
    EXPECT_THAT(logged[0], HasSubstr("expected an array of indices"));
  }
  EXPECT_FALSE(standby.svc->Held("uid-edited").has_value());

  // An event it cannot read is reported and skipped; the watch goes on.
  api.OddEvent(pod);
  EXPECT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> l(mu);
    return logged.size() == 2;
  }));
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_THAT(logged[1], HasSubstr("watch: an event skipped: event.type: expected ADDED, "
                                     "MODIFIED, DELETED, BOOKMARK or ERROR, found \"UPDATED\""));
  }

  // The pod ends (after a bookmark): its GPUs are free on the standby too.
  api.Bookmark();
  api.SetPhase("inference/chat-small-7d9f8b6c5-x2x4q", "Succeeded");
  EXPECT_TRUE(Eventually([&] { return !standby.svc->Held(uid).has_value(); }));
  EXPECT_EQ(api.list_pages(), pages_listed);  // all of it from the watch
  EXPECT_EQ(api.watches(), 1);

  // Versions compacted away end the watch; resuming gets 410, and the standby lists again and
  // goes on following: a second pod bound and deleted.
  api.Compact();
  json second = SharePod(2, "10Gi", "0.1");
  second["spec"]["nodeName"] = "gpu-h100-1";
  second["status"]["phase"] = "Running";
  second["metadata"]["annotations"][kGpuAssignmentAnnotation] =
      R"({"node": "gpu-h100-1", "gpus": [3], "milliPerGpu": 130})";
  api.AddPod(second);
  const std::string second_uid = second["metadata"]["uid"];
  EXPECT_TRUE(Eventually([&] { return standby.svc->Held(second_uid).has_value(); }));
  EXPECT_GT(api.list_pages(), pages_listed);
  // The list's problems are logged after it is applied: the pod may be held a moment before.
  EXPECT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> l(mu);
    return logged.size() >= 4;
  }));
  {
    std::lock_guard<std::mutex> l(mu);
    // The 410, then the list's problem again (the edited pod).
    ASSERT_EQ(logged.size(), 4u) << absl::StrJoin(logged, "\n");
    EXPECT_THAT(logged[2], HasSubstr("watch pods: resourceVersion "));
    EXPECT_THAT(logged[2], HasSubstr(" is gone (410: too old resource version"));
    EXPECT_THAT(logged[3], HasSubstr("resync: pod inference/edited on gpu-h100-1: "));
  }
  api.DeletePod("inference/chat-2");
  EXPECT_TRUE(Eventually([&] { return !standby.svc->Held(second_uid).has_value(); }));
  // Applied from the watch: the bind (two events since every pod is watched: the annotation on the
  // pending pod, then the binding), the edited pod, the bookmark, the end and the deletion (the
  // odd event is skipped), and the second pod's addition unless the relist after the 410 already
  // had it (which of the two comes first is a race: 7 was seen under load, 6 alone).
  const std::string metrics = standby.svc->Metrics().body;
  const std::string key = "\ntessera_extender_pod_events_total ";
  ASSERT_THAT(metrics, HasSubstr(key));
  int64_t events = -1;
  ASSERT_TRUE(absl::SimpleAtoi(
      metrics.substr(metrics.find(key) + key.size(),
                     metrics.find('\n', metrics.find(key) + 1) - metrics.find(key) - key.size()),
      &events));
  EXPECT_GE(events, 6);
  EXPECT_LE(events, 7);

  // A stop ends an idle watch long before its 30 s.
  auto asked = std::chrono::steady_clock::now();
  stop = true;
  follow.join();
  EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(5));
  EXPECT_TRUE(api.Problems().empty()) << api.Problems()[0];
}

// Runs svc.Follow for `run`; returns what it logged.
std::vector<std::string> FollowFor(ExtenderService& svc, std::chrono::milliseconds run,
                                   absl::Duration resync = absl::Seconds(1),
                                   absl::Duration node_resync = absl::ZeroDuration()) {
  std::atomic<bool> stop{false};
  std::vector<std::string> logged;
  std::thread follow([&] {
    RealClock clock;
    svc.Follow(clock, resync, node_resync, stop,
               [&](const std::string& line) { logged.push_back(line); });
  });
  std::this_thread::sleep_for(run);
  stop = true;
  follow.join();
  return logged;
}

// --resync: a list every period, the pods watched in between (a new watch after each list).
TEST(Extender, FollowListsEveryResyncAndWatchesBetween) {
  FakeApi api;
  Served ext(api.WriteKubeconfig(TempDir()));
  ASSERT_TRUE(ext.svc->Sync().ok());
  ASSERT_EQ(api.list_pages(), 2);  // nodes, pods
  std::vector<std::string> logged = FollowFor(*ext.svc, std::chrono::milliseconds(2500));
  // Lists at about 1 s and 2 s (each a page of nodes and one of pods), a watch after each.
  EXPECT_GE(api.list_pages(), 2 + 2 * 2);
  EXPECT_LE(api.list_pages(), 2 + 2 * 3);
  const int lists = (api.list_pages() - 2) / 2;
  EXPECT_GE(api.watches(), lists);      // one after the start-up list and one after each since,
  EXPECT_LE(api.watches(), lists + 1);  // unless the stop came between a list and its watch
  EXPECT_TRUE(logged.empty()) << logged[0];
  EXPECT_TRUE(api.Problems().empty()) << api.Problems()[0];
}

// Started from --nodes/--pods files, with an API: it lists at once, then watches; no failure.
TEST(Extender, FollowAfterARebuildFromFilesListsFirst) {
  FakeApi api;
  Served ext(api.WriteKubeconfig(TempDir()));
  absl::StatusOr<OnlineNode> node = DecodeNode(ExtenderFixture("node-h100.json"));
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_TRUE(ext.svc->Rebuild({*node}, {}).empty());
  std::vector<std::string> logged = FollowFor(*ext.svc, std::chrono::milliseconds(500));
  EXPECT_TRUE(logged.empty()) << logged[0];
  EXPECT_EQ(api.list_pages(), 2);  // nodes, pods
  EXPECT_EQ(api.watches(), 1);
  EXPECT_THAT(ext.svc->Metrics().body,
              HasSubstr("\ntessera_extender_api_failures_total{op=\"watch\"} 0\n"));
}

// svc.Follow on a thread of its own, until Stop (or destruction); Stop returns what it logged.
class Following {
 public:
  Following(ExtenderService& svc, absl::Duration resync, absl::Duration node_resync)
      : thread_([this, &svc, resync, node_resync] {
          RealClock clock;
          svc.Follow(clock, resync, node_resync, stop_, [this](const std::string& line) {
            std::lock_guard<std::mutex> l(mu_);
            logged_.push_back(line);
          });
        }) {}
  ~Following() { Stop(); }
  std::vector<std::string> Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> l(mu_);
    return logged_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::string> logged_;
  std::thread thread_;  // last: started once the rest is in place
};

// A pod running on gpu-l4-1 with the GPU it was given recorded.
json PodOnL4(int i) {
  json p = SharePod(i, "10Gi", "100m");
  p["spec"]["nodeName"] = "gpu-l4-1";
  p["status"]["phase"] = "Running";
  p["metadata"]["annotations"][kGpuAssignmentAnnotation] =
      EncodeAssignment({.node = "gpu-l4-1", .gpus = {0}, .milli_per_gpu = 450, .user = ""});
  return p;
}

// --node-resync: the nodes are watched between their lists. A node that joins, changes or
// leaves is seen at once, without a list (before, up to 30 s later, with every node listed every
// 30 s); one that a running pod still names stays while the pod holds GPUs there, and goes with
// the pod.
TEST(Extender, FollowWatchesNodesBetweenTheirLists) {
  FakeApi api;
  api.AddPod(PodOnL4(0));
  Served ext(api.WriteKubeconfig(TempDir()));
  ASSERT_TRUE(ext.svc->Sync().ok());
  ASSERT_TRUE(ext.svc->Held(SharePodUid(0)).has_value());
  Following following(*ext.svc, absl::Seconds(30), absl::Seconds(30));
  ASSERT_TRUE(Eventually([&] { return api.node_watches() == 1 && api.watches() == 1; }));
  auto total = [&] { return Metric(ext, "tessera_extender_gpu_milli{state=\"total\"}"); };
  ASSERT_EQ(total(), 10000);

  json joined = ExtenderFixture("node-l4.json");
  joined["metadata"]["name"] = "gpu-l4-2";
  joined["metadata"]["labels"]["kubernetes.io/hostname"] = "gpu-l4-2";
  api.PutNode(joined);
  EXPECT_TRUE(Eventually([&] { return Metric(ext, "tessera_extender_nodes") == 4; }));
  EXPECT_EQ(total(), 12000);

  json shrunk = ExtenderFixture("node-h100.json");  // four of its GPUs taken out of service
  shrunk["metadata"]["labels"]["nvidia.com/gpu.count"] = "4";
  shrunk["status"]["capacity"]["nvidia.com/gpu"] = "4";
  shrunk["status"]["allocatable"]["nvidia.com/gpu"] = "4";
  api.PutNode(shrunk);
  EXPECT_TRUE(Eventually([&] { return total() == 8000; }));

  api.DeleteNode("gpu-l4-2");
  api.DeleteNode("gpu-l4-1");  // its pod is collected after it
  EXPECT_TRUE(Eventually([&] { return Metric(ext, "tessera_extender_node_events_total") == 4; }));
  EXPECT_EQ(Metric(ext, "tessera_extender_nodes"), 3);
  EXPECT_TRUE(ext.svc->Held(SharePodUid(0)).has_value());
  api.DeletePod("inference/chat-0");  // the node goes with it
  EXPECT_TRUE(Eventually([&] { return Metric(ext, "tessera_extender_nodes") == 2; }));
  EXPECT_FALSE(ext.svc->Held(SharePodUid(0)).has_value());
  EXPECT_EQ(total(), 4000);

  EXPECT_EQ(api.node_list_pages(), 1);  // all of it from the watch: no list since the first
  EXPECT_EQ(api.list_pages(), 2);
  std::vector<std::string> logged = following.Stop();
  EXPECT_TRUE(logged.empty()) << logged[0];
  EXPECT_TRUE(api.Problems().empty()) << api.Problems()[0];
}

// --node-resync shorter than --resync: the nodes are listed every node_resync, with a watch after
// each; the pods are not listed. A node deleted while a pod still named it is forgotten at the
// next node list after the pod is gone.
TEST(Extender, FollowListsNodesEveryNodeResync) {
  FakeApi api;
  api.AddPod(PodOnL4(0));
  Served ext(api.WriteKubeconfig(TempDir()));
  ASSERT_TRUE(ext.svc->Sync().ok());
  ASSERT_EQ(api.list_pages(), 2);  // nodes, pods
  api.DeleteNode("gpu-l4-1");
  api.DeletePod("inference/chat-0");
  std::vector<std::string> logged =
      FollowFor(*ext.svc, std::chrono::milliseconds(2500), absl::Seconds(3), absl::Seconds(1));
  EXPECT_TRUE(logged.empty()) << logged[0];
  // Node lists at about 1 s and 2 s; the pods' list is not due before 3 s.
  EXPECT_GE(api.node_list_pages(), 1 + 2);
  EXPECT_LE(api.node_list_pages(), 1 + 3);
  EXPECT_EQ(api.list_pages() - 2, api.node_list_pages() - 1);  // no pod list among them
  EXPECT_GE(api.node_watches(), api.node_list_pages() - 1);
  EXPECT_LE(api.node_watches(), api.node_list_pages());
  EXPECT_EQ(api.watches(), 1);  // the pods': one watch for the whole time
  EXPECT_EQ(Metric(ext, "tessera_extender_nodes"), 2);
  EXPECT_TRUE(api.Problems().empty()) << api.Problems()[0];
}

// Both versions compacted away (410): the nodes and the pods are each listed again at once, on
// their own, and watched from their new lists.
TEST(Extender, FollowListsEachCollectionAgainWhenItsVersionIsGone) {
  FakeApi api;
  Served ext(api.WriteKubeconfig(TempDir()));
  ASSERT_TRUE(ext.svc->Sync().ok());
  Following following(*ext.svc, absl::Seconds(30), absl::Seconds(30));
  ASSERT_TRUE(Eventually([&] { return api.node_watches() == 1 && api.watches() == 1; }));
  api.Compact();
  EXPECT_TRUE(Eventually([&] { return api.node_watches() == 2 && api.watches() == 2; }));
  EXPECT_EQ(api.node_list_pages(), 2);
  EXPECT_EQ(api.list_pages(), 4);  // nodes and pods at the start, then each once more
  std::vector<std::string> logged = following.Stop();
  EXPECT_EQ(logged.size(), 2u);
  EXPECT_THAT(absl::StrJoin(logged, "\n"), HasSubstr("watch nodes: resourceVersion "));
  EXPECT_THAT(absl::StrJoin(logged, "\n"), HasSubstr("watch pods: resourceVersion "));
  EXPECT_EQ(Metric(ext, "tessera_extender_nodes"), 3);
}

// Watches the server ends at once are asked again after a back-off, not in a tight loop.
TEST(Extender, FollowBacksOffWatchesEndedAtOnce) {
  FakeApi api;
  Served ext(api.WriteKubeconfig(TempDir()));
  ASSERT_TRUE(ext.svc->Sync().ok());
  api.EndWatchesAtOnce();
  std::vector<std::string> logged =
      FollowFor(*ext.svc, std::chrono::milliseconds(2500), absl::Seconds(30));
  EXPECT_TRUE(logged.empty()) << logged[0];
  // At 0, then after 1 s, then after 2 s more (3 s: past the end).
  EXPECT_GE(api.watches(), 2);
  EXPECT_LE(api.watches(), 3);
}

// An API that refuses: the failed lists and watches are logged, counted for the alert, and
// retried after a back-off.
TEST(Extender, FollowCountsFailedListsAndWatches) {
  FakeApi api;
  Served ext(api.WriteKubeconfig(TempDir()));
  ASSERT_TRUE(ext.svc->Sync().ok());
  api.GoUnavailable();
  std::vector<std::string> logged = FollowFor(*ext.svc, std::chrono::milliseconds(2500));
  // The watch fails at once, then waits 1 s; the list due at 1 s fails and waits 2 s.
  ASSERT_GE(logged.size(), 2u);
  EXPECT_THAT(logged[0], HasSubstr("watch: watch pods: HTTP 503: etcdserver: leader changed"));
  EXPECT_THAT(logged[1], HasSubstr("resync: list nodes: HTTP 503: etcdserver: leader changed"));
  std::string metrics = ext.svc->Metrics().body;
  EXPECT_THAT(metrics, HasSubstr("\ntessera_extender_api_failures_total{op=\"watch\"} 1\n"));
  EXPECT_THAT(metrics, HasSubstr("\ntessera_extender_api_failures_total{op=\"list\"} 1\n"));
}

// A node that left the cluster (the cluster autoscaler scaled it down) is forgotten at the next
// list; before, it counted in the extender's GPU total, and its gauges, for good.
TEST(Extender, SyncForgetsNodesThatLeft) {
  FakeApi api;
  Served ext(api.WriteKubeconfig(TempDir()));
  ASSERT_TRUE(ext.svc->Sync().ok());
  std::string before = ext.svc->Metrics().body;
  EXPECT_THAT(before, HasSubstr("\ntessera_extender_nodes 3\n"));
  EXPECT_THAT(before, HasSubstr("\ntessera_extender_gpu_milli{state=\"total\"} 10000\n"));
  api.DeleteNode("gpu-l4-1");
  absl::StatusOr<std::vector<std::string>> problems = ext.svc->Sync();
  ASSERT_TRUE(problems.ok()) << problems.status();
  EXPECT_TRUE(problems->empty()) << (*problems)[0];
  std::string after = ext.svc->Metrics().body;
  EXPECT_THAT(after, HasSubstr("\ntessera_extender_nodes 2\n"));
  EXPECT_THAT(after, HasSubstr("\ntessera_extender_gpu_milli{state=\"total\"} 8000\n"));
}

TEST(KubeClient, GoesThroughTheKubeconfigsProxyUrl) {
  // A forward proxy is sent the absolute URL (RFC 9112's absolute-form); this one answers
  // itself. The API server's name does not resolve, so only the proxy can have answered.
  std::mutex mu;
  std::string target;
  testing::LocalHttpServer proxy([&](httplib::Server& s) {
    s.Get(R"(http://.*)", [&](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu);
      target = req.path;
      res.set_content(R"({"kind":"NodeList","items":[]})", "application/json");
    });
  });
  absl::StatusOr<KubeConfig> cfg = DecodeKubeconfig(
      "kc", absl::StrCat("current-context: a\nclusters: [{name: c, cluster: {server: "
                         "'http://kube.invalid:6443', proxy-url: '",
                         proxy.url(), "'}}]\ncontexts: [{name: a, context: {cluster: c}}]\n"));
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->proxy_url, proxy.url());
  KubeClient kube(*cfg);
  absl::StatusOr<KubeResponse> r = kube.Get("/api/v1/nodes");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(target, "http://kube.invalid:6443/api/v1/nodes");
}

// tls-server-name: an API server reached by an address its certificate does not hold (a tunnel,
// a load balancer's IP) is verified for the name given, as client-go does; without it, the same
// kubeconfig fails on the certificate.
TEST(KubeClient, VerifiesTheApiServerForTheKubeconfigsTlsServerName) {
  testing::TestCerts pki("DNS:kubernetes.default.svc");
  ASSERT_TRUE(pki.ok()) << pki.error();
  testing::LocalHttpsServer https(
      [](httplib::SSLServer& s) {
        s.Get("/api/v1/nodes", [](const httplib::Request&, httplib::Response& res) {
          res.set_content(R"({"kind":"NodeList","items":[]})", "application/json");
        });
      },
      pki.server_cert().c_str(), pki.server_key().c_str());
  auto kubeconfig = [&](const std::string& extra) {
    return absl::StrCat(
        "current-context: a\nclusters: [{name: c, cluster: {server: "
        "'https://127.0.0.1:",
        https.port(), "', certificate-authority: '", pki.ca(), "'", extra,
        "}}]\ncontexts: [{name: a, context: {cluster: c}}]\n");
  };
  absl::StatusOr<KubeConfig> named =
      DecodeKubeconfig("kc", kubeconfig(", tls-server-name: kubernetes.default.svc"));
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->tls_server_name, "kubernetes.default.svc");
  absl::StatusOr<KubeResponse> r = KubeClient(*named).Get("/api/v1/nodes");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);

  absl::StatusOr<KubeConfig> unnamed = DecodeKubeconfig("kc", kubeconfig(""));
  ASSERT_TRUE(unnamed.ok()) << unnamed.status();
  EXPECT_EQ(KubeClient(*unnamed).Get("/api/v1/nodes").status().code(),
            absl::StatusCode::kUnavailable);
}

// A watch stream is cut into its lines wherever the pieces fall, and a last line the server did
// not end with a newline is handed over too.
TEST(KubeClient, WatchHandsOverEveryLine) {
  testing::LocalHttpServer server([](httplib::Server& s) {
    s.Get("/api/v1/pods", [](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("application/json", [](size_t, httplib::DataSink& sink) {
        for (const char* piece : {"{\"a\":", "1}\n{\"b\"", ":2}\n\n{\"c\":3}"}) {
          if (!sink.write(piece, std::strlen(piece))) return false;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        sink.done();
        return true;
      });
    });
  });
  KubeConfig cfg;
  cfg.server = server.url();
  KubeClient kube(cfg);
  std::vector<std::string> lines;
  absl::StatusOr<KubeResponse> r = kube.Watch(
      "/api/v1/pods?watch=1", 5,
      [&](absl::string_view line) {
        lines.emplace_back(line.data(), line.size());
        return true;
      },
      nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(lines, (std::vector<std::string>{R"({"a":1})", R"({"b":2})", R"({"c":3})"}));
}

// Lists are read in pages (limit and continue), as the API server chunks them; an expired token
// restarts the list.
TEST(Extender, SyncListsInPagesAndRestartsOnAnExpiredToken) {
  FakeApi api;
  for (int i = 0; i < 7; ++i) {
    json p = SharePod(i, "10Gi", "100m");
    p["spec"]["nodeName"] = "gpu-h100-1";
    p["status"]["phase"] = "Running";
    p["metadata"]["annotations"][kGpuAssignmentAnnotation] =
        EncodeAssignment({.node = "gpu-h100-1", .gpus = {i}, .milli_per_gpu = 130, .user = ""});
    api.AddPod(p);
  }
  api.CapPagesAt(2);  // 3 nodes in 2 pages, 7 pods in 4
  Served ext(api.WriteKubeconfig(TempDir()));
  absl::StatusOr<std::vector<std::string>> problems = ext.svc->Sync();
  ASSERT_TRUE(problems.ok()) << problems.status();
  EXPECT_TRUE(problems->empty()) << (*problems)[0];
  EXPECT_EQ(ext.svc->held_pods(), 7);
  EXPECT_EQ(api.list_pages(), 6);
  EXPECT_THAT(ext.svc->Metrics().body, HasSubstr("\ntessera_extender_nodes 3\n"));

  api.ExpireNextContinue();  // the nodes' second page: the node list starts again
  problems = ext.svc->Sync();
  ASSERT_TRUE(problems.ok()) << problems.status();
  EXPECT_EQ(ext.svc->held_pods(), 7);
  EXPECT_EQ(api.list_pages(), 6 + 1 + 6);
  EXPECT_TRUE(api.Problems().empty()) << api.Problems()[0];
}

TEST(Extender, BindOfAPodNeverFilteredFetchesItAndFailedBindReleases) {
  FakeApi api;
  Served ext(api.WriteKubeconfig(TempDir()));
  json pod = SharePod(1, "40Gi", "0.3");
  api.AddPod(pod);
  api.FailBindingOf("chat-1");
  json args = {{"podName", "chat-1"},
               {"podNamespace", "inference"},
               {"podUID", pod["metadata"]["uid"]},
               {"node", "gpu-h100-1"}};
  httplib::Result r = ext.Post("bind", args.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_THAT(json::parse(r->body)["error"].get<std::string>(), HasSubstr("already assigned"));
  EXPECT_EQ(ext.svc->held_pods(), 0);  // released
  // A pod the API does not have.
  args["podName"] = "ghost";
  r = ext.Post("bind", args.dump());
  ASSERT_TRUE(r);
  EXPECT_THAT(json::parse(r->body)["error"].get<std::string>(), HasSubstr("not found"));
}

TEST(Extender, ConcurrentBindsNeverOvercommitAGpu) {
  FakeApi api;
  Served ext(api.WriteKubeconfig(TempDir()));
  // 40 pods asking for half an H100 each (39Gi of 81559 MiB is 490 milli, compute 500) on one
  // 8-GPU node: exactly 16 fit.
  constexpr int kPods = 40;
  for (int i = 0; i < kPods; ++i) api.AddPod(SharePod(i, "39Gi", "0.5"));
  std::atomic<int> ok{0}, refused{0}, broken{0};
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kPods; i += 8) {
        json pod = SharePod(i, "39Gi", "0.5");
        httplib::Result f = ext.Post("filter", ArgsWithNodes(pod, {"node-h100.json"}).dump());
        httplib::Result p = ext.Post("prioritize", ArgsWithNodes(pod, {"node-h100.json"}).dump());
        json args = {{"podName", pod["metadata"]["name"]},
                     {"podNamespace", "inference"},
                     {"podUID", pod["metadata"]["uid"]},
                     {"node", "gpu-h100-1"}};
        httplib::Result b = ext.Post("bind", args.dump());
        if (!f || !p || !b || f->status != 200 || p->status != 200 || b->status != 200) {
          ++broken;
          continue;
        }
        std::string error = json::parse(b->body)["error"];
        (error.empty() ? ok : refused)++;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(broken.load(), 0);
  EXPECT_EQ(ok.load(), 16);
  EXPECT_EQ(refused.load(), kPods - 16);
  std::map<int, int64_t> per_gpu;
  int bound = 0;
  for (const json& p : api.Pods()) {
    if (!p["spec"].contains("nodeName")) continue;
    ++bound;
    absl::StatusOr<Assignment> a =
        DecodeAssignment(p["metadata"]["annotations"][kGpuAssignmentAnnotation].get<std::string>());
    ASSERT_TRUE(a.ok());
    for (int g : a->gpus) per_gpu[g] += a->milli_per_gpu;
  }
  EXPECT_EQ(bound, 16);
  EXPECT_EQ(per_gpu.size(), 8u);
  for (const auto& [g, milli] : per_gpu) EXPECT_LE(milli, 1000) << "GPU " << g;
  EXPECT_THAT(ext.svc->Metrics().body, HasSubstr("tessera_extender_binds_total{result=\"ok\"} 16"));
  EXPECT_TRUE(api.Problems().empty()) << api.Problems()[0];
}

}  // namespace
}  // namespace tessera::adapters
