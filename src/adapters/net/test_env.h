// Test helper: an environment for code that reads it through a getenv-like function pointer
// (the AWS, Google and Azure credential lookups take one), so that tests never set the
// process's own. Tests set FakeEnvironment() and pass FakeGetenv; each test resets what it set.
//
// Example:
//   FakeEnvironment() = {{"AWS_ACCESS_KEY_ID", "AKID"}, {"AWS_SECRET_ACCESS_KEY", "s"}};
//   AwsCredentialsFromEnvironment("us-west-2", "test", FakeGetenv);
//   FakeEnvironment().clear();
#pragma once

#include <map>
#include <string>

namespace tessera::adapters::testing {

inline std::map<std::string, std::string>& FakeEnvironment() {
  static std::map<std::string, std::string> env;
  return env;
}

inline const char* FakeGetenv(const char* name) {
  auto it = FakeEnvironment().find(name);
  return it == FakeEnvironment().end() ? nullptr : it->second.c_str();
}

}  // namespace tessera::adapters::testing
