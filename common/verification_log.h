// Copyright dreplay authors.
//
// verification_log.h: an opt-in, append-only record of what a process did
// with transitions, for an external checker (tools/chaos/chaos_check.py) to prove
// invariants across crashes: each record is one text line written with one
// write(2) to a file opened O_APPEND, so what a record describes is in the
// file as soon as the call returns, even if the process is SIGKILLed next.
//
//   ASSIGN_OR_RETURN(auto log, VerificationLog::Open("/tmp/server.vlog"));
//   log->Ingested(index, sequence, checksum);
//
// Records (fields separated by one space, integers in decimal, checksums
// in 16 hex digits; the first field names the record):
//
//   S <epoch>                                a server started serving
//                                            (ingest may have begun)
//   I <index> <sequence> <checksum>          the server ingested a slot
//   T <index> <sequence>                     ... declared a slot torn
//   F <index> <sequence> <checksum>          ... (frames stored once) took a
//                                            verified slot as a frame record
//                                            that adds no transition to the
//                                            memory (the slot's old entry
//                                            leaves it)
//   E <index> <sequence>                     ... (frames stored once) removed
//                                            the transition at <index>: a
//                                            record it needs was overwritten,
//                                            or (before a B record) did not
//                                            survive the restore
//   X <index> <sequence>                     ... (forwarding, the hybrid
//                                            placement) staged the transition
//                                            at <index> once: it left the
//                                            memory
//   K <id> <epoch> <ingest_cursor>           ... cut checkpoint <id> (ids count
//                                            from 1 in each start): the cut
//                                            holds the memory as every
//                                            record above left it
//   D <id> <index> <sequence>                ... while writing cut <id>, found
//                                            the cut's entry at <index>
//                                            overwritten; the file holds it
//                                            absent (written by the writer's
//                                            thread, before the file is
//                                            renamed into place)
//   C <id>                                   ... finished writing cut <id>
//                                            (after the rename; a failed
//                                            write writes no C)
//   B <epoch> <ingest_cursor>                ... restored the checkpoint cut
//                                            at that epoch and cursor (the
//                                            K record naming them); its R
//                                            records follow
//   R <index> <sequence> <checksum> <valid>  after a restore, a slot's
//                                            header; valid 1 when the memory
//                                            holds it
//   A <index> <sequence> <checksum> <ok>     the learner accepted an entry;
//                                            ok 1 when the copied slot
//                                            verifies (sequence, checksum)
//   P <epoch> <index> <sequence> <checksum>  an actor saw its commit of a
//                                            slot complete (or a server's
//                                            grant confirm it), written to
//                                            the server start of <epoch>
//
// Cost: one system call per record; meant for tests and soaks, off by
// default everywhere.
//
// Thread safety: every method may be called from any thread (each record
// is one write(2); records of concurrent callers never interleave).

#ifndef DREPLAY_COMMON_VERIFICATION_LOG_H_
#define DREPLAY_COMMON_VERIFICATION_LOG_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace dreplay {

class VerificationLog {
 public:
  // Opens (creating, appending to) `path`. InvalidArgument for an empty
  // path; Internal naming the path and errno's text when it cannot be
  // opened.
  static absl::StatusOr<std::unique_ptr<VerificationLog>> Open(const std::string& path);
  ~VerificationLog();
  VerificationLog(const VerificationLog&) = delete;
  VerificationLog& operator=(const VerificationLog&) = delete;

  void Started(uint64_t epoch);
  void Ingested(uint64_t index, uint64_t sequence, uint64_t checksum);
  void Torn(uint64_t index, uint64_t sequence);
  void HeldAsRecord(uint64_t index, uint64_t sequence, uint64_t checksum);
  void Evicted(uint64_t index, uint64_t sequence);
  void Forwarded(uint64_t index, uint64_t sequence);
  void CheckpointCut(uint64_t id, uint64_t epoch, uint64_t ingest_cursor);
  void SlotAbsent(uint64_t cut_id, uint64_t index, uint64_t sequence);
  void CheckpointWritten(uint64_t cut_id);
  void CheckpointRestored(uint64_t epoch, uint64_t ingest_cursor);
  void Restored(uint64_t index, uint64_t sequence, uint64_t checksum, bool valid);
  void Accepted(uint64_t index, uint64_t sequence, uint64_t checksum, bool ok);
  void Committed(uint64_t epoch, uint64_t index, uint64_t sequence, uint64_t checksum);

  // Records whose write failed (disk full, ...): the log is then incomplete.
  uint64_t failed_writes() const { return failed_writes_.load(std::memory_order_relaxed); }

 private:
  explicit VerificationLog(int fd) : fd_(fd) {}
  void Write(const char* line, int length);

  const int fd_;
  std::atomic<uint64_t> failed_writes_{0};
};

}  // namespace dreplay

#endif  // DREPLAY_COMMON_VERIFICATION_LOG_H_
