// The soak's resource bounds (app/soak.cpp): readings that caught a run's buffers pass, a series
// that keeps growing fails naming the process, and threads and fds are bounded by their spread.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "soak.h"

namespace arl::app {
namespace {

SoakSeries::Limits limits() {
  SoakSeries::Limits l;
  l.warmup = 10;
  l.workerRssKb = 4 * 1024;
  l.coordinatorRssKb = 8 * 1024;
  l.threads = 2;
  l.fds = 4;
  return l;
}

ProcessSample at(uint64_t rssKb, int threads = 3, int fds = 11) {
  ProcessSample s;
  s.rssKb = rssKb;
  s.threads = threads;
  s.fds = fds;
  return s;
}

TEST(SoakSeries, ReadingsThatCaughtARunsBuffersAreNoLeak) {
  SoakSeries s;
  // Readings every 10 runs: flat at 3 MiB, with readings of 10 to 17 MiB here and there taken
  // while a large run's buffers were still held, as the 1,000-configuration soak measured.
  for (uint64_t run = 10; run <= 1000; run += 10) {
    const uint64_t kb = run % 270 == 0 ? 17000 : run % 290 == 0 ? 10000 : 3000 + run % 30;
    s.add("worker pid 7", run, at(kb));
  }
  EXPECT_TRUE(s.violations(limits()).empty());
  EXPECT_LE(s.spreads(10).workerRssKb, 20u);
}

TEST(SoakSeries, RssThatKeepsGrowingIsALeakNamingTheProcess) {
  SoakSeries s;
  for (uint64_t run = 10; run <= 1000; run += 10) s.add("worker pid 9", run, at(20000 + run * 20));
  const std::vector<std::string> v = s.violations(limits());
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].find("worker pid 9: RSS kept growing"), std::string::npos) << v[0];
}

TEST(SoakSeries, ThreadsAndFdsAreBoundedByTheirSpread) {
  SoakSeries s;
  for (uint64_t run = 10; run <= 200; run += 10) {
    s.add("coordinator", run, at(50000, run == 150 ? 7 : 4, run == 170 ? 40 : 23));
  }
  const std::vector<std::string> v = s.violations(limits());
  ASSERT_EQ(v.size(), 2u);
  EXPECT_NE(v[0].find("coordinator: threads went from 4 to 7"), std::string::npos) << v[0];
  EXPECT_NE(v[1].find("coordinator: open fds went from 23 to 40"), std::string::npos) << v[1];
}

TEST(SoakSeries, AShortSeriesWithOneLargeReadingIsNoLeak) {
  SoakSeries s;
  for (uint64_t run : {110, 120, 130}) s.add("worker pid 4", run, at(run == 120 ? 18000 : 15000));
  for (uint64_t run : {210, 220, 230, 240}) {
    s.add("worker pid 5", run, at(run == 230 ? 18000 : 15000));
  }
  EXPECT_TRUE(s.violations(limits()).empty());
  EXPECT_EQ(s.spreads(10).workerRssKb, 0u);
}

TEST(SoakSeries, ReadingsBeforeTheWarmUpAreNotCounted) {
  SoakSeries s;
  s.add("worker pid 3", 5, at(1000));
  s.add("worker pid 3", 20, at(90000));
  s.add("worker pid 3", 30, at(90000));
  EXPECT_TRUE(s.violations(limits()).empty());
  const std::string csv = s.csv();
  EXPECT_NE(csv.find("worker pid 3,5,1000,0,0,3,11"), std::string::npos) << csv;
}

}  // namespace
}  // namespace arl::app
