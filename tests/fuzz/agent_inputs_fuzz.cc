// libFuzzer target: the node agent's untrusted inputs never crash: HTTP requests on its socket
// (ParseHttpRequest), S3 listings from an origin (ParseListObjectsV2, S3ErrorSummary), and the
// answers of credential endpoints (STS, the container credentials endpoint) and credentials
// files.
#include <cstddef>
#include <cstdint>
#include <string>

#include "adapters/http/server.h"
#include "adapters/objstore/s3_list.h"
#include "adapters/objstore/sigv4.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  tessera::adapters::HttpCall call;
  absl::StatusOr<bool> r = tessera::adapters::ParseHttpRequest(text, &call, 4096);
  if (r.ok() && *r && call.body.size() > 4096) __builtin_trap();
  (void)tessera::adapters::objstore::ParseListObjectsV2(text);
  (void)tessera::adapters::objstore::S3ErrorSummary(text);
  (void)tessera::adapters::objstore::ParseAssumeRoleWithWebIdentity(text);
  (void)tessera::adapters::objstore::ParseContainerCredentials(text);
  (void)tessera::adapters::objstore::ParseSharedCredentials(text, "credentials", "default");
  return 0;
}
