#include "model/gpu_catalog.h"

#include "base/units.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::model {
namespace {

using ::testing::HasSubstr;

const GpuCatalog& Catalog() { return GpuCatalog::Default(); }

TEST(GpuCatalog, HasEveryRequiredModel) {
  for (const char* name :
       {"A100-40GB", "A100-80GB", "H100-80GB", "H100-94GB", "H200-141GB", "B200", "A30-24GB"}) {
    absl::StatusOr<const GpuModel*> m = Catalog().Lookup(name);
    ASSERT_TRUE(m.ok()) << name;
    EXPECT_TRUE((*m)->mig_capable()) << name;
    EXPECT_GT((*m)->price_per_gpu_hour, 0) << name;
  }
  for (const char* name : {"L4", "L40S", "A10", "T4", "V100-16GB", "V100-32GB"}) {
    absl::StatusOr<const GpuModel*> m = Catalog().Lookup(name);
    ASSERT_TRUE(m.ok()) << name;
    EXPECT_FALSE((*m)->mig_capable()) << name;
    EXPECT_GT((*m)->memory_bytes, 8 * kGiB) << name;
  }
}

// Profile names per model, in class order 1g, 1g+me, 1g double-memory, 2g, 3g, 4g, 7g
// (reference gpu-sharing.md section 2, typed in independently of the catalog code).
TEST(GpuCatalog, ProfileNamesMatchReferenceTable) {
  const std::map<std::string, std::vector<std::string>> table = {
      {"A100-40GB", {"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}},
      {"A100-80GB",
       {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}},
      {"H100-80GB",
       {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}},
      {"H100-94GB",
       {"1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"}},
      {"H200-141GB",
       {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}},
      {"B200", {"1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"}},
  };
  const int mem[7] = {1, 1, 2, 2, 4, 4, 8};
  const int sm[7] = {1, 1, 1, 2, 3, 4, 7};
  const int max[7] = {7, 1, 4, 3, 2, 1, 1};
  const int ids[7] = {19, 20, 15, 14, 9, 5, 0};
  for (const auto& [model_name, names] : table) {
    const GpuModel* m = *Catalog().Lookup(model_name);
    ASSERT_EQ(m->profiles.size(), 7u) << model_name;
    EXPECT_EQ(m->mig_memory_slices, 8);
    EXPECT_EQ(m->mig_compute_slices, 7);
    EXPECT_EQ(m->mig_max_instances, 7);
    for (int i = 0; i < 7; ++i) {
      const MigProfile& p = m->profiles[i];
      EXPECT_EQ(p.name, names[i]) << model_name;
      EXPECT_EQ(p.memory_slices, mem[i]) << p.name;
      EXPECT_EQ(p.compute_slices, sm[i]) << p.name;
      EXPECT_EQ(p.max_count, max[i]) << p.name;
      EXPECT_EQ(p.profile_id, ids[i]) << p.name;
      EXPECT_EQ(p.media_extensions, i == 1) << p.name;
      // Usable memory is below the proportional share and above 95% of it.
      double share = static_cast<double>(m->memory_bytes) * p.memory_slices / 8;
      EXPECT_LT(p.memory_bytes, share);
      EXPECT_GT(p.memory_bytes, 0.95 * share);
    }
  }
}

TEST(GpuCatalog, A30FourSliceFamily) {
  const GpuModel* a30 = *Catalog().Lookup("A30-24GB");
  EXPECT_EQ(a30->mig_memory_slices, 4);
  EXPECT_EQ(a30->mig_compute_slices, 4);
  EXPECT_EQ(a30->mig_max_instances, 4);
  ASSERT_NE(a30->FindProfile("2g.12gb+me"), nullptr);
  EXPECT_EQ(a30->FindProfile("2g.12gb+me")->profile_id, 6);
  EXPECT_EQ(a30->FindProfile("1g.6gb")->max_count, 4);
  EXPECT_EQ(a30->FindProfile("4g.24gb")->starts, std::vector<int>{0});
  EXPECT_EQ(a30->FindProfile("2g.12gb")->starts, (std::vector<int>{0, 2}));
  EXPECT_EQ(a30->FindProfile("nope"), nullptr);
}

TEST(GpuCatalog, ResolvesFeatureDiscoveryProductNames) {
  const std::map<std::string, std::string> cases = {
      {"NVIDIA-H100-80GB-HBM3", "H100-80GB"},
      {"NVIDIA-H100-80GB-HBM3-SHARED", "H100-80GB"},
      {"NVIDIA-H100-NVL", "H100-94GB"},
      {"NVIDIA-H100-PCIe", "H100-80GB"},
      {"NVIDIA-A100-SXM4-40GB", "A100-40GB"},
      {"NVIDIA-A100-SXM4-80GB", "A100-80GB"},
      {"NVIDIA-A100-80GB-PCIe", "A100-80GB"},
      {"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100-40GB"},
      {"NVIDIA-H200", "H200-141GB"},
      {"NVIDIA-B200", "B200"},
      {"NVIDIA-A30", "A30-24GB"},
      {"NVIDIA-L4", "L4"},
      {"NVIDIA-L40S", "L40S"},
      {"NVIDIA-A10", "A10"},
      {"Tesla-T4", "T4"},
      {"Tesla-V100-SXM2-16GB", "V100-16GB"},
      {"Tesla-V100-PCIE-32GB", "V100-32GB"},
      {"h100-80gb", "H100-80GB"},
  };
  for (const auto& [product, want] : cases) {
    absl::StatusOr<const GpuModel*> m = Catalog().Lookup(product);
    ASSERT_TRUE(m.ok()) << product << ": " << m.status();
    EXPECT_EQ((*m)->name, want) << product;
  }
}

TEST(GpuCatalog, MemoryHintDisambiguates) {
  EXPECT_EQ((*Catalog().Lookup("NVIDIA-A100-SXM4", 81920))->name, "A100-80GB");
  EXPECT_EQ((*Catalog().Lookup("NVIDIA-A100-SXM4", 40960))->name, "A100-40GB");
  absl::StatusOr<const GpuModel*> ambiguous = Catalog().Lookup("NVIDIA-A100-SXM4");
  ASSERT_FALSE(ambiguous.ok());
  EXPECT_THAT(ambiguous.status().message(), HasSubstr("several memory sizes"));
}

TEST(GpuCatalog, UnknownModelListsKnownOnes) {
  for (const char* bad : {"RTX-4090", "", "NVIDIA-H100-12GB", "A10000"}) {
    absl::StatusOr<const GpuModel*> m = Catalog().Lookup(bad);
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(m.status().message(), HasSubstr("known models: A100-40GB"));
    EXPECT_THAT(m.status().message(), HasSubstr("V100-32GB"));
  }
}

}  // namespace
}  // namespace tessera::model
