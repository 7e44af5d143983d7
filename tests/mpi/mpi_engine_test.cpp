// The Open MPI engine's tables, without mpirun: each mpi-* algorithm forces a coll_tuned
// algorithm for exactly the collectives the library table says it implements, and the types
// and operators Open MPI cannot reduce as the lab does are refused naming what.
#include "engines/mpi/mpi_engine.h"

#include <gtest/gtest.h>

#include "exec/collective_library.h"

namespace arl::mpi {
namespace {

TEST(MpiEngine, ForcedAlgorithmsMatchTheLibraryTable) {
  for (const LibraryAlgorithm& a : libraryAlgorithms()) {
    if (a.library != "mpi") continue;
    for (Collective c : kAllCollectives) {
      EXPECT_EQ(tunedAlgorithm(a.name, c).has_value(), a.supports(c))
          << a.name << " " << toString(c);
    }
  }
  EXPECT_EQ(tunedAlgorithm("mpi-ring", Collective::AllReduce), 4);
  EXPECT_EQ(tunedAlgorithm("mpi-rabenseifner", Collective::AllReduce), 6);
  EXPECT_EQ(tunedAlgorithm("mpi-linear", Collective::AllReduce), 1);
  EXPECT_EQ(tunedAlgorithm("mpi-default", Collective::Broadcast), 0);
  EXPECT_EQ(tunedVariable(Collective::ReduceScatter), "coll_tuned_reduce_scatter_block_algorithm");
}

TEST(MpiEngine, RefusesWhatOpenMpiCannotReduceExactly) {
  EXPECT_EQ(mpiRefuses(DataType::Float, RedOp::Sum), std::nullopt);
  EXPECT_EQ(mpiRefuses(DataType::Uint8, RedOp::Prod), std::nullopt);
  const auto half = mpiRefuses(DataType::Half, RedOp::Sum);
  ASSERT_TRUE(half.has_value());
  EXPECT_NE(half->find("half"), std::string::npos) << *half;
  const auto bf = mpiRefuses(DataType::BFloat16, RedOp::Max);
  ASSERT_TRUE(bf.has_value());
  const auto avg = mpiRefuses(DataType::Float, RedOp::Avg);
  ASSERT_TRUE(avg.has_value());
  EXPECT_NE(avg->find("average"), std::string::npos) << *avg;
}

}  // namespace
}  // namespace arl::mpi
