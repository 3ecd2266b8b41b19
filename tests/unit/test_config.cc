#include <gtest/gtest.h>
#include <cstdlib>

#include "core/config.h"
#include "core/error.h"

using namespace conflux;

TEST(Config, DefaultsApplyWhenUnset) {
  unsetenv("CONFLUX_TIMEOUT_MS");
  EXPECT_EQ(config::getInt(config::Var::TIMEOUT_MS), 30000);
}

TEST(Config, EnvironmentOverridesDefault) {
  setenv("CONFLUX_TIMEOUT_MS", "1234", 1);
  EXPECT_EQ(config::getInt(config::Var::TIMEOUT_MS), 1234);
  unsetenv("CONFLUX_TIMEOUT_MS");
}

TEST(Config, BadIntegerNamesTheVariable) {
  setenv("CONFLUX_TIMEOUT_MS", "12x", 1);
  try {
    config::getInt(config::Var::TIMEOUT_MS);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("CONFLUX_TIMEOUT_MS"), std::string::npos);
  }
  unsetenv("CONFLUX_TIMEOUT_MS");
}

TEST(Config, EveryVariableIsDocumented) {
  for (const auto& v : config::all()) {
    EXPECT_EQ(std::string(v.name).rfind("CONFLUX_", 0), 0u);
    EXPECT_GT(std::string(v.doc).size(), 10u) << v.name;
  }
  EXPECT_NE(config::describeAll().find("CONFLUX_ALGO"), std::string::npos);
}
