// `tessera scaler` against real servers on 127.0.0.1: Debian's `prometheus` scrapes a small
// exporter (in this process) whose queue-depth series the test controls; a gRPC client speaks
// KEDA's external-scaler protocol to the scaler, through scale-up, scale-down, scale-to-zero and
// back; then Prometheus is stopped (the scaler must hold: IsActive true, GetMetrics
// UNAVAILABLE) and restarted (it must recover). A service whose requests finish between scrapes
// is kept from zero by its completions counter's rate(). And a scaler started with three hours of
// an hourly job already in Prometheus (written as TSDB blocks by Debian's promtool) rebuilds its
// history from range queries and starts the job's replicas ahead of it.
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "adapters/io/test_scratch_dir.h"
#include "adapters/keda/scaler.h"
#include "adapters/keda/test_scaler_server.h"
#include "adapters/net/free_port.h"
#include "externalscaler.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using testing::ScratchDir;

int FreePort() { return FreeLoopbackPort(); }

// The series an inference service and kube-state-metrics would expose, set by the test.
class Exporter {
 public:
  Exporter() {
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      res.set_content(
          absl::StrCat(
              absl::StrFormat("vllm:num_requests_waiting{model_name=\"chat\"} %d\n"
                              "vllm:num_requests_running{model_name=\"chat\"} %d\n"
                              "kube_deployment_status_replicas_available{namespace=\"default\","
                              "deployment=\"chat\"} %d\n",
                              waiting_, running_, ready_),
              // Only once a request has completed: before, a service without the counter.
              completed_ == 0
                  ? ""
                  : absl::StrFormat("vllm:request_success_total{model_name=\"chat\"} %d\n",
                                    completed_)),
          "text/plain; version=0.0.4");
    });
    // The scaler's own metrics, scraped by the same Prometheus (a second job).
    server_.Get("/scaler-metrics", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      res.set_content(scaler_ == nullptr ? "" : scaler_->MetricsText(),
                      "text/plain; version=0.0.4");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Exporter() {
    server_.stop();
    thread_.join();
  }
  void Set(int waiting, int running, int ready) {
    std::lock_guard<std::mutex> l(mu_);
    waiting_ = waiting;
    running_ = running;
    ready_ = ready;
  }
  // Requests that ran between two scrapes: counted, never seen by the gauges.
  void Complete(int requests) {
    std::lock_guard<std::mutex> l(mu_);
    completed_ += requests;
  }
  void ServeScalerMetrics(const Scaler* scaler) {
    std::lock_guard<std::mutex> l(mu_);
    scaler_ = scaler;
  }
  int port() const { return port_; }

 private:
  const Scaler* scaler_ = nullptr;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  int waiting_ = 0, running_ = 0, ready_ = 1, completed_ = 0;
};

// Debian's prometheus binary, scraping the exporter every 500 ms.
class Prometheus {
 public:
  Prometheus(const std::string& dir, int exporter_port) : dir_(dir), port_(FreePort()) {
    std::ofstream(dir + "/prometheus.yml")
        << "global: {scrape_interval: 500ms, evaluation_interval: 500ms}\n"
        << "scrape_configs:\n- job_name: chat\n  static_configs:\n  - targets: ['127.0.0.1:"
        << exporter_port << "']\n"
        << "- job_name: tessera-scaler\n  metrics_path: /scaler-metrics\n"
        << "  static_configs:\n  - targets: ['127.0.0.1:" << exporter_port << "']\n";
  }
  ~Prometheus() { Stop(); }
  void Start() {
    pid_ = fork();
    if (pid_ == 0) {
      std::string out = dir_ + "/prometheus.log";
      freopen(out.c_str(), "a", stdout);
      freopen(out.c_str(), "a", stderr);
      std::string cfg = "--config.file=" + dir_ + "/prometheus.yml";
      std::string data = "--storage.tsdb.path=" + dir_ + "/data";
      std::string listen = absl::StrCat("--web.listen-address=127.0.0.1:", port_);
      execlp("prometheus", "prometheus", cfg.c_str(), data.c_str(), listen.c_str(), nullptr);
      _exit(127);
    }
  }
  void Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  bool Ready() {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(0, 200000);
    httplib::Result r = c.Get("/-/ready");
    return r && r->status == 200;
  }
  int port() const { return port_; }
  std::string log() const {
    std::ifstream in(dir_ + "/prometheus.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::string dir_;
  int port_;
  pid_t pid_ = -1;
};

bool Eventually(const std::function<bool()>& f, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(int(seconds * 1000));
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return f();
}

// Runs `step` every `period` on its own thread until destroyed (so that a failed assertion never
// leaves it running).
class Repeating {
 public:
  Repeating(std::chrono::milliseconds period, std::function<void()> step)
      : thread_([this, period, step = std::move(step)] {
          while (!done_) {
            step();
            std::this_thread::sleep_for(period);
          }
        }) {}
  ~Repeating() {
    done_ = true;
    thread_.join();
  }
  Repeating(const Repeating&) = delete;
  Repeating& operator=(const Repeating&) = delete;

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

class KedaClient {
 public:
  explicit KedaClient(int port)
      : KedaClient(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                       grpc::InsecureChannelCredentials())) {}
  explicit KedaClient(const std::shared_ptr<grpc::Channel>& channel)
      : stub_(externalscaler::ExternalScaler::NewStub(channel)) {}

  externalscaler::ScaledObjectRef Ref(const std::string& service) {
    externalscaler::ScaledObjectRef ref = testing::ScaledObjectRefFor(service);
    (*ref.mutable_scalermetadata())["scalerAddress"] = "tessera-scaler.tessera-system:9095";
    return ref;
  }
  grpc::Status Metrics(const std::string& service, double* value) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    externalscaler::GetMetricsRequest req;
    *req.mutable_scaledobjectref() = Ref(service);
    req.set_metricname(Scaler::MetricName(service));
    externalscaler::GetMetricsResponse resp;
    grpc::Status s = stub_->GetMetrics(&ctx, req, &resp);
    if (s.ok()) {
      EXPECT_EQ(resp.metricvalues_size(), 1);
      EXPECT_EQ(resp.metricvalues(0).metricvalue(),
                static_cast<int64_t>(resp.metricvalues(0).metricvaluefloat()));
      *value = resp.metricvalues(0).metricvaluefloat();
    }
    return s;
  }
  int Replicas() {
    double v = -1;
    return Metrics("chat", &v).ok() ? static_cast<int>(v) : -1;
  }
  bool Active() {
    grpc::ClientContext ctx;
    externalscaler::IsActiveResponse resp;
    grpc::Status s = stub_->IsActive(&ctx, Ref("chat"), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.result();
  }
  grpc::Status Spec(const std::string& service, externalscaler::GetMetricSpecResponse* out) {
    grpc::ClientContext ctx;
    return stub_->GetMetricSpec(&ctx, Ref(service), out);
  }
  std::unique_ptr<externalscaler::ExternalScaler::Stub>& stub() { return stub_; }

 private:
  std::unique_ptr<externalscaler::ExternalScaler::Stub> stub_;
};

// A ScalerConfig reading `prom` (`timing`: its timeout and pollInterval) for `services` (the
// YAML list under `services:`).
absl::StatusOr<ScalerConfig> ConfigFor(const Prometheus& prom, absl::string_view timing,
                                       absl::string_view services) {
  return DecodeScalerConfig("scaler.yaml",
                            absl::StrCat("apiVersion: tessera.io/v1alpha1\nkind: ScalerConfig\n"
                                         "prometheus: {url: \"http://127.0.0.1:",
                                         prom.port(), "\", ", timing, "}\nservices:\n", services));
}

TEST(ScalerIntegration, RealPrometheusThroughScaleUpDownZeroOutageAndRecovery) {
  ScratchDir dir("scaler");
  Exporter exporter;
  Prometheus prom(dir.path(), exporter.port());
  prom.Start();
  ASSERT_TRUE(Eventually([&] { return prom.Ready(); }, 30)) << prom.log();

  absl::StatusOr<ScalerConfig> config = ConfigFor(prom, "timeout: 1s, pollInterval: 250ms", R"(
  - name: chat
    server: vllm
    model: chat
    deployment: chat
    targetQueuePerReplica: 4
    minReplicas: 0
    maxReplicas: 20
    idleTimeout: 3s
    scaleDownWindow: 2s
    coldStart: 1s
    trendWindow: 1s
    staleAfter: 3s
)");
  ASSERT_TRUE(config.ok()) << config.status();
  // The defaults for server: vllm and deployment: chat.
  EXPECT_EQ(config->services[0].queue_query, "sum(vllm:num_requests_waiting{model_name=\"chat\"})");
  PromSource source(config->prometheus);
  RealClock clock;
  Scaler scaler(*config, source, clock);
  exporter.ServeScalerMetrics(&scaler);
  struct Unserve {
    Exporter& e;
    ~Unserve() { e.ServeScalerMetrics(nullptr); }
  } unserve{exporter};
  testing::ServedScaler served(scaler);  // stops on every exit, failed assertions included
  ASSERT_GT(served.port(), 0);
  KedaClient keda(served.port());

  // Static spec, answered from the config.
  externalscaler::GetMetricSpecResponse spec;
  ASSERT_TRUE(keda.Spec("chat", &spec).ok());
  ASSERT_EQ(spec.metricspecs_size(), 1);
  EXPECT_EQ(spec.metricspecs(0).metricname(), "tessera-chat");
  EXPECT_EQ(spec.metricspecs(0).targetsize(), 1);
  EXPECT_EQ(spec.metricspecs(0).targetsizefloat(), 1.0);
  EXPECT_EQ(keda.Spec("nope", &spec).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(keda.Spec("", &spec).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // Idle with one replica: kept (idle for less than the timeout).
  exporter.Set(0, 0, 1);
  ASSERT_TRUE(Eventually([&] { return keda.Replicas() == 1; }, 15)) << scaler.View("chat")->reason;
  // Scale-up: 40 waiting + 16 running on one replica -> (40 + 16) / (16 + 4) = 3.
  exporter.Set(40, 16, 1);
  ASSERT_TRUE(Eventually([&] { return keda.Replicas() == 3; }, 10)) << scaler.View("chat")->reason;
  EXPECT_TRUE(keda.Active());
  // Prometheus scrapes the scaler's own metrics (its parser accepts them) and has the decision.
  PromClient query(config->prometheus);
  auto scraped = [&](const std::string& promql, double want) {
    absl::StatusOr<PromValue> got = query.Query(promql);
    return got.ok() && !got->empty && got->value == want;
  };
  EXPECT_TRUE(Eventually([&] { return scraped("up{job=\"tessera-scaler\"}", 1); }, 10))
      << prom.log();
  EXPECT_TRUE(Eventually(
      [&] {
        return scraped("tessera_scaler_desired_replicas{service=\"chat\"}", 3) &&
               scraped("tessera_scaler_signal{service=\"chat\",signal=\"waiting\"}", 40);
      },
      10));
  // The HPA applied it; the queue is gone and two requests run: down to 1 after the window.
  exporter.Set(0, 2, 3);
  ASSERT_TRUE(Eventually([&] { return keda.Replicas() == 1; }, 10)) << scaler.View("chat")->reason;
  // Nothing at all for the idle timeout: zero, and inactive.
  exporter.Set(0, 0, 1);
  ASSERT_TRUE(Eventually([&] { return keda.Replicas() == 0; }, 10)) << scaler.View("chat")->reason;
  EXPECT_FALSE(keda.Active());
  // Back from zero when requests wait.
  exporter.Set(5, 0, 0);
  ASSERT_TRUE(Eventually([&] { return keda.Active() && keda.Replicas() >= 1; }, 10))
      << scaler.View("chat")->reason;
  exporter.Set(0, 3, 1);
  ASSERT_TRUE(Eventually([&] { return keda.Replicas() == 1; }, 10));

  // Prometheus goes away: never inactive, never a number to act on.
  prom.Stop();
  double v = 0;
  ASSERT_TRUE(Eventually(
      [&] { return keda.Metrics("chat", &v).error_code() == grpc::StatusCode::UNAVAILABLE; }, 10))
      << scaler.View("chat")->reason;
  EXPECT_TRUE(keda.Active());
  EXPECT_EQ(keda.Metrics("unknown", &v).error_code(), grpc::StatusCode::NOT_FOUND);
  // GetMetricSpec still answers (KEDA issue 8056).
  EXPECT_TRUE(keda.Spec("chat", &spec).ok());
  // Recovery.
  prom.Start();
  ASSERT_TRUE(Eventually([&] { return prom.Ready(); }, 30)) << prom.log();
  ASSERT_TRUE(Eventually([&] { return keda.Replicas() == 1; }, 15)) << scaler.View("chat")->reason;

  absl::Status stopped = served.Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;
  prom.Stop();
}

// Two replicas of the scaler on one real Prometheus, as deploy/scaler runs them behind a headless
// Service, and a channel built as KEDA builds its own (round_robin over every address the name
// resolves to): each call goes to either replica. Through scale-up, scale-down, zero and back,
// the replicas decide the same count for every instant both polled (queryOffset 1s: samples
// scraped every 500 ms are in Prometheus before either asks), so KEDA reads one decision whichever
// answers; once one replica stops, every call is answered by the other.
TEST(ScalerIntegration, TwoReplicasAnswerAlikeThroughKedasRoundRobinChannel) {
  ScratchDir dir("scaler");
  Exporter exporter;
  exporter.Set(0, 0, 1);
  Prometheus prom(dir.path(), exporter.port());
  prom.Start();
  ASSERT_TRUE(Eventually([&] { return prom.Ready(); }, 30)) << prom.log();
  absl::StatusOr<ScalerConfig> config =
      ConfigFor(prom, "timeout: 1s, pollInterval: 250ms, queryOffset: 1s", R"(
  - name: chat
    server: vllm
    model: chat
    deployment: chat
    targetQueuePerReplica: 4
    minReplicas: 0
    maxReplicas: 20
    idleTimeout: 4s
    scaleDownWindow: 2s
    coldStart: 1s
    trendWindow: 1s
    staleAfter: 3s
)");
  ASSERT_TRUE(config.ok()) << config.status();
  PromSource source(config->prometheus);
  RealClock clock;
  Scaler a(*config, source, clock);
  testing::ServedScaler served_a(a);
  ASSERT_GT(served_a.port(), 0);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  Scaler b(*config, source, clock);
  testing::ServedScaler served_b(b);
  ASSERT_GT(served_b.port(), 0);

  // What each replica decided, by the instant it decided for, sampled every 10 ms.
  std::mutex mu;
  std::map<absl::Time, int> by_a, by_b;
  Repeating sampler(std::chrono::milliseconds(10), [&] {
    const ScalerView va = *a.View("chat"), vb = *b.View("chat");
    std::lock_guard<std::mutex> l(mu);
    if (va.data_ok) by_a[va.decided_at] = va.replicas;
    if (vb.data_ok) by_b[vb.decided_at] = vb.replicas;
  });

  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(R"({"loadBalancingConfig": [{"round_robin":{}}]})");
  KedaClient keda(grpc::CreateCustomChannel(
      absl::StrCat("ipv4:127.0.0.1:", served_a.port(), ",127.0.0.1:", served_b.port()),
      grpc::InsecureChannelCredentials(), args));
  const absl::Time compared_from = clock.Now() + absl::Seconds(3);  // B's window and trend filled
  ASSERT_TRUE(Eventually([&] { return keda.Replicas() == 1; }, 15)) << b.View("chat")->reason;
  exporter.Set(40, 16, 1);
  ASSERT_TRUE(Eventually([&] { return keda.Replicas() == 3; }, 10)) << b.View("chat")->reason;
  exporter.Set(0, 2, 3);
  ASSERT_TRUE(Eventually([&] { return keda.Replicas() == 1; }, 10)) << b.View("chat")->reason;
  exporter.Set(0, 0, 1);
  ASSERT_TRUE(Eventually([&] { return keda.Replicas() == 0; }, 15)) << b.View("chat")->reason;
  exporter.Set(5, 0, 0);
  ASSERT_TRUE(Eventually([&] { return keda.Replicas() >= 1; }, 10)) << b.View("chat")->reason;
  std::this_thread::sleep_for(std::chrono::seconds(1));

  // Both answered KEDA's calls.
  auto answered = [](const Scaler& s) {
    const std::string text = s.MetricsText();
    const std::string key =
        "tessera_scaler_grpc_requests_total{method=\"GetMetrics\",code=\"OK\"} ";
    const size_t at = text.find(key);
    int64_t n = 0;
    if (at != std::string::npos) {
      const size_t from = at + key.size();
      EXPECT_TRUE(absl::SimpleAtoi(text.substr(from, text.find('\n', from) - from), &n));
    }
    return n;
  };
  EXPECT_GE(answered(a), 5);
  EXPECT_GE(answered(b), 5);
  {
    std::lock_guard<std::mutex> l(mu);
    int common = 0, differed = 0;
    std::string first;
    for (const auto& [at, replicas] : by_a) {
      auto other = by_b.find(at);
      if (at < compared_from || other == by_b.end()) continue;
      ++common;
      if (other->second != replicas && differed++ == 0) {
        first = absl::StrCat(absl::FormatTime(at), ": ", replicas, " against ", other->second);
      }
    }
    EXPECT_EQ(differed, 0) << "of " << common << "; first " << first;
    EXPECT_GE(common, 40);
  }

  // One replica gone (a rollout, a drained node): the other answers every call.
  const int64_t before = answered(b);
  EXPECT_TRUE(served_a.Stop().ok());
  int failed = 0;
  for (int i = 0; i < 40; ++i) failed += keda.Replicas() < 0 ? 1 : 0;
  EXPECT_EQ(failed, 0);
  EXPECT_GE(answered(b) - before, 40);
  EXPECT_TRUE(served_b.Stop().ok());
  prom.Stop();
}

// A lightly used service whose requests are over before a scrape sees them (the waiting and
// running gauges read 0) is not idle while its completions counter rises: the throughput query's
// rate(), through a real Prometheus, keeps it from zero past the idle timeout; once the requests
// stop, it goes to zero after the rate's window and the timeout.
TEST(ScalerIntegration, CompletedRequestsKeepAServiceWhoseGaugesReadZeroFromZero) {
  ScratchDir dir("scaler");
  Exporter exporter;
  exporter.Set(0, 0, 1);
  std::atomic<bool> requests{true};
  Repeating traffic(std::chrono::milliseconds(300), [&] {
    if (requests) exporter.Complete(1);
  });
  Prometheus prom(dir.path(), exporter.port());
  prom.Start();
  ASSERT_TRUE(Eventually([&] { return prom.Ready(); }, 30)) << prom.log();
  absl::StatusOr<ScalerConfig> config = ConfigFor(prom, "timeout: 1s, pollInterval: 250ms", R"(
  - name: chat
    server: vllm
    model: chat
    deployment: chat
    throughputQuery: 'sum(rate(vllm:request_success_total{model_name="chat"}[4s]))'
    minReplicas: 0
    idleTimeout: 5s
    scaleDownWindow: 2s
    coldStart: 1s
    staleAfter: 3s
)");
  ASSERT_TRUE(config.ok()) << config.status();
  PromSource source(config->prometheus);
  RealClock clock;
  Scaler scaler(*config, source, clock);
  testing::ServedScaler served(scaler);
  ASSERT_GT(served.port(), 0);
  KedaClient keda(served.port());
  // The throughput signal, as the scaler shows it (absent while the rate has no two samples).
  auto throughput = [&] {
    const std::string text = scaler.MetricsText();
    const std::string key = "tessera_scaler_signal{service=\"chat\",signal=\"throughput\"} ";
    size_t at = text.find(key);
    double v = 0;
    if (at == std::string::npos) return 0.0;
    at += key.size();
    return absl::SimpleAtod(text.substr(at, text.find('\n', at) - at), &v) ? v : 0.0;
  };
  ASSERT_TRUE(Eventually([&] { return throughput() > 0; }, 15)) << scaler.MetricsText();
  // Twice the idle timeout with nothing waiting or running at any scrape: still one replica.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int lowest = 1;
  while (std::chrono::steady_clock::now() < until) {
    lowest = std::min(lowest, keda.Replicas());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(lowest, 1) << scaler.View("chat")->reason;
  EXPECT_TRUE(keda.Active());
  // The requests stop: zero once the rate has fallen to 0 and the idle timeout has passed.
  requests = false;
  EXPECT_TRUE(Eventually([&] { return keda.Replicas() == 0; }, 15)) << scaler.View("chat")->reason;
  EXPECT_FALSE(keda.Active());

  absl::Status stopped = served.Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;
  prom.Stop();
}

TEST(ScalerIntegration, RebuildsTheRecurringLoadFromPrometheusRangeQueriesOnStart) {
  ScratchDir scratch("scaler");
  const std::string& dir = scratch.path();
  // The scaler "starts" at `now`, 20 s into a minute (a simulated clock, so that where the job
  // falls does not hang on how long Prometheus takes to start): in each of the three hours
  // before, a job ran from two minutes past this minute for ten minutes (200 requests on 10
  // replicas; else 2 on one), scraped every 15 s on the minute up to a minute ago.
  const absl::Time minute = absl::FromUnixSeconds(absl::ToUnixSeconds(RealClock().Now()) / 60 * 60);
  const absl::Time now = minute + absl::Seconds(20);
  auto job = [&](absl::Time t) {
    for (int h = 1; h <= 3; ++h) {
      const absl::Time from = minute + absl::Minutes(2) - absl::Hours(h);
      if (t >= from && t < from + absl::Minutes(10)) return true;
    }
    return false;
  };
  std::string om;
  for (auto [series, busy, idle] :
       {std::tuple{"vllm:num_requests_waiting{model_name=\"job\"}", 0, 0},
        {"vllm:num_requests_running{model_name=\"job\"}", 200, 2},
        {"kube_deployment_status_replicas_available{namespace=\"default\",deployment=\"job\"}", 10,
         1}}) {
    for (absl::Time t = minute - absl::Hours(3) - absl::Minutes(10); t < now - absl::Minutes(1);
         t += absl::Seconds(15)) {
      absl::StrAppend(&om, series, " ", job(t) ? busy : idle, " ", absl::ToUnixSeconds(t), "\n");
    }
  }
  om += "# EOF\n";
  std::ofstream(dir + "/history.om") << om;
  const std::string promtool =
      absl::StrCat("promtool tsdb create-blocks-from openmetrics ", dir, "/history.om ", dir,
                   "/data > ", dir, "/promtool.log 2>&1");
  ASSERT_EQ(std::system(promtool.c_str()), 0) << promtool;

  Exporter exporter;  // scraped, but not for these series
  Prometheus prom(dir, exporter.port());
  prom.Start();
  ASSERT_TRUE(Eventually([&] { return prom.Ready(); }, 30)) << prom.log();

  absl::StatusOr<ScalerConfig> config = ConfigFor(prom, "timeout: 2s, pollInterval: 1s", R"(
  - name: job
    server: vllm
    model: job
    deployment: job
    startingQuery: ""
    utilizationQuery: ""
    seasonalPeriods: [1h]
    coldStart: 60s
)");
  ASSERT_TRUE(config.ok()) << config.status();
  PromSource source(config->prometheus);
  SimulatedClock clock(now);
  std::mutex mu;
  std::vector<std::string> log;
  Scaler scaler(*config, source, clock, [&](const std::string& line) {
    std::lock_guard<std::mutex> l(mu);
    log.push_back(line);
  });
  // Before the history: one replica for the two running.
  scaler.PollOnce();
  EXPECT_EQ(scaler.View("job")->replicas, 1) << scaler.View("job")->reason;

  // Served: the history is rebuilt beside the polls, and the job's replicas start: 200 on 10
  // replicas is 20 each, plus the queue target 4 -> 8.3 busy, over the 0.75 target -> 12 (the
  // first step from 1 is to 5; the clock stands still, so the steps go on from there).
  testing::ServedScaler served(scaler);
  ASSERT_GT(served.port(), 0);
  KedaClient keda(served.port());
  double replicas = 0;
  ASSERT_TRUE(Eventually([&] { return keda.Metrics("job", &replicas).ok() && replicas >= 5; }, 30))
      << scaler.View("job")->reason << "\n"
      <<
      [&] {
        std::lock_guard<std::mutex> l(mu);
        return ::testing::PrintToString(log);
      }()
      << "\n"
      << prom.log();
  EXPECT_THAT(scaler.View("job")->reason,
              ::testing::HasSubstr("recurring: 8.3 replicas busy within 2m of this time in each "
                                   "of the last 3 periods of 1h"));
  ASSERT_TRUE(served.Stop().ok());
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_THAT(log, ::testing::Contains(
                         ::testing::HasSubstr("job: history rebuilt from Prometheus: 24h from ")))
        << ::testing::PrintToString(log);
    // Scraped up to a minute before the start, within staleAfter (Prometheus answers the steps
    // after the last scrape with it): the scale-down window, idle clock and trend come back too.
    EXPECT_THAT(log, ::testing::Contains(::testing::EndsWith(
                         "; scale-down window, idle clock and demand trend carried over")))
        << ::testing::PrintToString(log);
  }
  // The whole ring: three hours, the lead and a minute.
  EXPECT_THAT(scaler.MetricsText(),
              ::testing::HasSubstr("tessera_scaler_load_history_minutes{service=\"job\"} 183\n"));
  prom.Stop();
}

}  // namespace
}  // namespace tessera::adapters
