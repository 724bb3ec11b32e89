#include "adapters/objstore/s3_list.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tessera::adapters::objstore {
namespace {

absl::StatusOr<std::string> DecodeText(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out.push_back(s[i]);
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == absl::string_view::npos || semi - i > 10) {
      return absl::InvalidArgumentError("unterminated XML entity");
    }
    absl::string_view ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp")
      out.push_back('&');
    else if (ent == "lt")
      out.push_back('<');
    else if (ent == "gt")
      out.push_back('>');
    else if (ent == "quot")
      out.push_back('"');
    else if (ent == "apos")
      out.push_back('\'');
    else if (absl::StartsWith(ent, "#")) {
      uint32_t cp = 0;
      bool ok = absl::StartsWith(ent, "#x") ? absl::SimpleHexAtoi(ent.substr(2), &cp)
                                            : absl::SimpleAtoi(ent.substr(1), &cp);
      if (!ok || cp == 0 || cp > 0x10FFFF) {
        return absl::InvalidArgumentError(absl::StrCat("bad character reference &", ent, ";"));
      }
      // UTF-8 encode.
      if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
      } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown XML entity &", ent, ";"));
    }
    i = semi;
  }
  return out;
}

// The text of the first <tag>...</tag> in `s` from `from`; npos-safe.
bool Element(absl::string_view s, absl::string_view tag, size_t from, absl::string_view* text,
             size_t* end) {
  std::string open = absl::StrCat("<", tag, ">"), close = absl::StrCat("</", tag, ">");
  size_t a = s.find(open, from);
  if (a == absl::string_view::npos) return false;
  size_t b = s.find(close, a + open.size());
  if (b == absl::string_view::npos) return false;
  *text = s.substr(a + open.size(), b - a - open.size());
  *end = b + close.size();
  return true;
}

}  // namespace

absl::StatusOr<S3ListPage> ParseListObjectsV2(const std::string& xml) {
  absl::string_view s(xml);
  if (!absl::StrContains(s, "<ListBucketResult")) {
    std::string err = S3ErrorSummary(xml);
    return absl::InvalidArgumentError(err.empty() ? "expected a ListBucketResult document"
                                                  : absl::StrCat("S3 error ", err));
  }
  S3ListPage page;
  size_t pos = 0, end = 0;
  absl::string_view contents;
  while (Element(s, "Contents", pos, &contents, &end)) {
    pos = end;
    absl::string_view key, size, etag;
    size_t e2 = 0;
    if (!Element(contents, "Key", 0, &key, &e2) || !Element(contents, "Size", 0, &size, &e2)) {
      return absl::InvalidArgumentError("a <Contents> entry without <Key> or <Size>");
    }
    S3Object o;
    absl::StatusOr<std::string> k = DecodeText(key);
    if (!k.ok()) return k.status();
    o.key = *k;
    if (!absl::SimpleAtoi(size, &o.size) || o.size < 0) {
      return absl::InvalidArgumentError(absl::StrCat("<Size>", size, "</Size> of ", o.key));
    }
    if (Element(contents, "ETag", 0, &etag, &e2)) {
      absl::StatusOr<std::string> t = DecodeText(etag);
      if (t.ok()) o.etag = *t;
    }
    page.objects.push_back(std::move(o));
  }
  absl::string_view t;
  // <IsTruncated> and <NextContinuationToken> follow or precede the Contents; search the rest.
  std::string tail(s);
  size_t e = 0;
  if (Element(tail, "IsTruncated", 0, &t, &e)) page.truncated = t == "true";
  if (Element(tail, "NextContinuationToken", 0, &t, &e)) {
    absl::StatusOr<std::string> tok = DecodeText(t);
    if (!tok.ok()) return tok.status();
    page.next_token = *tok;
  }
  if (page.truncated && page.next_token.empty()) {
    return absl::InvalidArgumentError("a truncated listing without <NextContinuationToken>");
  }
  return page;
}

absl::StatusOr<std::string> XmlText(const std::string& xml, const std::string& tag) {
  absl::string_view text;
  size_t end = 0;
  if (!Element(xml, tag, 0, &text, &end)) {
    return absl::NotFoundError(absl::StrCat("no <", tag, "> element"));
  }
  return DecodeText(text);
}

std::string S3ErrorSummary(const std::string& xml) {
  absl::string_view code, msg;
  size_t e = 0;
  if (!absl::StrContains(xml, "<Error>") || !Element(xml, "Code", 0, &code, &e)) return "";
  std::string out(code);
  if (Element(xml, "Message", 0, &msg, &e)) absl::StrAppend(&out, ": ", msg);
  return out;
}

}  // namespace tessera::adapters::objstore
