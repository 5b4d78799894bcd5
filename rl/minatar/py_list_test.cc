// Copyright dreplay authors.
//
// PyList against what CPython does; the expected visits were printed by
// running the same loops on Python lists of objects that compare by value.

#include "rl/minatar/py_list.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dreplay::rl::minatar {
namespace {

using ::testing::ElementsAre;

// Compares by value only, so that two objects can be equal.
struct Tagged {
  int value;
  std::string tag;
  bool operator==(const Tagged& o) const { return value == o.value; }
};

std::vector<std::string> Tags(const PyList<Tagged>& list) {
  std::vector<std::string> tags;
  for (const auto& item : list.items()) tags.push_back(item->tag);
  return tags;
}

TEST(PyListTest, RemovingAnEarlierEqualElementVisitsTheCurrentOneTwice) {
  PyList<Tagged> list;
  for (const Tagged& t : {Tagged{1, "a"}, Tagged{2, "b"}, Tagged{1, "c"}, Tagged{3, "d"}}) {
    list.Append(t);
  }
  std::vector<std::string> seen;
  list.ForEachReversed([&](Tagged& x) {
    seen.push_back(x.tag);
    if (x.value == 1) list.Remove(x);
  });
  EXPECT_THAT(seen, ElementsAre("d", "c", "c", "b"));
  EXPECT_THAT(Tags(list), ElementsAre("b", "d"));
}

TEST(PyListTest, IterationStopsWhenTheIndexFallsOutsideTheShrunkList) {
  PyList<Tagged> list;
  for (const Tagged& t : {Tagged{5, "a"}, Tagged{6, "b"}, Tagged{7, "c"}}) list.Append(t);
  std::vector<std::string> seen;
  list.ForEachReversed([&](Tagged& x) {
    seen.push_back(x.tag);
    if (x.value == 7) {
      list.Remove(Tagged{5, ""});
      list.Remove(Tagged{6, ""});
    }
  });
  EXPECT_THAT(seen, ElementsAre("c"));
  EXPECT_THAT(Tags(list), ElementsAre("c"));
}

TEST(PyListTest, AnElementRemovedDuringItsVisitStaysUsable) {
  PyList<Tagged> list;
  list.Append(Tagged{1, "a"});
  list.ForEachReversed([&](Tagged& x) {
    list.Remove(x);
    x.tag = "changed after removal";  // as Python keeps the object alive
    EXPECT_TRUE(list.empty());
  });
}

}  // namespace
}  // namespace dreplay::rl::minatar
