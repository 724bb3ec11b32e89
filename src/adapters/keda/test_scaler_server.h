// Test helper: `ServeScaler` for one Scaler on a free 127.0.0.1 port, on its own thread from
// construction until Stop() or destruction (so a failed assertion never leaves it running), and
// the ScaledObjectRef KEDA sends with each call.
//
// Example:
//   Scaler scaler(*config, source, clock);
//   testing::ServedScaler served(scaler);
//   ASSERT_GT(served.port(), 0);
//   auto stub = externalscaler::ExternalScaler::NewStub(grpc::CreateChannel(
//       served.address(), grpc::InsecureChannelCredentials()));
//   stub->IsActive(&ctx, testing::ScaledObjectRefFor("chat"), &out);
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "adapters/keda/scaler.h"
#include "externalscaler.pb.h"

namespace tessera::adapters::testing {

class ServedScaler {
 public:
  // Waits up to 10 s for the port; port() stays 0 if ServeScaler failed (see Stop()).
  explicit ServedScaler(Scaler& scaler) {
    thread_ = std::thread([this, &scaler] {
      served_ = ServeScaler(scaler, "127.0.0.1:0", &stop_, &port_);
      done_ = true;
    });
    for (int i = 0; i < 1000 && port_.load() == 0 && !done_.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~ServedScaler() { Stop().IgnoreError(); }
  ServedScaler(const ServedScaler&) = delete;
  ServedScaler& operator=(const ServedScaler&) = delete;

  // Stops serving; what ServeScaler returned.
  absl::Status Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return served_;
  }
  int port() const { return port_.load(); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port()); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::atomic<int> port_{0};
  absl::Status served_;
  std::thread thread_;
};

// The reference KEDA sends for a ScaledObject "chat" in "default" whose trigger metadata names
// `service` (no `service` key when it is empty).
inline externalscaler::ScaledObjectRef ScaledObjectRefFor(const std::string& service) {
  externalscaler::ScaledObjectRef ref;
  ref.set_name("chat");
  ref.set_namespace_("default");
  if (!service.empty()) (*ref.mutable_scalermetadata())["service"] = service;
  return ref;
}

}  // namespace tessera::adapters::testing
