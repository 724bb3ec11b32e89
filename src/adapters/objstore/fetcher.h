// Fetches a model's files from an HTTP(S) origin into a local directory: parallel ranged GETs
// over libcurl's multi interface, retries with exponential backoff and full jitter (honouring
// Retry-After), resume from the chunks already written and verified, and verification by size
// always, SHA-256 where known and safetensors structure for *.safetensors. The directory
// appears complete or not at all: files are fetched into DIR.partial/ (kept between runs for
// resume), verified, fsynced, and the directory renamed to DIR.
//
// Sources (ResolveSource):
//   http(s)://host/path/file                          one file
//   http(s)://host/path/model.safetensors.index.json  the index and every shard it names
//   http(s)://host/path/tessera-manifest.json         {"files": [{"name", "size", "sha256"}]}
//   s3://bucket/prefix/                               every object under the prefix
//                                                     (ListObjectsV2; a tessera-manifest.json
//                                                     among them adds its checksums)
//   s3://bucket/key                                   one object
// Names from indexes and manifests are untrusted (ValidateRelativeName).
//
// Example:
//   absl::StatusOr<std::vector<FileSpec>> files = ResolveSource(url, options);
//   absl::StatusOr<FetchStats> s = FetchModel(*files, "/cache/llama", options);
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "adapters/objstore/sigv4.h"
#include "base/clock.h"

namespace tessera::adapters::objstore {

struct FileSpec {
  std::string name;  // relative path inside the model directory
  std::string url;
  int64_t size = -1;   // -1: ask the origin
  std::string sha256;  // lowercase hex; "" = unknown
  // Set for s3:// sources: every request is signed with SigV4 (unless anonymous).
  std::shared_ptr<const S3Location> s3;
};

struct FetchProgress {
  int64_t bytes_done = 0;
  int64_t bytes_total = 0;
  double bytes_per_second = 0;
  int files_total = 0;
};

struct FetchOptions {
  int connections = 8;
  int64_t chunk_bytes = int64_t{8} << 20;
  int max_attempts = 6;  // per chunk
  absl::Duration backoff_base = absl::Milliseconds(200);
  absl::Duration backoff_max = absl::Seconds(10);
  absl::Duration request_timeout = absl::Seconds(120);
  absl::Duration total_timeout = absl::InfiniteDuration();
  std::function<void(const FetchProgress&)> progress;  // called at most every 200 ms
  uint64_t seed = 0;                                   // jitter; 0 = from the clock
  const Clock* clock = nullptr;  // deadlines, backoff and rates; nullptr = the real clock
  // Set to true from another thread to stop a fetch (Cancelled; DIR.partial kept for resume).
  const std::atomic<bool>* cancel = nullptr;
};

struct FetchStats {
  int64_t origin_bytes = 0;   // body bytes received this run
  int64_t resumed_bytes = 0;  // verified bytes kept from an earlier run
  int64_t total_bytes = 0;
  int retries = 0;
  int refetched_files = 0;  // after a checksum mismatch
  double seconds = 0;
  bool already_complete = false;
};

absl::StatusOr<std::vector<FileSpec>> ResolveSource(const std::string& source,
                                                    const FetchOptions& options);

// tessera-manifest.json: {"files": [{"name", "size", "sha256" (optional)}, ...]}, at least one;
// names safe (ValidateRelativeName) and unique, sizes whole bytes below 2^63, sha256 64 hex
// digits (returned lowercase). Errors name `source` and the entry. Leaves url and s3 empty.
absl::StatusOr<std::vector<FileSpec>> ParseManifest(const std::string& source,
                                                    const std::string& body);

// Asks the origin (HEAD) for every size still unknown (-1).
absl::Status FillSizes(std::vector<FileSpec>* files, const FetchOptions& options);

absl::StatusOr<FetchStats> FetchModel(const std::vector<FileSpec>& files, const std::string& dir,
                                      const FetchOptions& options);

}  // namespace tessera::adapters::objstore
