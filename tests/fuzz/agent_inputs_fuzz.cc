// libFuzzer target: the node agent's untrusted inputs never crash: HTTP requests on its socket
// (ParseHttpRequest), S3 listings from an origin (ParseListObjectsV2, S3ErrorSummary), and the
// answers of credential endpoints (STS, the container credentials endpoint), credentials
// files, names from listings, model manifests (ParseManifest), and fetched safetensors files
// (VerifySafetensors).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "adapters/http/server.h"
#include "adapters/objstore/fetcher.h"
#include "adapters/objstore/s3_list.h"
#include "adapters/objstore/sigv4.h"
#include "adapters/objstore/verify.h"

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
  (void)tessera::adapters::objstore::ValidateRelativeName(text);
  absl::StatusOr<std::vector<tessera::adapters::objstore::FileSpec>> manifest =
      tessera::adapters::objstore::ParseManifest("m.json", text);
  if (manifest.ok()) {
    for (const auto& f : *manifest) {
      // What the fetcher then writes to disk: names it checked, sizes a file can have.
      if (!tessera::adapters::objstore::ValidateRelativeName(f.name).ok() || f.size < 0 ||
          (!f.sha256.empty() && !tessera::adapters::objstore::IsSha256Hex(f.sha256))) {
        __builtin_trap();
      }
    }
  }
  // A fetched weights file, checked from disk: the input as the whole file (an in-memory one).
  static const int fd = memfd_create("safetensors", 0);
  if (fd >= 0 && ftruncate(fd, 0) == 0 && pwrite(fd, data, size, 0) == static_cast<ssize_t>(size)) {
    (void)tessera::adapters::objstore::VerifySafetensors("/proc/self/fd/" + std::to_string(fd));
  }
  return 0;
}
