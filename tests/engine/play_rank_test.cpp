// Play a rank (schedule/play_rank.h): the checker accepts every move of a verified schedule,
// in any order within a step, and refuses every other move, with a reason and the right move;
// a game played along the schedule ends with the played rank holding every chunk's full sum.
#include "schedule/play_rank.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "schedule/generators.h"

namespace arl {
namespace {

struct Case {
  std::string algorithm;
  int nranks;
  int ranksPerHost = 0;
};

std::string caseName(const ::testing::TestParamInfo<Case>& i) {
  std::string s = i.param.algorithm + "_" + std::to_string(i.param.nranks);
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

// Every move a student could make at this point: each send (chunk, peer), each arrival
// (chunk, peer, add or copy) and ending the step, chunks and peers one past their ranges.
std::vector<PlayMove> everyMove(const RankGame& g) {
  std::vector<PlayMove> out;
  for (uint32_t c = 0; c <= g.nchunks(); ++c) {
    for (int p = -1; p <= g.nranks(); ++p) {
      out.push_back({PlayMove::Kind::Send, c, p, ArrivalAction::Add});
      out.push_back({PlayMove::Kind::Arrival, c, p, ArrivalAction::Add});
      out.push_back({PlayMove::Kind::Arrival, c, p, ArrivalAction::Copy});
    }
  }
  out.push_back({PlayMove::Kind::EndStep, 0, -1, ArrivalAction::Add});
  return out;
}

class PlayRank : public ::testing::TestWithParam<Case> {};

TEST_P(PlayRank, AcceptsExactlyTheSchedulesMovesInAnyOrder) {
  const Case& c = GetParam();
  const Schedule s = RankGame::playSchedule(c.algorithm, c.nranks, c.ranksPerHost);
  std::mt19937 rng(7);
  for (int rank = 0; rank < c.nranks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    RankGame g(s, rank);
    int moves = 0;
    while (!g.done()) {
      const uint32_t step = g.step();
      std::vector<PlayMove> todo = g.movesAt(step);
      std::shuffle(todo.begin(), todo.end(), rng);
      for (size_t k = 0; k <= todo.size(); ++k) {
        // Now: exactly the moves not yet made are accepted (ending the step once none is
        // left), every other is refused with a reason and a right move that is accepted.
        for (const PlayMove& m : everyMove(g)) {
          const bool pending =
              std::find(todo.begin() + static_cast<long>(k), todo.end(), m) != todo.end();
          const bool expect = m.kind == PlayMove::Kind::EndStep ? k == todo.size() : pending;
          const PlayVerdict v = g.check(m);
          ASSERT_EQ(v.ok, expect) << "step " << step << ": " << describe(m) << ": " << v.why;
          if (!v.ok) {
            EXPECT_FALSE(v.why.empty());
            ASSERT_TRUE(v.hasRight);
            EXPECT_TRUE(g.check(v.right).ok) << describe(v.right);
          }
        }
        if (k < todo.size()) {
          ASSERT_TRUE(g.play(todo[k]).ok);
          ++moves;
        }
      }
      ASSERT_TRUE(g.play({PlayMove::Kind::EndStep}).ok);
      EXPECT_EQ(g.step(), step + 1);
    }
    EXPECT_EQ(g.accepted(), moves);
    EXPECT_EQ(g.refused(), 0);
    const uint64_t all = c.nranks == 64 ? ~uint64_t{0} : (uint64_t{1} << c.nranks) - 1;
    for (uint64_t e = 0; e < g.elements(); ++e) {
      EXPECT_EQ(g.holds(e), all) << "element " << e;
    }
    EXPECT_FALSE(g.check({PlayMove::Kind::EndStep}).ok);  // over
  }
}

// A student who only ever ends the step is refused each time, the game makes the right move
// in their place, and it reaches the end along the schedule.
TEST_P(PlayRank, RefusedMovesAreMadeRightAndTheGameGoesOn) {
  const Case& c = GetParam();
  const Schedule s = RankGame::playSchedule(c.algorithm, c.nranks, c.ranksPerHost);
  RankGame g(s, c.nranks - 1);
  int wrong = 0;
  for (int i = 0; i < 10000 && !g.done(); ++i) {
    const PlayVerdict v = g.play({PlayMove::Kind::EndStep});
    if (!v.ok) {
      ++wrong;
      EXPECT_EQ(v.why.rfind("not yet: you still ", 0), 0u) << v.why;
    }
  }
  ASSERT_TRUE(g.done());
  EXPECT_EQ(g.refused(), wrong);
  size_t ops = 0;
  for (uint32_t st = 0; st < s.nsteps; ++st) ops += g.movesAt(st).size();
  EXPECT_EQ(static_cast<size_t>(wrong), ops);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, PlayRank,
                         ::testing::Values(Case{"ring", 2}, Case{"ring", 4}, Case{"ring", 5},
                                           Case{"ring", 8}, Case{"tree", 4}, Case{"tree", 7},
                                           Case{"halving-doubling", 4}, Case{"halving-doubling", 8},
                                           Case{"recursive-doubling", 4},
                                           Case{"reduce-broadcast", 4}, Case{"parameter-server", 4},
                                           Case{"hierarchical", 8, 4}),
                         caseName);

TEST(PlayRank, ExplainsAWrongChoiceInTheTermsOfTheRun) {
  RankGame g(RankGame::playSchedule("ring", 4), 0);
  // Step 1: rank 0 sends its own chunk 3 to its right-hand neighbour.
  PlayVerdict v = g.check({PlayMove::Kind::Send, 0, 1});
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.why,
            "chunk 0 is not yours to send at step 1: rank 1 holds its partial sum {1} and sends "
            "it to rank 2; the schedule's move: send chunk 3 to rank 1");
  v = g.check({PlayMove::Kind::Send, 3, 2});
  EXPECT_EQ(v.why,
            "chunk 3 goes to rank 1 at step 1, not to rank 2; the schedule's move: send "
            "chunk 3 to rank 1");
  ASSERT_TRUE(g.play({PlayMove::Kind::Send, 3, 1}).ok);
  ASSERT_TRUE(g.play({PlayMove::Kind::EndStep}).ok);
  // Step 2: chunk 2 arrives from rank 3 with rank 3's contribution; copying it would lose
  // rank 0's own.
  ASSERT_EQ(g.pendingArrivals().size(), 1u);
  EXPECT_EQ(g.pendingArrivals()[0].chunk, 2u);
  EXPECT_EQ(g.pendingArrivals()[0].mask, 0b1000u);
  v = g.play({PlayMove::Kind::Arrival, 2, 3, ArrivalAction::Copy});
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.why.find("copying would throw your own contribution away"), std::string::npos)
      << v.why;
  EXPECT_EQ(v.right, (PlayMove{PlayMove::Kind::Arrival, 2, 3, ArrivalAction::Add}));
  EXPECT_EQ(g.holds(4), 0b1001u);  // chunk 2: elements 4 and 5
  EXPECT_EQ(g.holds(5), 0b1001u);
  EXPECT_EQ(g.holds(6), 0b0001u);  // the right move was made in the student's place
  // At step 2 rank 0 forwards chunk 2; chunk 1 is rank 3's to send.
  v = g.check({PlayMove::Kind::Send, 1, 1});
  EXPECT_NE(v.why.find("chunk 1 is not yours to send at step 2: rank 3 holds"), std::string::npos)
      << v.why;
  EXPECT_NE(g.check({PlayMove::Kind::Send, 2, 0}).why.find("rank 0 is you"), std::string::npos);
  EXPECT_NE(g.check({PlayMove::Kind::Send, 9, 1}).why.find("there is no chunk 9"),
            std::string::npos);
  EXPECT_NE(
      g.check({PlayMove::Kind::EndStep}).why.find("not yet: you still send chunk 2 to rank 1"),
      std::string::npos);
}

TEST(PlayRank, AFullSumArrivingIsCopiedNotAdded) {
  RankGame g(RankGame::playSchedule("ring", 4), 1);
  while (!g.done() && g.phase() != Phase::AllGather) {
    for (const PlayMove& m : g.movesAt(g.step())) ASSERT_TRUE(g.play(m).ok);
    ASSERT_TRUE(g.play({PlayMove::Kind::EndStep}).ok);
  }
  ASSERT_FALSE(g.done());
  // The all-gather's second step: a full sum arrives and must replace what the rank holds.
  for (const PlayMove& m : g.movesAt(g.step())) ASSERT_TRUE(g.play(m).ok);
  ASSERT_TRUE(g.play({PlayMove::Kind::EndStep}).ok);
  const auto arrivals = g.pendingArrivals();
  ASSERT_EQ(arrivals.size(), 1u);
  EXPECT_EQ(arrivals[0].mask, 0b1111u);
  const PlayVerdict v =
      g.check({PlayMove::Kind::Arrival, arrivals[0].chunk, arrivals[0].from, ArrivalAction::Add});
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.why.find("the full sum, which already holds"), std::string::npos) << v.why;
  EXPECT_NE(v.why.find("adding would count it twice; copy it"), std::string::npos) << v.why;
}

TEST(PlayRank, RefusesWhatItCannotPlay) {
  EXPECT_THROW(RankGame(RankGame::playSchedule("ring", 4), 4), GenError);
  GenParams p;
  p.nranks = 4;
  p.count = 64;
  p.sliceElems = 4;  // several slices per chunk
  EXPECT_THROW(RankGame(generate("ring", p), 0), GenError);
}

}  // namespace
}  // namespace arl
