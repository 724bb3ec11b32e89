#include "adapters/keda/scaler_config.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "adapters/io/files.h"
#include "adapters/k8s/decoders.h"
#include "adapters/k8s/yaml_reader.h"
#include "base/status.h"

namespace tessera::adapters {
namespace {

absl::StatusOr<absl::Duration> ReadDuration(const Field& f, absl::Duration dflt) {
  if (!f.present()) return dflt;
  TESSERA_ASSIGN_OR_RETURN(std::string text, f.String());
  absl::Duration d;
  if (!absl::ParseDuration(text, &d) || d < absl::ZeroDuration()) {
    return f.Error(
        absl::StrCat("expected a duration such as 5s, 2m or 1h30m, found \"", text, "\""));
  }
  return d;
}

absl::StatusOr<double> ReadNumber(const Field& f, double min, double max, double dflt) {
  TESSERA_ASSIGN_OR_RETURN(std::optional<double> v, f.OptionalNumber(min, max));
  return v.value_or(dflt);
}

absl::StatusOr<int> ReadInt(const Field& f, int64_t min, int64_t max, int dflt) {
  TESSERA_ASSIGN_OR_RETURN(std::optional<int64_t> v, f.OptionalInt(min, max));
  return static_cast<int>(v.value_or(dflt));
}

// true or false.
absl::StatusOr<bool> ReadBool(const Field& f, bool dflt) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, f.StringOr(dflt ? "true" : "false"));
  if (text != "true" && text != "false") return f.Error("expected true or false");
  return text == "true";
}

// An HTTP header name is an RFC 9110 token.
bool HeaderName(const std::string& name) {
  if (name.empty()) return false;
  for (char ch : name) {
    if (!absl::ascii_isalnum(ch) &&
        std::string_view("!#$%&'*+-.^_`|~").find(ch) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

absl::Status ReadPrometheusAccess(const Field& prom, ScalerConfig& c) {
  PromConfig& p = c.prometheus;
  TESSERA_ASSIGN_OR_RETURN(p.bearer_token_file, prom.Get("bearerTokenFile").StringOr(""));
  if (Field basic = prom.Get("basicAuth"); basic.present()) {
    TESSERA_RETURN_IF_ERROR(basic.RequireMap());
    TESSERA_RETURN_IF_ERROR(basic.OnlyKeys({"username", "passwordFile"}));
    if (!p.bearer_token_file.empty()) {
      return basic.Error("give either bearerTokenFile or basicAuth, not both");
    }
    TESSERA_ASSIGN_OR_RETURN(p.basic_username, basic.Get("username").String());
    TESSERA_ASSIGN_OR_RETURN(p.basic_password_file, basic.Get("passwordFile").String());
    if (p.basic_username.empty() || p.basic_username.find(':') != std::string::npos) {
      return basic.Get("username").Error("expected a user name without ':'");
    }
  }
  if (Field sigv4 = prom.Get("sigv4"); sigv4.present()) {
    TESSERA_RETURN_IF_ERROR(sigv4.RequireMap());
    TESSERA_RETURN_IF_ERROR(sigv4.OnlyKeys({"region", "roleArn"}));
    Field region = sigv4.Get("region");
    TESSERA_ASSIGN_OR_RETURN(p.sigv4_region, region.String());
    // AWS region names: lower-case letters, digits and '-' (us-west-2, eu-central-1).
    if (p.sigv4_region.empty() ||
        !std::all_of(p.sigv4_region.begin(), p.sigv4_region.end(), [](char ch) {
          return absl::ascii_islower(ch) || absl::ascii_isdigit(ch) || ch == '-';
        })) {
      return region.Error(
          absl::StrCat("expected an AWS region such as us-west-2, found \"", p.sigv4_region, "\""));
    }
    // An IAM role ARN: arn:PARTITION:iam::ACCOUNT:role/PATH/NAME (aws, aws-cn, aws-us-gov).
    Field role = sigv4.Get("roleArn");
    TESSERA_ASSIGN_OR_RETURN(p.sigv4_role_arn, role.StringOr(""));
    if (role.present()) {
      std::vector<std::string> parts = absl::StrSplit(p.sigv4_role_arn, absl::MaxSplits(':', 5));
      if (parts.size() != 6 || parts[0] != "arn" || !absl::StartsWith(parts[1], "aws") ||
          parts[2] != "iam" || !parts[3].empty() || parts[4].size() != 12 ||
          !std::all_of(parts[4].begin(), parts[4].end(), absl::ascii_isdigit) ||
          !absl::StartsWith(parts[5], "role/") || parts[5].size() <= 5) {
        return role.Error(absl::StrCat(
            "expected an IAM role ARN such as arn:aws:iam::111122223333:role/amp-query, found \"",
            p.sigv4_role_arn, "\""));
      }
    }
  }
  if (Field google = prom.Get("googleWorkloadIdentity"); google.present()) {
    TESSERA_RETURN_IF_ERROR(google.RequireMap());
    TESSERA_RETURN_IF_ERROR(google.OnlyKeys({}));
    p.cloud_identity = CloudIdentity::kGoogle;
  }
  if (Field azure = prom.Get("azureWorkloadIdentity"); azure.present()) {
    TESSERA_RETURN_IF_ERROR(azure.RequireMap());
    TESSERA_RETURN_IF_ERROR(azure.OnlyKeys({"scope"}));
    TESSERA_ASSIGN_OR_RETURN(p.cloud_scope, azure.Get("scope").StringOr(kAzurePrometheusScope));
    if (p.cloud_scope.empty() || p.cloud_scope.find_first_of(" \t\r\n") != std::string::npos) {
      return azure.Get("scope").Error(
          absl::StrCat("expected one OAuth scope such as ", kAzurePrometheusScope));
    }
    p.cloud_identity = CloudIdentity::kAzure;
  }
  // One source of credentials: each sets the Authorization header (or signs the request). (Both
  // bearerTokenFile and basicAuth were refused above, with their own message.)
  {
    std::vector<std::string> given;
    for (const char* key : {"bearerTokenFile", "basicAuth", "sigv4", "googleWorkloadIdentity",
                            "azureWorkloadIdentity"}) {
      if (prom.Get(key).present()) given.push_back(key);
    }
    if (given.size() > 1) {
      return prom.Get(given[1]).Error(
          absl::StrCat("give one of bearerTokenFile, basicAuth, sigv4, googleWorkloadIdentity and "
                       "azureWorkloadIdentity; found ",
                       given[0], " too"));
    }
  }
  const bool authorised = !p.bearer_token_file.empty() || !p.basic_username.empty() ||
                          !p.sigv4_region.empty() || p.cloud_identity.has_value();
  if (Field headers = prom.Get("headers"); headers.present()) {
    TESSERA_RETURN_IF_ERROR(headers.RequireMap());
    for (auto it = headers.node().begin(); it != headers.node().end(); ++it) {
      const std::string name = it->first.Scalar();
      Field value = headers.Get(name);
      if (!HeaderName(name)) {
        return value.Error(absl::StrCat("\"", name, "\": expected an HTTP header name"));
      }
      if (authorised && absl::EqualsIgnoreCase(name, "Authorization")) {
        return value.Error(
            "Authorization comes from the credentials given here (bearerTokenFile, basicAuth, "
            "sigv4, googleWorkloadIdentity or azureWorkloadIdentity); give one");
      }
      TESSERA_ASSIGN_OR_RETURN(std::string text, value.String());
      if (text.find_first_of(std::string("\r\n\0", 3)) != std::string::npos) {
        return value.Error("a header value must be one line");
      }
      p.headers.push_back(absl::StrCat(name, ": ", text));
    }
  }
  if (Field tls = prom.Get("tls"); tls.present()) {
    TESSERA_RETURN_IF_ERROR(tls.RequireMap());
    TESSERA_RETURN_IF_ERROR(tls.OnlyKeys({"caFile", "certFile", "keyFile", "insecureSkipVerify"}));
    if (p.url.rfind("https://", 0) != 0) {
      return tls.Error("applies to an https:// url only");
    }
    TlsOptions& t = p.tls;
    TESSERA_ASSIGN_OR_RETURN(t.ca_file, tls.Get("caFile").StringOr(""));
    TESSERA_ASSIGN_OR_RETURN(t.client_cert_file, tls.Get("certFile").StringOr(""));
    TESSERA_ASSIGN_OR_RETURN(t.client_key_file, tls.Get("keyFile").StringOr(""));
    if (t.client_cert_file.empty() != t.client_key_file.empty()) {
      return tls.Error("certFile and keyFile go together (a client certificate and its key)");
    }
    TESSERA_ASSIGN_OR_RETURN(t.insecure_skip_verify,
                             ReadBool(tls.Get("insecureSkipVerify"), false));
  }
  return absl::OkStatus();
}

std::string Label(const std::string& key, const std::string& value) {
  return absl::StrCat(key, "=\"", value, "\"");
}

}  // namespace

std::vector<std::string> ScalerConfig::UnreadableFiles() const {
  std::vector<std::string> out;
  const std::pair<const char*, const std::string*> files[] = {
      {"prometheus.bearerTokenFile", &prometheus.bearer_token_file},
      {"prometheus.basicAuth.passwordFile", &prometheus.basic_password_file},
      {"prometheus.tls.caFile", &prometheus.tls.ca_file},
      {"prometheus.tls.certFile", &prometheus.tls.client_cert_file},
      {"prometheus.tls.keyFile", &prometheus.tls.client_key_file}};
  for (const auto& [field, file] : files) {
    if (file->empty()) continue;
    absl::StatusOr<std::string> text = ReadFile(*file);
    if (!text.ok()) out.push_back(absl::StrCat(field, ": ", text.status().message()));
  }
  return out;
}

std::vector<std::pair<const char*, const std::string*>> ServiceConfig::DistinctQueries() const {
  std::vector<std::pair<const char*, const std::string*>> out;
  for (const auto& [name, query] : Queries()) {
    if (query->empty()) continue;
    const bool seen = std::any_of(out.begin(), out.end(),
                                  [query = query](const auto& q) { return *q.second == *query; });
    if (!seen) out.emplace_back(name, query);
  }
  return out;
}

bool ServiceConfig::SameQueries(const ServiceConfig& other) const {
  const auto mine = Queries();
  const auto theirs = other.Queries();
  return std::equal(mine.begin(), mine.end(), theirs.begin(),
                    [](const auto& a, const auto& b) { return *a.second == *b.second; });
}

const ServiceConfig* ScalerConfig::Find(const std::string& name) const {
  for (const ServiceConfig& s : services) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string ScalerConfig::ServiceNames() const {
  std::string names;
  for (const ServiceConfig& s : services)
    absl::StrAppend(&names, names.empty() ? "" : ", ", s.name);
  return names;
}

absl::StatusOr<ScalerConfig> DecodeScalerConfig(const std::string& file, const std::string& text) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> docs, ParseYamlDocuments(file, text));
  if (docs.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": expected one tessera.io/v1alpha1 ScalerConfig document, found ", docs.size()));
  }
  Field doc(file, docs[0], "");
  TESSERA_RETURN_IF_ERROR(doc.RequireMap());
  TESSERA_RETURN_IF_ERROR(doc.OnlyKeys({"apiVersion", "kind", "prometheus", "tls", "services"}));
  TESSERA_ASSIGN_OR_RETURN(std::string api, doc.Get("apiVersion").String());
  TESSERA_ASSIGN_OR_RETURN(std::string kind, doc.Get("kind").String());
  if (api != kApiVersion || kind != "ScalerConfig") {
    return doc.Get("kind").Error(absl::StrCat("expected apiVersion ", kApiVersion,
                                              " and kind ScalerConfig, found ", api, " ", kind));
  }
  ScalerConfig c;
  Field prom = doc.Get("prometheus");
  TESSERA_RETURN_IF_ERROR(prom.RequireMap());
  TESSERA_RETURN_IF_ERROR(
      prom.OnlyKeys({"url", "timeout", "pollInterval", "queryOffset", "concurrency", "backfill",
                     "backfillTimeout", "bearerTokenFile", "basicAuth", "sigv4",
                     "googleWorkloadIdentity", "azureWorkloadIdentity", "headers", "tls"}));
  std::string& url = c.prometheus.url;
  TESSERA_ASSIGN_OR_RETURN(url, prom.Get("url").String());
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
    return prom.Get("url").Error("expected an http:// or https:// URL");
  }
  while (!url.empty() && url.back() == '/') url.pop_back();
  {
    const size_t host = url.find("://") + 3;
    const std::string authority = url.substr(host, url.find('/', host) - host);
    if (authority.find('@') != std::string::npos) {
      // Errors and logs carry the URL: credentials in it would leak there.
      return prom.Get("url").Error("credentials in the URL are not accepted; use basicAuth");
    }
  }
  TESSERA_ASSIGN_OR_RETURN(absl::Duration timeout,
                           ReadDuration(prom.Get("timeout"), absl::Seconds(2)));
  TESSERA_ASSIGN_OR_RETURN(c.poll_interval,
                           ReadDuration(prom.Get("pollInterval"), absl::Seconds(5)));
  if (timeout <= absl::ZeroDuration()) return prom.Get("timeout").Error("expected above 0");
  // Each poll runs every service's queries; Prometheus' samples change once per scrape (15-60 s
  // as usually configured), so polls faster than this only load it ("5ms" for "5s").
  if (c.poll_interval < absl::Milliseconds(100)) {
    return prom.Get("pollInterval").Error("expected at least 100ms");
  }
  c.prometheus.timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(timeout));
  TESSERA_ASSIGN_OR_RETURN(c.query_offset,
                           ReadDuration(prom.Get("queryOffset"), absl::ZeroDuration()));
  if (c.query_offset < absl::ZeroDuration() || c.query_offset > absl::Minutes(5)) {
    return prom.Get("queryOffset").Error("expected from 0s to 5m");
  }
  TESSERA_ASSIGN_OR_RETURN(c.poll_concurrency,
                           ReadInt(prom.Get("concurrency"), 1, 64, c.poll_concurrency));
  TESSERA_ASSIGN_OR_RETURN(c.backfill, ReadBool(prom.Get("backfill"), c.backfill));
  TESSERA_ASSIGN_OR_RETURN(absl::Duration backfill_timeout,
                           ReadDuration(prom.Get("backfillTimeout"), absl::Seconds(30)));
  if (backfill_timeout <= absl::ZeroDuration() || backfill_timeout > absl::Minutes(10)) {
    return prom.Get("backfillTimeout").Error("expected above 0 and at most 10m");
  }
  c.prometheus.range_timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(backfill_timeout));
  TESSERA_RETURN_IF_ERROR(ReadPrometheusAccess(prom, c));
  if (Field tls = doc.Get("tls"); tls.present()) {
    TESSERA_RETURN_IF_ERROR(tls.RequireMap());
    TESSERA_RETURN_IF_ERROR(
        tls.OnlyKeys({"certFile", "keyFile", "clientCAFile", "reloadInterval"}));
    TESSERA_ASSIGN_OR_RETURN(c.tls_cert_file, tls.Get("certFile").String());
    TESSERA_ASSIGN_OR_RETURN(c.tls_key_file, tls.Get("keyFile").String());
    TESSERA_ASSIGN_OR_RETURN(c.tls_client_ca_file, tls.Get("clientCAFile").StringOr(""));
    TESSERA_ASSIGN_OR_RETURN(c.tls_reload_interval,
                             ReadDuration(tls.Get("reloadInterval"), c.tls_reload_interval));
    if (c.tls_reload_interval < absl::Seconds(1) || c.tls_reload_interval > absl::Hours(24)) {
      return tls.Get("reloadInterval").Error("expected from 1s to 24h");
    }
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<Field> services, doc.Get("services").Items());
  if (services.empty()) {
    return doc.Get("services").Error("expected at least one service");
  }
  std::set<std::string> names;
  for (const Field& sf : services) {
    TESSERA_RETURN_IF_ERROR(sf.RequireMap());
    TESSERA_RETURN_IF_ERROR(sf.OnlyKeys({"name",
                                         "server",
                                         "model",
                                         "deployment",
                                         "namespace",
                                         "queueQuery",
                                         "runningQuery",
                                         "utilizationQuery",
                                         "throughputQuery",
                                         "readyQuery",
                                         "startingQuery",
                                         "activationQuery",
                                         "targetQueuePerReplica",
                                         "targetUtilization",
                                         "utilizationBand",
                                         "minReplicas",
                                         "maxReplicas",
                                         "idleTimeout",
                                         "activationThreshold",
                                         "scaleUpStep",
                                         "scaleUpRatio",
                                         "scaleDownWindow",
                                         "scaleDownQuantile",
                                         "scaleDownStep",
                                         "scaleDownRatio",
                                         "coldStart",
                                         "trendWindow",
                                         "staleAfter",
                                         "seasonalPeriods",
                                         "seasonalRepeats"}));
    ServiceConfig s;
    TESSERA_ASSIGN_OR_RETURN(s.name, sf.Get("name").String());
    if (s.name.empty() || !names.insert(s.name).second) {
      return sf.Get("name").Error(
          absl::StrCat("expected a unique non-empty name, found \"", s.name, "\""));
    }
    TESSERA_ASSIGN_OR_RETURN(std::string server, sf.Get("server").StringOr(""));
    TESSERA_ASSIGN_OR_RETURN(std::string model, sf.Get("model").StringOr(s.name));
    TESSERA_ASSIGN_OR_RETURN(std::string deployment, sf.Get("deployment").StringOr(s.name));
    TESSERA_ASSIGN_OR_RETURN(std::string ns, sf.Get("namespace").StringOr("default"));
    // Defaults per server (shared/reference/autoscaling.md section 6).
    if (server == "vllm") {
      s.queue_query =
          absl::StrCat("sum(vllm:num_requests_waiting{", Label("model_name", model), "})");
      s.running_query =
          absl::StrCat("sum(vllm:num_requests_running{", Label("model_name", model), "})");
      s.throughput_query = absl::StrCat("sum(rate(vllm:request_success_total{",
                                        Label("model_name", model), "}[1m]))");
    } else if (server == "triton") {
      s.queue_query =
          absl::StrCat("sum(nv_inference_pending_request_count{", Label("model", model), "})");
      s.throughput_query =
          absl::StrCat("sum(rate(nv_inference_request_success{", Label("model", model), "}[1m]))");
    } else if (server == "tgi") {
      s.queue_query = "sum(tgi_queue_size)";
      s.running_query = "sum(tgi_batch_current_size)";
      s.throughput_query = "sum(rate(tgi_request_success[1m]))";
    } else if (server == "sglang") {
      // SGLang's scheduler gauges and its tokenizer's finished-request counter (sglang
      // python/sglang/srt/metrics/collector.py; served with --enable-metrics), per model_name and
      // per rank: summed over the service's pods and ranks.
      s.queue_query = absl::StrCat("sum(sglang:num_queue_reqs{", Label("model_name", model), "})");
      s.running_query =
          absl::StrCat("sum(sglang:num_running_reqs{", Label("model_name", model), "})");
      s.throughput_query = absl::StrCat("sum(rate(sglang:num_requests_total{",
                                        Label("model_name", model), "}[1m]))");
    } else if (!server.empty()) {
      return sf.Get("server").Error(absl::StrCat(
          "expected vllm, triton, tgi or sglang (or omit it and give the queries), found \"",
          server, "\""));
    }
    if (!deployment.empty()) {
      std::string sel = absl::StrCat(Label("namespace", ns), ",", Label("deployment", deployment));
      s.ready_query = absl::StrCat("sum(kube_deployment_status_replicas_available{", sel, "})");
      s.starting_query =
          absl::StrCat("sum(kube_deployment_status_replicas_unavailable{", sel, "})");
      s.utilization_query =
          absl::StrCat("avg(avg_over_time(DCGM_FI_DEV_GPU_UTIL{", Label("namespace", ns),
                       ",pod=~\"", deployment, "-.*\"}[1m])) / 100");
    }
    struct Q {
      const char* key;
      std::string* out;
    };
    for (Q q : {Q{"queueQuery", &s.queue_query}, Q{"runningQuery", &s.running_query},
                Q{"utilizationQuery", &s.utilization_query},
                Q{"throughputQuery", &s.throughput_query}, Q{"readyQuery", &s.ready_query},
                Q{"startingQuery", &s.starting_query}, Q{"activationQuery", &s.activation_query}}) {
      TESSERA_ASSIGN_OR_RETURN(*q.out, sf.Get(q.key).StringOr(*q.out));
    }
    if (s.queue_query.empty()) {
      return sf.Error("queueQuery is required (or set server: vllm|triton|tgi|sglang)");
    }
    if (s.ready_query.empty()) {
      return sf.Error(
          "readyQuery is required (or set deployment, for kube-state-metrics' "
          "kube_deployment_status_replicas_available)");
    }
    autoscale::AutoscalePolicy& p = s.policy;
    TESSERA_ASSIGN_OR_RETURN(
        p.target_queue_per_replica,
        ReadNumber(sf.Get("targetQueuePerReplica"), 0.001, 1e6, p.target_queue_per_replica));
    TESSERA_ASSIGN_OR_RETURN(p.target_utilization, ReadNumber(sf.Get("targetUtilization"), 0.01, 1,
                                                              p.target_utilization));
    TESSERA_ASSIGN_OR_RETURN(p.utilization_band,
                             ReadNumber(sf.Get("utilizationBand"), 0, 0.99, p.utilization_band));
    TESSERA_ASSIGN_OR_RETURN(p.min_replicas,
                             ReadInt(sf.Get("minReplicas"), 0, 100000, p.min_replicas));
    TESSERA_ASSIGN_OR_RETURN(p.max_replicas,
                             ReadInt(sf.Get("maxReplicas"), 1, 100000, p.max_replicas));
    TESSERA_ASSIGN_OR_RETURN(p.activation_threshold, ReadNumber(sf.Get("activationThreshold"), 0,
                                                                1e9, p.activation_threshold));
    TESSERA_ASSIGN_OR_RETURN(p.scale_up_step,
                             ReadInt(sf.Get("scaleUpStep"), 1, 100000, p.scale_up_step));
    TESSERA_ASSIGN_OR_RETURN(p.scale_up_ratio,
                             ReadNumber(sf.Get("scaleUpRatio"), 0, 100, p.scale_up_ratio));
    TESSERA_ASSIGN_OR_RETURN(p.scale_down_step,
                             ReadInt(sf.Get("scaleDownStep"), 1, 100000, p.scale_down_step));
    TESSERA_ASSIGN_OR_RETURN(p.scale_down_ratio,
                             ReadNumber(sf.Get("scaleDownRatio"), 0, 1, p.scale_down_ratio));
    TESSERA_ASSIGN_OR_RETURN(p.idle_timeout, ReadDuration(sf.Get("idleTimeout"), p.idle_timeout));
    TESSERA_ASSIGN_OR_RETURN(p.scale_down_window,
                             ReadDuration(sf.Get("scaleDownWindow"), p.scale_down_window));
    TESSERA_ASSIGN_OR_RETURN(p.scale_down_quantile, ReadNumber(sf.Get("scaleDownQuantile"), 0.01, 1,
                                                               p.scale_down_quantile));
    TESSERA_ASSIGN_OR_RETURN(p.cold_start, ReadDuration(sf.Get("coldStart"), p.cold_start));
    TESSERA_ASSIGN_OR_RETURN(p.trend_window, ReadDuration(sf.Get("trendWindow"), p.trend_window));
    TESSERA_ASSIGN_OR_RETURN(p.stale_after, ReadDuration(sf.Get("staleAfter"), p.stale_after));
    if (Field periods = sf.Get("seasonalPeriods"); periods.present()) {
      TESSERA_ASSIGN_OR_RETURN(std::vector<Field> items, periods.Items());  // [] turns it off
      p.seasonal_periods.clear();
      for (const Field& item : items) {
        TESSERA_ASSIGN_OR_RETURN(absl::Duration d, ReadDuration(item, absl::ZeroDuration()));
        p.seasonal_periods.push_back(d);
      }
    }
    TESSERA_ASSIGN_OR_RETURN(p.seasonal_repeats,
                             ReadInt(sf.Get("seasonalRepeats"), 1, 1000, p.seasonal_repeats));
    if (absl::Status v = p.Validate(); !v.ok()) {
      return sf.Error(v.message());
    }
    // A decision is queryOffset old when made and pollInterval older when the next one comes:
    // a staleAfter within that would have GetMetrics answer UNAVAILABLE between polls.
    if (p.stale_after <= c.query_offset + c.poll_interval) {
      return sf.Get("staleAfter")
          .Error(absl::StrCat("expected above prometheus.queryOffset + pollInterval (",
                              absl::FormatDuration(c.query_offset + c.poll_interval), ")"));
    }
    s.settings = CanonicalYaml(sf.node());
    c.services.push_back(std::move(s));
  }
  c.server_settings = CanonicalYaml(doc.node(), "services");
  return c;
}

}  // namespace tessera::adapters
