#include "adapters/objstore/verify.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace tessera::adapters::objstore {
namespace {

std::string Hex(const unsigned char* d, unsigned n) {
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(d), n));
}

// Bytes per element; 0 for unknown. Sub-byte types are rejected as unknown here.
int DtypeSize(const std::string& d) {
  static const std::map<std::string, int> kSizes = {
      {"F64", 8}, {"F32", 4},     {"F16", 2},     {"BF16", 2},   {"I64", 8}, {"I32", 4},
      {"I16", 2}, {"I8", 1},      {"U8", 1},      {"BOOL", 1},   {"U16", 2}, {"U32", 4},
      {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1}};
  auto it = kSizes.find(d);
  return it == kSizes.end() ? 0 : it->second;
}

}  // namespace

absl::Status ValidateRelativeName(absl::string_view name) {
  std::string quoted = absl::StrCat("\"", absl::CHexEscape(name.substr(0, 200)), "\"");
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("unsafe file name ", quoted, ": ", why));
  };
  if (name.empty()) return bad("empty");
  if (name.size() > 1024) return bad("longer than 1024 bytes");
  if (name.find('\0') != absl::string_view::npos) return bad("contains a NUL byte");
  if (name.find('\\') != absl::string_view::npos) return bad("contains a backslash");
  if (name.front() == '/') return bad("absolute path");
  for (absl::string_view seg : absl::StrSplit(name, '/')) {
    if (seg.empty()) return bad("empty path segment");
    if (seg == "." || seg == "..") return bad("'.' or '..' segment");
  }
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) return bad("contains a control character");
  }
  return absl::OkStatus();
}

bool IsSha256Hex(absl::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return absl::ascii_isxdigit(static_cast<unsigned char>(c));
         });
}

std::string Sha256Hex(absl::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
  return Hex(md, n);
}

absl::StatusOr<std::string> Sha256File(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (f == nullptr) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) {
    EVP_DigestUpdate(ctx.get(), buf.data(), n);
  }
  if (std::ferror(f.get())) return absl::DataLossError(absl::StrCat(path, ": read error"));
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  return Hex(md, len);
}

absl::Status VerifySafetensors(const std::string& path) {
  auto bad = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat(path, ": not a valid safetensors file: ", why));
  };
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  if (size < 8) return bad("shorter than the 8-byte header size");
  in.seekg(0);
  unsigned char le[8];
  in.read(reinterpret_cast<char*>(le), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | le[i];
  if (n > 100'000'000) return bad(absl::StrCat("header size ", n, " above 100,000,000"));
  if (8 + n > size)
    return bad(absl::StrCat("header size ", n, " runs past the file (", size, " bytes)"));
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  if (!in) return bad("short read of the header");
  if (header.empty() || header[0] != '{') return bad("header does not start with '{'");
  nlohmann::json j = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return bad("header is not a JSON object");
  const uint64_t buffer = size - 8 - n;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const nlohmann::json& t = it.value();
    std::string at = absl::StrCat("tensor \"", it.key(), "\": ");
    if (!t.is_object() || !t.contains("dtype") || !t["dtype"].is_string() || !t.contains("shape") ||
        !t["shape"].is_array() || !t.contains("data_offsets") || !t["data_offsets"].is_array() ||
        t["data_offsets"].size() != 2) {
      return bad(at + "expected dtype, shape and data_offsets [BEGIN, END]");
    }
    int esize = DtypeSize(t["dtype"].get<std::string>());
    if (esize == 0) return bad(at + "unknown dtype " + t["dtype"].get<std::string>());
    uint64_t numel = 1;
    for (const nlohmann::json& d : t["shape"]) {
      if (!d.is_number_unsigned()) return bad(at + "shape must hold non-negative integers");
      uint64_t v = d.get<uint64_t>();
      if (v != 0 && numel > UINT64_MAX / v) return bad(at + "shape overflows");
      numel *= v;
    }
    const nlohmann::json& off = t["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      return bad(at + "data_offsets must be non-negative integers");
    }
    uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e || e > buffer) {
      return bad(at + absl::StrCat("data_offsets [", b, ", ", e, ") outside the ", buffer,
                                   "-byte buffer"));
    }
    if (numel > UINT64_MAX / esize) return bad(at + "shape overflows at its dtype's size");
    if (e - b != numel * esize) {
      return bad(at +
                 absl::StrCat("holds ", e - b, " bytes; its shape and dtype need ", numel * esize));
    }
    ranges.emplace_back(b, e);
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t next = 0;
  for (const auto& [b, e] : ranges) {
    if (b != next) {
      return bad(b < next ? absl::StrCat("tensors overlap at byte ", b)
                          : absl::StrCat("hole in the buffer at byte ", next));
    }
    next = e;
  }
  if (next != buffer) {
    return bad(absl::StrCat("tensors end at byte ", next, " of a ", buffer, "-byte buffer"));
  }
  return absl::OkStatus();
}

}  // namespace tessera::adapters::objstore
