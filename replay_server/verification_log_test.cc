// Copyright dreplay authors.

#include "replay_server/verification_log.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "protocol/layout.h"
#include "testing/in_memory_peers.h"

namespace dreplay::server {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(LogRestoredSlotsTest, RecordsEverySlotThatHoldsSomethingAndWhetherTheMemoryHasIt) {
  const protocol::LayoutConfig config = testing::SmallConfig();
  auto regions = ReplayRegions::Create(config);
  ASSERT_TRUE(regions.ok()) << regions.status();
  replay::ReplayMemoryOptions mo;
  mo.capacity = config.capacity;
  auto memory = replay::ReplayMemory::Create(mo);
  ASSERT_TRUE(memory.ok()) << memory.status();

  auto* h1 = reinterpret_cast<protocol::SlotHeader*>((*regions)->slot(1));
  h1->sequence = 9;
  h1->checksum = 0x11;
  (*memory)->Insert(1, 9, 1.0f);
  auto* h5 = reinterpret_cast<protocol::SlotHeader*>((*regions)->slot(5));
  h5->sequence = 13;
  h5->checksum = 0x55;  // in the ring, not in the memory (evicted)

  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/restored.vlog";
  unlink(path.c_str());
  {
    auto log = VerificationLog::Open(path);
    ASSERT_TRUE(log.ok()) << log.status();
    LogRestoredSlots(**regions, **memory, log->get());
  }
  EXPECT_EQ(ReadAll(path),
            "R 1 9 0000000000000011 1\n"
            "R 5 13 0000000000000055 0\n");
  LogRestoredSlots(**regions, **memory, nullptr);  // off: nothing to do
}

}  // namespace
}  // namespace dreplay::server
