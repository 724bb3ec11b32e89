#include "adapters/trace/llm_traces.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "adapters/io/files.h"
#include "adapters/k8s/yaml_reader.h"
#include "base/memory.h"
#include "base/status.h"

namespace tessera::adapters {
namespace {

// The text without its byte order mark and without the lines of whitespace alone that end it (an
// editor's or a script's extra newlines end the file; a blank line within it is still a
// malformed row).
absl::string_view Body(const std::string& text) {
  absl::string_view body = WithoutUtf8Bom(text);
  const size_t last = body.find_last_not_of(" \t\n\v\f\r");
  if (last == absl::string_view::npos) return {};
  const size_t eol = body.find('\n', last);
  return eol == absl::string_view::npos ? body : body.substr(0, eol);
}

// Its lines, each without a CR that ends it (none when the body is empty).
std::vector<absl::string_view> Lines(const std::string& text) {
  const absl::string_view body = Body(text);
  if (body.empty()) return {};
  std::vector<absl::string_view> lines = absl::StrSplit(body, '\n');
  for (absl::string_view& l : lines) absl::ConsumeSuffix(&l, "\r");
  return lines;
}

// `line` split at each ',' into `fields` (cleared first; "" is one empty field), as
// absl::StrSplit(line, ',') would, without allocating once `fields` has grown.
void SplitFields(absl::string_view line, std::vector<absl::string_view>* fields) {
  fields->clear();
  for (size_t start = 0;;) {
    const size_t comma = line.find(',', start);
    if (comma == absl::string_view::npos) {
      fields->push_back(line.substr(start));
      return;
    }
    fields->push_back(line.substr(start, comma - start));
    start = comma + 1;
  }
}

absl::Status Error(const std::string& file, size_t line, size_t column, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(file, ":", line, ":", column, ": ", what));
}

// 1-based column of field `i` of `fields` within its line.
size_t Column(const std::vector<absl::string_view>& fields, size_t i) {
  size_t col = 1;
  for (size_t k = 0; k < i; ++k) col += fields[k].size() + 1;
  return col;
}

// The 2023 release writes naive UTC times with 7 fractional digits (2023-11-16 18:17:03.9799600);
// the 2024 one-week release adds an offset and drops a zero fraction (2024-05-10
// 00:00:00.009930+00:00, 2024-05-10 00:00:01+00:00).
bool ParseAzureTimestamp(absl::string_view text, absl::Time* t) {
  std::string err;
  return absl::ParseTime("%Y-%m-%d %H:%M:%E*S", text, absl::UTCTimeZone(), t, &err) ||
         absl::ParseTime("%Y-%m-%d %H:%M:%E*S%Ez", text, absl::UTCTimeZone(), t, &err);
}

// The digits of `s` as a number; false unless `s` is all ASCII digits (and not empty).
bool Digits(absl::string_view s, int64_t* out) {
  if (s.empty()) return false;
  int64_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// ParseAzureTimestamp for the forms the releases write, without absl's general parser (a
// one-week file has tens of millions of rows): "YYYY-MM-DD HH:MM:SS", then optionally "." and 1
// to 9 digits, then optionally "+HH:MM" or "-HH:MM". The rows are sorted, so consecutive ones
// share their minute: its start is kept in *minute (the text "YYYY-MM-DD HH:MM" and its time).
// Anything it does not take (another form, a field out of range, a leap second) is left to
// ParseAzureTimestamp, which decides: what this accepts, absl::ParseTime accepts as the same
// time.
struct MinuteCache {
  absl::string_view text;
  absl::Time start;
};
bool ParseAzureTimestampFast(absl::string_view s, MinuteCache* minute, absl::Time* t) {
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':') {
    return false;
  }
  int64_t second = 0;
  if (!Digits(s.substr(17, 2), &second) || second > 59) return false;
  absl::Duration offset;
  absl::string_view rest = s.substr(19);
  int64_t nanos = 0;
  if (!rest.empty() && rest[0] == '.') {
    size_t n = 1;
    while (n < rest.size() && rest[n] >= '0' && rest[n] <= '9') ++n;
    if (n == 1 || n > 10 || !Digits(rest.substr(1, n - 1), &nanos)) return false;
    for (size_t k = n - 1; k < 9; ++k) nanos *= 10;
    rest.remove_prefix(n);
  }
  if (!rest.empty()) {
    int64_t hh = 0, mm = 0;
    if (rest.size() != 6 || (rest[0] != '+' && rest[0] != '-') || rest[3] != ':' ||
        !Digits(rest.substr(1, 2), &hh) || !Digits(rest.substr(4, 2), &mm) || hh > 23 || mm > 59) {
      return false;
    }
    offset = absl::Hours(hh) + absl::Minutes(mm);
    if (rest[0] == '-') offset = -offset;
  }
  const absl::string_view head = s.substr(0, 16);
  if (head != minute->text) {
    int64_t y = 0, mo = 0, d = 0, h = 0, mi = 0;
    if (!Digits(head.substr(0, 4), &y) || !Digits(head.substr(5, 2), &mo) ||
        !Digits(head.substr(8, 2), &d) || !Digits(head.substr(11, 2), &h) ||
        !Digits(head.substr(14, 2), &mi) || h > 23 || mi > 59) {
      return false;
    }
    const absl::CivilMinute cm(y, static_cast<int>(mo), static_cast<int>(d), static_cast<int>(h),
                               static_cast<int>(mi));
    // A field civil time would carry over (month 13, February 30) is absl's to refuse.
    if (cm.year() != y || cm.month() != mo || cm.day() != d || cm.hour() != h ||
        cm.minute() != mi) {
      return false;
    }
    minute->text = head;
    minute->start = absl::FromCivil(cm, absl::UTCTimeZone());
  }
  *t = minute->start + absl::Seconds(second) + absl::Nanoseconds(nanos) - offset;
  return true;
}

}  // namespace

absl::StatusOr<std::vector<LlmRequestRow>> ParseAzureLlmTrace(const std::string& file,
                                                              const std::string& text) {
  // Line by line through the text, without a vector of its lines (a one-week file has tens of
  // millions).
  absl::string_view body = Body(text);
  auto next_line = [&body]() {
    const size_t eol = body.find('\n');
    absl::string_view line = body.substr(0, eol);
    body = eol == absl::string_view::npos ? absl::string_view() : body.substr(eol + 1);
    absl::ConsumeSuffix(&line, "\r");
    return line;
  };
  const bool any = !body.empty();
  // Columns by name: the LLM traces (2023, 2024) have exactly these three; the multimodal one
  // (AzureLMMInferenceTrace, 2025) adds NumImages, and a re-export may add more. Others are
  // ignored.
  std::vector<absl::string_view> header;
  if (any) SplitFields(next_line(), &header);
  size_t col[3];
  const char* names[3] = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"};
  for (size_t k = 0; k < 3; ++k) {
    auto it = std::find(header.begin(), header.end(), names[k]);
    if (it == header.end()) {
      return Error(file, 1, 1,
                   absl::StrCat("expected a header with the columns TIMESTAMP, ContextTokens "
                                "and GeneratedTokens (missing ",
                                names[k], ")"));
    }
    col[k] = static_cast<size_t>(it - header.begin());
  }
  std::vector<LlmRequestRow> rows;
  ReserveLarge(rows, static_cast<size_t>(std::count(body.begin(), body.end(), '\n')) + 1);
  absl::Time first;
  absl::Time last = absl::InfinitePast();
  MinuteCache minute;
  std::vector<absl::string_view> f;
  for (size_t i = 1; !body.empty(); ++i) {
    SplitFields(next_line(), &f);
    if (f.size() != header.size()) {
      return Error(file, i + 1, 1,
                   absl::StrCat("expected ", header.size(), " fields, found ", f.size()));
    }
    absl::Time t;
    if (!ParseAzureTimestampFast(f[col[0]], &minute, &t) && !ParseAzureTimestamp(f[col[0]], &t)) {
      return Error(file, i + 1, Column(f, col[0]),
                   absl::StrCat("TIMESTAMP: expected YYYY-MM-DD HH:MM:SS[.fraction] with an "
                                "optional UTC offset (+HH:MM), found \"",
                                f[col[0]], "\""));
    }
    if (t < last) {
      return Error(file, i + 1, Column(f, col[0]), "TIMESTAMP: rows must be sorted by time");
    }
    last = t;
    LlmRequestRow r;
    int64_t* tokens[2] = {&r.context_tokens, &r.generated_tokens};
    for (size_t k = 1; k < 3; ++k) {
      if (!absl::SimpleAtoi(f[col[k]], tokens[k - 1]) || *tokens[k - 1] < 0) {
        return Error(
            file, i + 1, Column(f, col[k]),
            absl::StrCat(names[k], ": expected a whole number >= 0, found \"", f[col[k]], "\""));
      }
    }
    if (rows.empty()) first = t;
    r.arrival_s = absl::ToDoubleSeconds(t - first);
    rows.push_back(r);
  }
  if (rows.empty()) {
    return Error(file, 2, 1, "no requests");
  }
  return rows;
}

absl::StatusOr<std::vector<ServeGenWindow>> ParseServeGenTrace(const std::string& file,
                                                               const std::string& text) {
  std::vector<ServeGenWindow> out;
  std::vector<absl::string_view> lines = Lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<absl::string_view> f = absl::StrSplit(lines[i], ',');
    if (f.size() != 6) {
      return Error(
          file, i + 1, 1,
          absl::StrCat("expected 6 fields (start,rate,cv,distribution,p1,p2), found ", f.size()));
    }
    ServeGenWindow w;
    double* nums[] = {&w.start_s, &w.rate, &w.cv};
    const char* names[] = {"window start", "rate", "cv"};
    for (size_t k = 0; k < 3; ++k) {
      if (!absl::SimpleAtod(f[k], nums[k]) || !std::isfinite(*nums[k]) || *nums[k] < 0) {
        return Error(file, i + 1, Column(f, k),
                     absl::StrCat(names[k], ": expected a number >= 0, found \"", f[k], "\""));
      }
    }
    w.distribution = std::string(f[3]);
    if (w.rate > 0 && w.distribution != "Gamma" && w.distribution != "Weibull") {
      return Error(file, i + 1, Column(f, 3),
                   absl::StrCat("distribution: expected Gamma or Weibull for a rate above 0, "
                                "found \"",
                                f[3], "\""));
    }
    for (size_t k = 4; k < 6; ++k) {
      double* v = k == 4 ? &w.p1 : &w.p2;
      if (!absl::SimpleAtod(f[k], v) || !std::isfinite(*v) || *v < 0 || (w.rate > 0 && *v <= 0)) {
        return Error(file, i + 1, Column(f, k),
                     absl::StrCat("parameter: expected a number above 0, found \"", f[k], "\""));
      }
    }
    if (!out.empty() && w.start_s <= out.back().start_s) {
      return Error(file, i + 1, 1, "window start: rows must be in increasing time");
    }
    out.push_back(w);
  }
  if (out.empty()) {
    return Error(file, 1, 1, "no windows");
  }
  return out;
}

absl::StatusOr<std::vector<RateStep>> ParsePromRangeRate(const std::string& file,
                                                         const std::string& text) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> docs, ParseYamlDocuments(file, text));
  if (docs.size() != 1) {
    return Error(file, 1, 1, "expected one JSON object (a /api/v1/query_range response body)");
  }
  Field root(file, docs[0], "");
  TESSERA_RETURN_IF_ERROR(root.RequireMap());
  TESSERA_ASSIGN_OR_RETURN(std::string status, root.Get("status").String());
  if (status != "success") {
    TESSERA_ASSIGN_OR_RETURN(std::string error, root.Get("error").StringOr(""));
    return root.Get("status").Error(absl::StrCat("expected \"success\", found \"", status, "\"",
                                                 error.empty() ? "" : ": ", error));
  }
  Field data = root.Get("data");
  TESSERA_RETURN_IF_ERROR(data.RequireMap());
  TESSERA_ASSIGN_OR_RETURN(std::string type, data.Get("resultType").String());
  if (type != "matrix") {
    return data.Get("resultType")
        .Error(absl::StrCat(
            "expected \"matrix\" (the body of /api/v1/query_range, not /api/v1/query), found \"",
            type, "\""));
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<Field> series, data.Get("result").Items());
  if (series.size() != 1) {
    return data.Get("result").Error(absl::StrCat(
        "expected one series (aggregate the query, e.g. sum(rate(...))), found ", series.size()));
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<Field> values, series[0].Get("values").Items());
  std::vector<std::pair<double, double>> samples;  // (unix seconds, rate)
  for (const Field& v : values) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<Field> pair, v.Items());
    if (pair.size() != 2) return v.Error("expected [time, \"value\"]");
    TESSERA_ASSIGN_OR_RETURN(std::string ts, pair[0].String());
    TESSERA_ASSIGN_OR_RETURN(std::string val, pair[1].String());
    double t = 0, rate = 0;
    if (!absl::SimpleAtod(ts, &t) || !std::isfinite(t)) {
      return pair[0].Error(absl::StrCat("expected a Unix time in seconds, found \"", ts, "\""));
    }
    if (!absl::SimpleAtod(val, &rate) || !std::isfinite(rate) || rate < 0) {
      return pair[1].Error(absl::StrCat(
          "expected a request rate (a number >= 0, requests per second), found \"", val, "\""));
    }
    if (!samples.empty() && t <= samples.back().first) {
      return pair[0].Error("samples must be in increasing time");
    }
    samples.emplace_back(t, rate);
  }
  if (samples.size() < 2) {
    return series[0].Get("values").Error(absl::StrCat(
        "expected at least 2 samples (the step is their spacing), found ", samples.size()));
  }
  double step = samples[1].first - samples[0].first;
  for (size_t i = 2; i < samples.size(); ++i) {
    step = std::min(step, samples[i].first - samples[i - 1].first);
  }
  std::vector<RateStep> out;
  out.reserve(samples.size());
  for (const auto& [t, rate] : samples) {
    out.push_back({t - samples.front().first, step, rate});
  }
  return out;
}

}  // namespace tessera::adapters
