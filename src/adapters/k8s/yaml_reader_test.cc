// ParseYamlDocuments' refusals, and SetListItemScalars: edits one list item's scalar entries and
// keeps every other byte.
#include "adapters/k8s/yaml_reader.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;
using Values = std::vector<std::pair<std::string, std::string>>;

constexpr char kTwoServices[] = R"(# scaler for the chat models
apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
services:
  - name: chat-small   # the small one
    targetUtilization: 0.75  # tuned on 2026-11
    coldStart: 60s
  - name: chat-large
    targetUtilization: "0.6"
    maxReplicas: 8
)";

TEST(ParseYamlDocuments, RefusesAKeyGivenTwiceInOneMap) {
  absl::StatusOr<std::vector<YAML::Node>> docs = ParseYamlDocuments(
      "d.yaml", "services:\n  - name: a\n    minReplicas: 1\n    \"minReplicas\": 2\n");
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.status().message(),
              HasSubstr("d.yaml:4:5: duplicate key \"minReplicas\" (first at line 3)"));
  docs = ParseYamlDocuments("d.json", R"({"a": {"b": 1, "c": 2, "b": 3}})");
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.status().message(), HasSubstr("d.json:1:24: duplicate key \"b\""));
  // The same key in two maps, or in two documents, is no duplicate; nor are list items.
  docs = ParseYamlDocuments(
      "d.yaml", "- {name: a, x: 1}\n- {name: b, x: 1}\n- [x, x]\n---\nname: c\n---\nname: c\n");
  ASSERT_TRUE(docs.ok()) << docs.status();
  EXPECT_EQ(docs->size(), 3);
}

TEST(SetListItemScalars, ReplacesPresentAndAddsAbsentEntriesKeepingTheRest) {
  absl::StatusOr<std::string> out = SetListItemScalars(
      "s.yaml", kTwoServices, "services", 1,
      Values{{"targetUtilization", "0.95"}, {"scaleDownWindow", "5m"}, {"minReplicas", "2"}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, R"(# scaler for the chat models
apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
services:
  - name: chat-small   # the small one
    targetUtilization: 0.75  # tuned on 2026-11
    coldStart: 60s
  - name: chat-large
    targetUtilization: 0.95
    maxReplicas: 8
    scaleDownWindow: 5m
    minReplicas: 2
)");
  // The first item: a value with a comment after it keeps the comment.
  out = SetListItemScalars("s.yaml", kTwoServices, "services", 0,
                           Values{{"targetUtilization", "0.8"}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, HasSubstr("    targetUtilization: 0.8  # tuned on 2026-11\n    coldStart"));
  EXPECT_THAT(*out, HasSubstr("targetUtilization: \"0.6\""));
  // Nothing to set: the text unchanged.
  out = SetListItemScalars("s.yaml", kTwoServices, "services", 0, Values{});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, kTwoServices);
}

TEST(SetListItemScalars, KeepsTheLineEndingAndAddsOneAtTheEnd) {
  const std::string crlf =
      "services:\r\n- name: a\r\n  maxReplicas: 3\r\n- {name: b, maxReplicas: 4}\r\n";
  absl::StatusOr<std::string> out =
      SetListItemScalars("c.yaml", crlf, "services", 0, Values{{"minReplicas", "1"}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "services:\r\n- name: a\r\n  maxReplicas: 3\r\n  minReplicas: 1\r\n"
            "- {name: b, maxReplicas: 4}\r\n");
  // The entry to add after is on the last line, which has no line ending.
  out = SetListItemScalars("e.yaml", "services:\n  - name: a", "services", 0,
                           Values{{"minReplicas", "1"}, {"maxReplicas", "9"}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "services:\n  - name: a\n    minReplicas: 1\n    maxReplicas: 9");
}

TEST(SetListItemScalars, EditsAFlowMapInPlace) {
  const std::string flow =
      "services:\n- name: a\n- {name: b, maxReplicas: 4,\n   coldStart: 90s}\n- {name: c,}\n";
  absl::StatusOr<std::string> out = SetListItemScalars(
      "f.yaml", flow, "services", 1, Values{{"maxReplicas", "6"}, {"scaleDownQuantile", "0.9"}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "services:\n- name: a\n- {name: b, maxReplicas: 6,\n   coldStart: 90s, "
            "scaleDownQuantile: 0.9}\n- {name: c,}\n");
  // After a trailing comma no second one.
  out = SetListItemScalars("f.yaml", flow, "services", 2, Values{{"minReplicas", "0"}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, HasSubstr("- {name: c, minReplicas: 0}\n"));
}

TEST(SetListItemScalars, RefusesWhatItCannotEditWithWhereAndWhy) {
  const std::string text =
      "services:\n  - name: a\n    seasonalPeriods: [1h, 24h]\n  - plain\n"
      "  - seasonalRepeats: &r 3\n    minReplicas: *r\n";
  absl::StatusOr<std::string> out =
      SetListItemScalars("x.yaml", text, "services", 0, Values{{"seasonalPeriods", "1h"}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("x.yaml:2:5: services[0].seasonalPeriods: its value is a list"));
  out = SetListItemScalars("x.yaml", text, "services", 1, Values{{"minReplicas", "1"}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("x.yaml:4:5: services[1]: expected a map"));
  out = SetListItemScalars("x.yaml", text, "services", 2, Values{{"minReplicas", "1"}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("services[2].minReplicas: its value is"));
  out = SetListItemScalars("x.yaml", text, "services", 3, Values{{"minReplicas", "1"}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("x.yaml: services has 3 items, not item 3"));
  out = SetListItemScalars("x.yaml", "kind: ScalerConfig\nservices: {}\n", "services", 0,
                           Values{{"minReplicas", "1"}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("no list under the top-level key \"services\""));
  // Only a block value to add after.
  out = SetListItemScalars("x.yaml", "services:\n- name: |\n    a\n", "services", 0,
                           Values{{"minReplicas", "1"}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("no entry with a one-line value to add"));
  // Not YAML at all.
  out = SetListItemScalars("x.yaml", "services: [\n", "services", 0, Values{});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("x.yaml:2:1: malformed YAML"));
}

}  // namespace
}  // namespace tessera::adapters
