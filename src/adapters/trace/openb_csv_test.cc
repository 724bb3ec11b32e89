#include "adapters/trace/openb_csv.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;

TEST(OpenbCsv, NodesAndPods) {
  auto nodes = ParseOpenbNodes("n.csv",
                               "sn,cpu_milli,memory_mib,gpu,model\n"
                               "openb-node-0000,64000,262144,2,P100\n"
                               "openb-node-0001,96000,786432,8,G2\n");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[1].gpus, 8);
  EXPECT_EQ((*nodes)[1].model, "G2");
  auto pods = ParseOpenbPods(
      "p.csv",
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n"
      "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
      "openb-pod-0001,6000,12288,1,460,V100M16|V100M32,LS,Running,427061,12902960,427061\n"
      "openb-pod-0002,88000,327680,8,1000,,LS,Pending,5,,\n");
  ASSERT_TRUE(pods.ok()) << pods.status();
  ASSERT_EQ(pods->size(), 3u);
  EXPECT_TRUE((*pods)[1].sharing());
  EXPECT_EQ((*pods)[1].gpu_spec, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_EQ((*pods)[2].gpu_request(), 8000);
  // "nan" is no constraint (the dataset's README), in any case; "|" alone is none either.
  auto nan = ParseOpenbPods("n.csv",
                            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
                            "a,1,1,1,500,nan\nb,1,1,1,500,NaN\nc,1,1,1,500,|\nd,1,1,1,500,T4\n");
  ASSERT_TRUE(nan.ok()) << nan.status();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE((*nan)[i].gpu_spec.empty()) << i;
  EXPECT_EQ((*nan)[3].gpu_spec, (std::vector<std::string>{"T4"}));
  // Whole numbers written as floats (pandas, once a column has a missing cell) are read; others
  // are not.
  auto floats = ParseOpenbPods("f.csv",
                               "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                               "a,12000.0,16384.0,1.0,460.0\n");
  ASSERT_TRUE(floats.ok()) << floats.status();
  EXPECT_EQ((*floats)[0].cpu_milli, 12000);
  EXPECT_EQ((*floats)[0].gpu_milli, 460);
  EXPECT_THAT(
      ParseOpenbPods("f.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,12000.5,1,1,460\n")
          .status()
          .message(),
      HasSubstr("f.csv:2: column cpu_milli: expected an integer from 0 to"));
  EXPECT_THAT(
      ParseOpenbPods("f.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,nan,1,1,460\n")
          .status()
          .message(),
      HasSubstr("found \"nan\""));
  // multigpu20 has only the first five columns.
  EXPECT_TRUE(
      ParseOpenbPods("m.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1,1,0,0\n").ok());
  // A spreadsheet's export starts with a UTF-8 byte-order mark; the header's first name is
  // still "sn", and line numbers are unchanged.
  auto bom =
      ParseOpenbNodes("b.csv", "\xEF\xBB\xBFsn,cpu_milli,memory_mib,gpu,model\na,1,1,1,G2\n");
  ASSERT_TRUE(bom.ok()) << bom.status();
  EXPECT_EQ((*bom)[0].name, "a");
  EXPECT_THAT(
      ParseOpenbNodes("b.csv", "\xEF\xBB\xBFsn,cpu_milli,memory_mib,gpu,model\na,x,1,1,G2\n")
          .status()
          .message(),
      HasSubstr("b.csv:2: column cpu_milli"));
}

TEST(OpenbCsv, ErrorsNameFileLineColumn) {
  EXPECT_THAT(ParseOpenbNodes("n.csv", "sn,cpu_milli,memory_mib,gpu\n").status().message(),
              HasSubstr("n.csv:1: missing column \"model\""));
  EXPECT_THAT(ParseOpenbNodes("n.csv", "sn,cpu_milli,memory_mib,gpu,model\na,x,1,1,G2\n")
                  .status()
                  .message(),
              HasSubstr("n.csv:2: column cpu_milli: expected an integer"));
  EXPECT_THAT(ParseOpenbPods("p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1,1,2,500\n")
                  .status()
                  .message(),
              HasSubstr("p.csv:2: num_gpu 2 with gpu_milli 500"));
  EXPECT_THAT(ParseOpenbPods("p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1,1\n")
                  .status()
                  .message(),
              HasSubstr("p.csv:2: expected 5 columns, found 3"));
  EXPECT_THAT(ParseOpenbPods("p.csv", "").status().message(), HasSubstr("empty file"));
  EXPECT_THAT(
      ParseOpenbNodes("n.csv", "sn,cpu_milli,memory_mib,gpu,model\na,1,1,2,\n").status().message(),
      HasSubstr("model: empty for a node with GPUs"));
}

}  // namespace
}  // namespace tessera::adapters
