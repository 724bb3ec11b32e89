#include "adapters/trace/openb_csv.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "adapters/io/files.h"

namespace tessera::adapters {
namespace {

using placement::gpushare::NodeSpec;
using placement::gpushare::PodSpec;

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<int> lines;  // 1-based line of each row
};

absl::StatusOr<Table> ParseCsv(const std::string& file, const std::string& text,
                               const std::vector<std::string>& required) {
  Table t;
  int line = 0;
  for (absl::string_view raw : absl::StrSplit(WithoutUtf8Bom(text), '\n')) {
    ++line;
    absl::string_view l = absl::StripSuffix(raw, "\r");
    if (l.empty()) {
      continue;
    }
    std::vector<std::string> cells = absl::StrSplit(l, ',');
    if (t.header.empty()) {
      t.header = cells;
      continue;
    }
    if (cells.size() != t.header.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ":", line, ": expected ", t.header.size(), " columns, found ", cells.size()));
    }
    t.rows.push_back(std::move(cells));
    t.lines.push_back(line);
  }
  if (t.header.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": empty file (expected a CSV header)"));
  }
  for (const std::string& col : required) {
    if (std::find(t.header.begin(), t.header.end(), col) == t.header.end()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ":1: missing column \"", col, "\""));
    }
  }
  return t;
}

int Column(const Table& t, const std::string& name) {
  auto it = std::find(t.header.begin(), t.header.end(), name);
  return it == t.header.end() ? -1 : static_cast<int>(it - t.header.begin());
}

absl::StatusOr<int64_t> Int(const std::string& file, const Table& t, size_t row, int col,
                            int64_t min, int64_t max) {
  int64_t v = 0;
  const std::string& cell = t.rows[row][col];
  bool ok = absl::SimpleAtoi(cell, &v);
  double d = 0;
  // A whole number written as a float ("12000.0": pandas writes an integer column that way once
  // any cell of it is missing) is that integer.
  if (!ok && absl::SimpleAtod(cell, &d) && std::isfinite(d) && d == std::floor(d) &&
      std::abs(d) <= static_cast<double>(max)) {
    v = static_cast<int64_t>(d);
    ok = true;
  }
  if (!ok || v < min || v > max) {
    return absl::InvalidArgumentError(absl::StrCat(file, ":", t.lines[row], ": column ",
                                                   t.header[col], ": expected an integer from ",
                                                   min, " to ", max, ", found \"", cell, "\""));
  }
  return v;
}

constexpr int64_t kMaxQuantity = int64_t{1} << 40;

// The cells (column, max) of row `row` as integers from 0 to max, or the first error.
absl::StatusOr<std::vector<int64_t>> Ints(const std::string& file, const Table& t, size_t row,
                                          std::initializer_list<std::pair<int, int64_t>> cells) {
  std::vector<int64_t> out;
  for (const auto& [col, max] : cells) {
    absl::StatusOr<int64_t> v = Int(file, t, row, col, 0, max);
    if (!v.ok()) {
      return v.status();
    }
    out.push_back(*v);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<NodeSpec>> ParseOpenbNodes(const std::string& file,
                                                      const std::string& text) {
  absl::StatusOr<Table> t = ParseCsv(file, text, {"sn", "cpu_milli", "memory_mib", "gpu", "model"});
  if (!t.ok()) {
    return t.status();
  }
  std::vector<NodeSpec> out;
  int sn = Column(*t, "sn"), cpu = Column(*t, "cpu_milli"), mem = Column(*t, "memory_mib"),
      gpu = Column(*t, "gpu"), model = Column(*t, "model");
  for (size_t r = 0; r < t->rows.size(); ++r) {
    NodeSpec n;
    n.name = t->rows[r][sn];
    absl::StatusOr<std::vector<int64_t>> v =
        Ints(file, *t, r, {{cpu, kMaxQuantity}, {mem, kMaxQuantity}, {gpu, 64}});
    if (!v.ok()) {
      return v.status();
    }
    n.cpu_milli = (*v)[0];
    n.memory_mib = (*v)[1];
    n.gpus = static_cast<int>((*v)[2]);
    n.model = t->rows[r][model];
    if (n.gpus > 0 && n.model.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ":", t->lines[r], ": column model: empty for a node with GPUs"));
    }
    out.push_back(std::move(n));
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": no nodes"));
  }
  return out;
}

absl::StatusOr<std::vector<PodSpec>> ParseOpenbPods(const std::string& file,
                                                    const std::string& text) {
  absl::StatusOr<Table> t =
      ParseCsv(file, text, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"});
  if (!t.ok()) {
    return t.status();
  }
  std::vector<PodSpec> out;
  int name = Column(*t, "name"), cpu = Column(*t, "cpu_milli"), mem = Column(*t, "memory_mib"),
      num = Column(*t, "num_gpu"), milli = Column(*t, "gpu_milli"), spec = Column(*t, "gpu_spec");
  for (size_t r = 0; r < t->rows.size(); ++r) {
    PodSpec p;
    p.name = t->rows[r][name];
    absl::StatusOr<std::vector<int64_t>> v =
        Ints(file, *t, r, {{cpu, kMaxQuantity}, {mem, kMaxQuantity}, {num, 64}, {milli, 1000}});
    if (!v.ok()) {
      return v.status();
    }
    p.cpu_milli = (*v)[0];
    p.memory_mib = (*v)[1];
    p.num_gpu = static_cast<int>((*v)[2]);
    p.gpu_milli = (*v)[3];
    if ((p.num_gpu == 0) != (p.gpu_milli == 0) || (p.num_gpu > 1 && p.gpu_milli != 1000)) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ":", t->lines[r], ": num_gpu ", p.num_gpu, " with gpu_milli ", p.gpu_milli,
          " (expected 0 with 0, 1 with 1-1000, or several GPUs with 1000)"));
    }
    // No constraint: an empty cell, or "nan" (the dataset's README: a pandas export of an empty
    // cell); otherwise the models allowed, separated by '|'.
    if (spec >= 0 && !t->rows[r][spec].empty() &&
        !absl::EqualsIgnoreCase(t->rows[r][spec], "nan")) {
      p.gpu_spec = absl::StrSplit(t->rows[r][spec], '|', absl::SkipEmpty());
    }
    out.push_back(std::move(p));
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": no pods"));
  }
  return out;
}

}  // namespace tessera::adapters
