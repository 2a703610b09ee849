// Shared by the tests of the loader's quick parse (input::load_with_citations_set_after): two YAML
// trees compared node for node (type, tag, style, line, column, text).
#pragma once

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>

namespace racksim::testing {

inline void expect_same_tree(const YAML::Node& a, const YAML::Node& b, const std::string& where) {
  ASSERT_EQ(a.Type(), b.Type()) << where;
  EXPECT_EQ(a.Tag(), b.Tag()) << where;
  EXPECT_EQ(a.Style(), b.Style()) << where;
  EXPECT_EQ(a.Mark().line, b.Mark().line) << where;
  EXPECT_EQ(a.Mark().column, b.Mark().column) << where;
  if (a.IsScalar()) {
    EXPECT_EQ(a.Scalar(), b.Scalar()) << where;
  }
  ASSERT_EQ(a.size(), b.size()) << where;
  if (a.IsSequence())
    for (std::size_t i = 0; i < a.size(); ++i) expect_same_tree(a[i], b[i], where + "[" + std::to_string(i) + "]");
  if (a.IsMap())
    for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j) {
      expect_same_tree(i->first, j->first, where + " key");
      expect_same_tree(i->second, j->second, where + "." + i->first.Scalar());
    }
}

}  // namespace racksim::testing
