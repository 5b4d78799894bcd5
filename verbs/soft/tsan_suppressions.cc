// Copyright dreplay authors.
//
// ThreadSanitizer suppressions for the soft provider's data placement,
// compiled only into `--config=tsan` builds.
//
// The soft provider's NIC thread plays the role of a NIC's DMA engine: it
// places WRITE payloads into registered memory and sends READ data out of it
// while the application's threads read and write the same memory. On real
// hardware those accesses come from a device that ThreadSanitizer cannot see;
// here they come from a thread it does see, so every one-sided transfer would
// be reported as a race against the application's (atomic or plain) accesses.
// Those races are the RDMA model itself, and the replay protocols are built for
// them: commit words written by a second, ordered WRITE, sequence numbers and
// checksums, seqlock copies (replay_server/layout.h).
//
// Only the functions that move payload bytes between the wire and registered
// memory are listed. The soft provider's own state (queues, completions,
// credits, connection tables) is not covered: races there are still reported,
// and //verbs/soft:stress_test checks it under ThreadSanitizer.

extern "C" const char* __tsan_default_suppressions() {
  return
      // recv()/readv() of WRITE payloads and READ responses straight into
      // registered memory (FrameReader::Read, under Channel::ReadInput), and
      // the copy of buffered bytes into it.
      "race:dreplay::verbs::soft::Channel::ReadInput\n"
      "race:dreplay::verbs::soft::FrameReader::ParseBuffered\n"
      // sendmsg() of WRITE sources and READ data straight from registered
      // memory (FrameWriter::Flush, under Channel::Flush), and the copies
      // taken when that memory must be released early.
      "race:dreplay::verbs::soft::Channel::Flush\n"
      "race:dreplay::verbs::soft::FrameWriter::MaterializeResponseRefs\n"
      "race:dreplay::verbs::soft::Channel::OnDeregister\n"
      // The 8-byte result of an atomic, placed into the requester's buffer.
      "race:dreplay::verbs::soft::Requester::CompleteResponse\n"
      // The same-host transport: the requester copies WRITE data into, and
      // READ data out of, a mapping of the peer's registered memory.
      "race:dreplay::verbs::soft::SharedPath::TryExecute\n";
}
