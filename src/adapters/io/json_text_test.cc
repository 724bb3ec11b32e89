#include "adapters/io/json_text.h"

#include <string>

#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using nlohmann::json;

TEST(JsonText, QuoteJsonGivesScalarsAsWrittenContainersByKindAndSize) {
  EXPECT_EQ(QuoteJson(json(64)), "64");
  EXPECT_EQ(QuoteJson(json(-1.5)), "-1.5");
  EXPECT_EQ(QuoteJson(json(true)), "true");
  EXPECT_EQ(QuoteJson(json(nullptr)), "null");
  EXPECT_EQ(QuoteJson(json("65")), "\"65\"");
  EXPECT_EQ(QuoteJson(json::array()), "an array of 0 elements");
  EXPECT_EQ(QuoteJson(json::array({1})), "an array of 1 element");
  EXPECT_EQ(QuoteJson(json{{"a", 1}, {"b", 2}}), "an object of 2 members");
  // A long string is cut to 64 bytes, at a character boundary (here after 20 two-byte ones).
  EXPECT_EQ(QuoteJson(json(std::string(1000, 'x'))), "\"" + std::string(59, 'x') + "...\"");
  std::string e_acute;
  for (int i = 0; i < 100; ++i) e_acute += "\xc3\xa9";
  const std::string q = QuoteJson(json(e_acute));
  EXPECT_LE(q.size(), 64u);
  EXPECT_EQ(q.substr(0, 5), "\"\xc3\xa9\xc3\xa9");
  EXPECT_EQ(q.substr(q.size() - 6), "\xc3\xa9...\"");
  // Deep nesting is never walked.
  json deep = json::parse(std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_EQ(QuoteJson(deep), "an array of 1 element");
}

TEST(JsonText, JsonDepthCountsBracketsOutsideStrings) {
  EXPECT_EQ(JsonDepth(""), 0u);
  EXPECT_EQ(JsonDepth("17"), 0u);
  EXPECT_EQ(JsonDepth("[]"), 1u);
  EXPECT_EQ(JsonDepth(R"({"a": [1, {"b": []}], "c": {}})"), 4u);
  // Brackets in strings, escaped quotes and escaped backslashes before a closing quote.
  EXPECT_EQ(JsonDepth(R"({"a": "[[[{{{"})"), 1u);
  EXPECT_EQ(JsonDepth(R"(["\"[[[", "x\\", [1]])"), 2u);
  EXPECT_EQ(JsonDepth(R"(["\\"])"), 1u);
  // Not JSON: a number all the same, and no underflow.
  EXPECT_EQ(JsonDepth("]]]["), 1u);
  EXPECT_EQ(JsonDepth(std::string(100000, '[') + std::string(100000, ']')), 100000u);
}

}  // namespace
}  // namespace tessera::adapters
