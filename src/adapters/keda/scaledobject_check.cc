#include "adapters/keda/scaledobject_check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "adapters/k8s/yaml_reader.h"
#include "autoscale/kube_defaults.h"

namespace tessera::adapters {
namespace {

using autoscale::kHpaScaleDownWindowS;
using autoscale::kKedaCooldownPeriodS;
using autoscale::kKedaMaxReplicaCount;
using autoscale::kKedaPollingIntervalS;
constexpr double kHpaSyncS = autoscale::kHpaSyncS;

// One direction of HPA's behavior: the most replicas it lets a sync go to (up) or the fewest
// (down) from `current`, by its policies and selectPolicy, as kube-controller-manager computes
// them with the period's start at `current`.
struct HpaRules {
  std::vector<std::pair<std::string, int64_t>> policies;  // (Pods | Percent, value)
  int64_t longest_period_s = 15;
  std::string select = "Max";  // Max | Min | Disabled
  int64_t window_s = 0;

  int64_t Limit(int64_t current, bool up) const {
    if (select == "Disabled" || policies.empty()) return current;
    std::optional<int64_t> pick;
    for (const auto& [type, value] : policies) {
      int64_t n = 0;
      if (type == "Pods") {
        n = up ? current + value : current - value;
      } else {
        const double f =
            static_cast<double>(current) * (up ? 1 + value / 100.0 : 1 - value / 100.0);
        n = static_cast<int64_t>(up ? std::ceil(f) : std::floor(f));
      }
      // Max: the policy allowing the most change; Min: the least.
      const bool more = up ? n > pick.value_or(n - 1) : n < pick.value_or(n + 1);
      if (!pick || (select == "Max") == more) pick = n;
    }
    return std::max<int64_t>(up ? current : 0, *pick);
  }
};

class Checker {
 public:
  Checker(const ScalerConfig& config, PairingReport* report) : config_(config), report_(report) {}

  void Object(const Field& so) {
    const std::string name = so.Get("metadata").Get("name").StringOr("").value_or("");
    const std::string ns = so.Get("metadata").Get("namespace").StringOr("default").value_or("");
    object_ = absl::StrCat(ns, "/", name.empty() ? "(unnamed)" : name);
    index_ = report_->objects.size();  // each call adds one entry below
    const Field spec = so.Get("spec");
    absl::StatusOr<std::vector<Field>> triggers = spec.Get("triggers").Items();
    if (!triggers.ok()) {
      Refused(spec.Get("triggers"), triggers.status());
      report_->objects.push_back({object_, ""});
      return;
    }
    // Tessera's triggers: external scalers told which service to answer for.
    std::vector<Field> ours, others;
    for (const Field& t : *triggers) {
      const std::string type = t.Get("type").StringOr("").value_or("");
      const bool external = type == "external" || type == "external-push";
      (external && t.Get("metadata").Get("service").present() ? ours : others).push_back(t);
    }
    if (ours.empty()) {
      report_->objects.push_back({object_, ""});
      return;
    }
    const Field& trigger = ours.front();
    const Field service_field = trigger.Get("metadata").Get("service");
    const std::string service = service_field.StringOr("").value_or("");
    report_->objects.push_back({object_, service});
    const ServiceConfig* svc = config_.Find(service);
    if (svc == nullptr) {
      Error(service_field,
            absl::StrCat("service \"", service,
                         "\" is not in the scaler's config (its services: ", config_.ServiceNames(),
                         "): the scaler answers GetMetricSpec and GetMetrics NOT_FOUND, so KEDA "
                         "cannot scale ",
                         object_));
    }
    for (size_t i = 1; i < ours.size(); ++i) {
      Warning(ours[i],
              "a second trigger for Tessera: HPA takes the highest of the two services' "
              "counts; pair one ScaledObject with one service");
    }
    Trigger(trigger);
    for (const Field& t : others) {
      Warning(t, absl::StrCat(
                     "another trigger (", t.Get("type").StringOr("?").value_or("?"),
                     "): HPA scales to the highest of the triggers' counts, so it can hold "
                     "replicas Tessera released (its scale-downs and scale to zero wait for it)"));
    }
    if (spec.Get("advanced").Get("scalingModifiers").present()) {
      Warning(spec.Get("advanced").Get("scalingModifiers"),
              "scalingModifiers replace the triggers' metrics with the formula's, which is not "
              "Tessera's count (and are not applied in a fallback)");
    }
    if (svc != nullptr) Service(spec, *svc);
    Fallback(spec);
    Behavior(spec.Get("advanced").Get("horizontalPodAutoscalerConfig").Get("behavior"), svc);
  }

 private:
  void Trigger(const Field& t) {
    const Field type = t.Get("metricType");
    const std::string metric_type = type.StringOr("AverageValue").value_or("");
    if (metric_type != "AverageValue") {
      Error(type, absl::StrCat(metric_type,
                               ": Tessera's metric is the replica count with target 1, which "
                               "HPA gives back unchanged only as AverageValue (the default); "
                               "with Value it multiplies the replicas there by the count, and "
                               "KEDA's fallback needs AverageValue too"));
    }
    const Field meta = t.Get("metadata");
    if (!meta.Get("scalerAddress").present()) {
      Error(meta.Get("scalerAddress"),
            "missing: the HOST:PORT of `tessera scaler --listen` (the shipped Service: "
            "tessera-scaler.tessera-system.svc.cluster.local:9095)");
    }
    const std::string tls = meta.Get("enableTLS").StringOr("false").value_or("");
    const bool auth = t.Get("authenticationRef").present();
    const bool serves_tls = !config_.tls_cert_file.empty();
    if (serves_tls && tls != "true" && !auth) {
      Error(meta.Get("enableTLS"),
            "the scaler serves TLS (its config's tls) and KEDA would connect in plaintext: set "
            "enableTLS \"true\" and an authenticationRef whose TriggerAuthentication gives caCert");
    } else if (!serves_tls && tls == "true") {
      Error(meta.Get("enableTLS"),
            "\"true\", and the scaler serves plaintext (its config has no tls): KEDA's TLS "
            "handshake fails");
    }
    if (serves_tls && !config_.tls_client_ca_file.empty() && !auth) {
      Error(t.Get("authenticationRef"),
            "missing: the scaler asks for client certificates (tls.clientCAFile); reference a "
            "TriggerAuthentication that gives tlsClientCert and tlsClientKey");
    }
  }

  void Service(const Field& spec, const ServiceConfig& svc) {
    const autoscale::AutoscalePolicy& p = svc.policy;
    const Field min_field = spec.Get("minReplicaCount");
    const Field max_field = spec.Get("maxReplicaCount");
    const int64_t keda_min = Int(min_field, 0);
    const int64_t keda_max = Int(max_field, kKedaMaxReplicaCount);
    if (keda_min > 0 && p.min_replicas == 0) {
      Warning(min_field, absl::StrCat(keda_min,
                                      ": the service never scales to zero, which its "
                                      "minReplicas 0 allows; set 0 here"));
    } else if (keda_min > p.min_replicas) {
      Warning(min_field, absl::StrCat(keda_min, ": above the service's minReplicas ",
                                      p.min_replicas, ", so KEDA's floor is the one that holds"));
    }
    if (keda_max < p.max_replicas) {
      Warning(max_field, absl::StrCat(keda_max, max_field.present() ? "" : " (KEDA's default)",
                                      ": below the service's maxReplicas ", p.max_replicas,
                                      ", so HPA stops Tessera's scale-ups there"));
    }
    if (keda_min > 0 || p.min_replicas > 0) return;  // never at zero: the rest is about zero
    SecondsOver(spec.Get("cooldownPeriod"), kKedaCooldownPeriodS,
                0.1 * absl::ToDoubleSeconds(p.idle_timeout),
                absl::StrCat(": KEDA scales to zero this long after Tessera's IsActive turned "
                             "false, which it does only after the service's idleTimeout (",
                             absl::FormatDuration(p.idle_timeout),
                             ") already passed: an idle service is held for both; the shipped "
                             "ScaledObject sets 30"));
    SecondsOver(
        spec.Get("pollingInterval"), kKedaPollingIntervalS,
        0.25 * absl::ToDoubleSeconds(p.cold_start),
        absl::StrCat(": at zero KEDA asks IsActive this often, so the first requests "
                     "wait up to this on top of the cold start (coldStart ",
                     absl::FormatDuration(p.cold_start), "); the shipped ScaledObject sets 10"));
  }

  // A field of seconds (KEDA's default when left out) above `bound_s`: a warning with its value
  // and `why`.
  void SecondsOver(const Field& f, int64_t dflt, double bound_s, const std::string& why) {
    const int64_t seconds = Int(f, dflt);
    if (seconds > bound_s) {
      Warning(f, absl::StrCat(seconds, " s", f.present() ? "" : " (KEDA's default)", why));
    }
  }

  void Fallback(const Field& spec) {
    const Field fallback = spec.Get("fallback");
    if (!fallback.present()) return;  // HPA keeps the count while reads fail
    const Field behavior = fallback.Get("behavior");
    const std::string b = behavior.StringOr("static").value_or("");
    const int64_t replicas = Int(fallback.Get("replicas"), 0);
    if (b == "static" || b == "currentReplicasIfLower") {
      Warning(
          behavior.present() ? behavior : fallback,
          absl::StrCat("behavior ", b, behavior.present() ? "" : " (KEDA's default)",
                       ": while Tessera answers UNAVAILABLE (Prometheus down or stale) KEDA sets "
                       "",
                       b == "static" ? "exactly" : "at most", " fallback.replicas (", replicas,
                       "): a loaded service is scaled down to it for the outage; set "
                       "currentReplicasIfHigher (KEDA 2.17+), or leave fallback out (HPA keeps the "
                       "count). Measured in docs/autoscaling.md, \"When Prometheus is down\""));
    } else if (b != "currentReplicas" && b != "currentReplicasIfHigher") {
      Error(behavior, absl::StrCat(b,
                                   ": expected static, currentReplicas, "
                                   "currentReplicasIfHigher or currentReplicasIfLower"));
    }
  }

  void Behavior(const Field& behavior, const ServiceConfig* svc) {
    const HpaRules up = Rules(behavior.Get("scaleUp"), /*up=*/true);
    const HpaRules down = Rules(behavior.Get("scaleDown"), /*up=*/false);
    const Field down_window = behavior.Get("scaleDown").Get("stabilizationWindowSeconds");
    if (down.window_s > 0) {
      Warning(down_window.present() ? down_window : behavior.Get("scaleDown"),
              absl::StrCat(down.window_s, " s", down_window.present() ? "" : " (HPA's default)",
                           ": HPA holds its highest recommendation this long on top of Tessera's "
                           "scaleDownWindow, so replicas stay up longer than Tessera decided; "
                           "set 0"));
    }
    const Field up_window = behavior.Get("scaleUp").Get("stabilizationWindowSeconds");
    if (up.window_s > 0) {
      Warning(up_window, absl::StrCat(up.window_s,
                                      " s: HPA waits this long before it follows a "
                                      "scale-up Tessera decided; set 0"));
    }
    if (svc == nullptr) return;
    Steps(behavior.Get("scaleUp"), up, /*up=*/true, svc->policy);
    Steps(behavior.Get("scaleDown"), down, /*up=*/false, svc->policy);
  }

  // What Tessera may decide within one 15 s sync (its decisions every pollInterval each step
  // from the one before: 1 -> 5 -> 10 -> 20 at the defaults' 5 s) against what HPA's rules for
  // that direction let the sync do, from a few sizes within the service's floor and ceiling: a
  // warning at the first where HPA is slower.
  void Steps(const Field& dir, const HpaRules& rules, bool up,
             const autoscale::AutoscalePolicy& p) {
    const int decisions = std::max(
        1, static_cast<int>(
               std::floor(kHpaSyncS / absl::ToDoubleSeconds(config_.poll_interval) + 1e-9)));
    const int64_t step = up ? p.scale_up_step : p.scale_down_step;
    const double ratio = up ? p.scale_up_ratio : p.scale_down_ratio;
    for (int64_t current : {1, 4, 16, 64}) {
      if (current < p.min_replicas || (!up && current == p.min_replicas)) continue;
      if (current > p.max_replicas || (up && current == p.max_replicas)) break;
      int64_t want = current;
      for (int d = 0; d < decisions; ++d) {
        const auto by = std::max<int64_t>(
            step, static_cast<int64_t>(up ? std::ceil(ratio * want) : std::floor(ratio * want)));
        want = up ? std::min<int64_t>(p.max_replicas, want + by)
                  : std::max<int64_t>(p.min_replicas, want - by);
      }
      const int64_t allowed = rules.Limit(current, up);
      if (up ? allowed >= want : allowed <= want) continue;
      Warning(
          dir,
          absl::StrFormat(
              "HPA lets one sync go from %d %sto %d replicas%s where Tessera may decide %d%s "
              "(%s %d, %s %g): its %s are slowed; the shipped ScaledObject allows %s per 15 s",
              current, up ? "" : "down ", allowed,
              rules.longest_period_s > kHpaSyncS
                  ? absl::StrCat(" (its policies' period ", rules.longest_period_s, " s)")
                  : std::string(),
              want,
              decisions > 1
                  ? absl::StrFormat(" within it (%d decisions, pollInterval %s)", decisions,
                                    absl::FormatDuration(config_.poll_interval))
                  : std::string(),
              up ? "scaleUpStep" : "scaleDownStep", step, up ? "scaleUpRatio" : "scaleDownRatio",
              ratio, up ? "scale-ups" : "releases", up ? "1000% or 100 pods" : "100%"));
      return;
    }
  }

  // One direction's rules, HPA's defaults where left out (scale-up: 100% or 4 pods per 15 s, no
  // window; scale-down: 100% per 15 s, a 300 s window).
  HpaRules Rules(const Field& dir, bool up) {
    HpaRules r;
    r.window_s = Int(dir.Get("stabilizationWindowSeconds"), up ? 0 : kHpaScaleDownWindowS);
    const Field select = dir.Get("selectPolicy");
    r.select = select.StringOr("Max").value_or("");
    if (r.select != "Max" && r.select != "Min" && r.select != "Disabled") {
      Error(select, absl::StrCat("\"", r.select, "\": expected Max, Min or Disabled"));
      r.select = "Max";
    }
    absl::StatusOr<std::vector<Field>> policies = dir.Get("policies").Items();
    if (!policies.ok()) {
      Refused(dir.Get("policies"), policies.status());
    } else if (!dir.Get("policies").present()) {
      r.policies = up ? std::vector<std::pair<std::string, int64_t>>{{"Percent", 100}, {"Pods", 4}}
                      : std::vector<std::pair<std::string, int64_t>>{{"Percent", 100}};
    } else {
      for (const Field& pol : *policies) {
        const std::string type = pol.Get("type").StringOr("").value_or("");
        if (type != "Pods" && type != "Percent") {
          Error(pol.Get("type"), absl::StrCat("\"", type, "\": expected Pods or Percent"));
          continue;
        }
        r.policies.emplace_back(type, Int(pol.Get("value"), 0));
        r.longest_period_s = std::max(r.longest_period_s, Int(pol.Get("periodSeconds"), 15));
      }
    }
    return r;
  }

  // An integer field, or `dflt` when absent; a malformed one is an error finding (KEDA's CRD
  // refuses it) and reads as `dflt`.
  int64_t Int(const Field& f, int64_t dflt) {
    absl::StatusOr<std::optional<int64_t>> v = f.OptionalInt(0, int64_t{1} << 31);
    if (!v.ok()) {
      Refused(f, v.status());
      return dflt;
    }
    return v->value_or(dflt);
  }

  void Error(const Field& f, std::string message) { Finding(true, f, std::move(message)); }
  void Warning(const Field& f, std::string message) { Finding(false, f, std::move(message)); }
  // The reader's own error at `f` (a field KEDA's CRD would refuse): its message after the
  // location it starts with.
  void Refused(const Field& f, const absl::Status& s) {
    Error(f, std::string(absl::StripPrefix(s.message(), f.Location() + ": ")));
  }
  void Finding(bool error, const Field& f, std::string message) {
    report_->findings.push_back({error, index_, f.Location(), std::move(message)});
  }

  const ScalerConfig& config_;
  PairingReport* report_;
  std::string object_;
  size_t index_ = 0;
};

bool IsScaledObject(const Field& doc) {
  const std::string api = doc.Get("apiVersion").StringOr("").value_or("");
  return doc.Get("kind").StringOr("").value_or("") == "ScaledObject" &&
         api.rfind("keda.sh/", 0) == 0;
}

}  // namespace

int PairingReport::errors() const {
  return static_cast<int>(std::count_if(findings.begin(), findings.end(),
                                        [](const PairingFinding& f) { return f.error; }));
}

absl::StatusOr<PairingReport> CheckScaledObjects(const ScalerConfig& config, absl::string_view file,
                                                 absl::string_view text) {
  absl::StatusOr<std::vector<YAML::Node>> docs = ParseYamlDocuments(file, text);
  if (!docs.ok()) return docs.status();
  PairingReport report;
  Checker checker(config, &report);
  for (size_t d = 0; d < docs->size(); ++d) {
    const std::string path = docs->size() > 1 ? absl::StrCat("documents[", d, "]") : "";
    const Field doc(std::string(file), (*docs)[d], path);
    if (IsScaledObject(doc)) {
      checker.Object(doc);
      continue;
    }
    // A List (kubectl get -o yaml) holds its objects under items.
    if (doc.Get("items").present() && doc.Get("items").node().IsSequence()) {
      absl::StatusOr<std::vector<Field>> items = doc.Get("items").Items();
      if (!items.ok()) return items.status();
      for (const Field& item : *items) {
        if (IsScaledObject(item)) checker.Object(item);
      }
    }
  }
  if (report.objects.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": no ScaledObject (apiVersion keda.sh/v1alpha1, kind ScaledObject)"));
  }
  return report;
}

}  // namespace tessera::adapters
