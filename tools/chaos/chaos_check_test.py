"""tools/chaos/chaos_check.py on hand-made verification logs: a clean history
passes, and each broken invariant is named (duplicated ingest, a restore
missing a checkpointed transition, a torn or mismatched learner entry, a
malformed record)."""

import os
import tempfile
import unittest

from tools.chaos import chaos_check


def I(index, seq, checksum):
    return ("I", index, seq, checksum)


def R(index, seq, checksum, valid=1):
    return ("R", index, seq, checksum, valid)


def A(index, seq, checksum, ok=1):
    return ("A", index, seq, checksum, ok)


def K(cut_id, epoch=1, cursor=0):
    return ("K", cut_id, epoch, cursor)


def D(cut_id, index, seq):
    return ("D", cut_id, index, seq)


def C(cut_id=1):
    return ("C", cut_id)


def B(epoch=1, cursor=0):
    return ("B", epoch, cursor)


def P(epoch, index, seq, checksum):
    return ("P", epoch, index, seq, checksum)


def F(index, seq, checksum):
    return ("F", index, seq, checksum)


def E(index, seq):
    return ("E", index, seq)


def X(index, seq):
    return ("X", index, seq)


# A checkpoint cut and written at once (cut 1 at epoch 1, cursor 0).
KC = [K(1), C(1)]


class CheckRecordsTest(unittest.TestCase):

    def test_frame_records_and_evictions_are_accounted(self):
        # Frames stored once: index 3's record adds no transition (F), and
        # it takes index 0's place; the transition at 1 leaves when a record
        # it needs is overwritten (E). The cut then holds only index 2.
        first = [("S", 1), I(0, 0, 0xa0), I(1, 1, 0xa1), I(2, 2, 0xa2), F(0, 4, 0xf4), E(1, 1),
                 F(3, 3, 0xf3)] + KC
        # The restore drops nothing the cut held: index 2 comes back.
        second = [B(), R(2, 2, 0xa2), R(0, 4, 0xf4, 0), ("S", 2), I(1, 5, 0xb5)]
        learner = [A(0, 4, 0xf4), A(2, 2, 0xa2)]  # a record entry and a transition
        actor = [P(1, 0, 0, 0xa0), P(1, 1, 1, 0xa1), P(1, 2, 2, 0xa2), P(1, 3, 3, 0xf3),
                 P(1, 0, 4, 0xf4), P(2, 1, 5, 0xb5)]
        report = chaos_check.check_records([first, second], [learner], actor_runs=[actor])
        self.assertEqual(report.failures, [])
        self.assertEqual(report.records_held, 2)
        self.assertEqual(report.transitions_committed, 4)
        self.assertEqual(report.actor_commits_ingested, 6)
        self.assertEqual(report.unexpected_losses, 0)

    def test_a_transition_the_restore_dropped_for_its_records_is_no_loss(self):
        first = [("S", 1), I(0, 0, 0xa0), I(1, 1, 0xa1)] + KC
        # Index 1's transition needs a record the write did not keep: the
        # restore drops it and says so (an E before the B record).
        dropped = [E(1, 1), B(), R(0, 0, 0xa0), R(1, 1, 0xa1, 0), ("S", 2)]
        report = chaos_check.check_records([first, dropped], [])
        self.assertEqual(report.failures, [])
        self.assertEqual(report.evicted_at_checkpoint, 1)
        # Without the E, the same restore lost a transition.
        silent = [B(), R(0, 0, 0xa0), R(1, 1, 0xa1, 0), ("S", 2)]
        report = chaos_check.check_records([first, silent], [])
        self.assertEqual(report.unexpected_losses, 1)
        self.assertTrue(report.failures)

    def test_a_transition_forwarded_before_the_cut_is_not_expected_back(self):
        # The hybrid placement: index 1 was forwarded (X) and left the
        # memory before the cut, so the restore holds it invalid; index 2 was
        # forwarded after the cut and comes back.
        first = [("S", 1), I(0, 0, 0xa0), I(1, 1, 0xa1), I(2, 2, 0xa2), X(1, 1)] + KC + [
            X(2, 2)]
        second = [B(), R(0, 0, 0xa0), R(1, 1, 0xa1, 0), R(2, 2, 0xa2), ("S", 2)]
        learner = [A(1, 1, 0xa1), A(2, 2, 0xa2)]
        report = chaos_check.check_records([first, second], [learner])
        self.assertEqual(report.failures, [])
        self.assertEqual(report.unexpected_losses, 0)
        # An X for another sequence of the slot forwarded nothing there.
        stale = [("S", 1), I(0, 0, 0xa0), I(1, 1, 0xa1), X(1, 9)] + KC
        report = chaos_check.check_records([stale, second[:4]], [])
        self.assertEqual(report.unexpected_losses, 1)

    def test_a_clean_history_with_a_restart_holds_every_invariant(self):
        first = [("S", 1), I(0, 0, 0xa0), I(1, 1, 0xa1)] + KC + [I(2, 2, 0xa2)]
        # Killed after ingesting index 2: the restore brings back the
        # checkpoint (indices 0 and 1); the next start resumes a lap above
        # what the killed one handed out, so sequence 2 is never written again.
        second = [R(0, 0, 0xa0), R(1, 1, 0xa1), ("S", 2), I(2, 6, 0xb2), I(3, 7, 0xa3)]
        learner = [A(0, 0, 0xa0), A(2, 2, 0xa2), A(2, 6, 0xb2)]
        report = chaos_check.check_records([first, second], [learner])
        self.assertEqual(report.failures, [])
        self.assertEqual(report.figures(), {
            "transitions_committed": 5,
            "records_held": 0,
            "torn_rejected": 0,
            "lost_since_checkpoint": 1,
            "unexpected_losses": 0,
            "torn_accepted": 0,
            "actor_commits_ingested": 0,
            "actor_commits_lost": 0,
            "actor_commits_unaccounted": 0,
        })
        self.assertEqual(report.sequences_reissued, 0)
        self.assertEqual(report.restores, 1)

    def test_every_actor_commit_is_ingested_or_lost_with_a_replaced_server(self):
        first = [("S", 1), I(0, 0, 0xa0), I(1, 1, 0xa1)] + KC + [I(2, 2, 0xa2)]
        second = [R(0, 0, 0xa0), R(1, 1, 0xa1), ("S", 2), I(2, 6, 0xb2)]
        # Sequence 3 was committed to the first server, which was killed
        # before ingesting it: lost, counted. Everything else was ingested.
        actor = [P(1, 0, 0, 0xa0), P(1, 1, 1, 0xa1), P(1, 2, 2, 0xa2), P(1, 3, 3, 0xa3),
                 P(2, 2, 6, 0xb2)]
        report = chaos_check.check_records([first, second], [], actor_runs=[actor])
        self.assertEqual(report.failures, [])
        self.assertEqual(report.actor_commits_ingested, 4)
        self.assertEqual(report.actor_commits_lost, 1)
        self.assertEqual(report.actor_commits_unaccounted, 0)

    def test_an_actor_commit_the_last_server_never_ingested_is_unaccounted(self):
        first = [("S", 1), I(0, 0, 0xa0)]
        report = chaos_check.check_records([first], [], actor_runs=[[P(1, 1, 1, 0xa1)]])
        self.assertEqual(report.actor_commits_unaccounted, 1)
        self.assertEqual(len(report.failures), 1)
        self.assertIn("every transition an actor saw committed", report.failures[0])
        self.assertIn("never ingested by the last start", report.failures[0])

    def test_an_actor_commit_its_server_passed_over_is_unaccounted_not_lost(self):
        # The first server ingested the actor's sequence 3 but never 2, then
        # was replaced: 2 was skipped, not lost after the cut.
        first = [("S", 1), I(0, 0, 0xa0), I(1, 1, 0xa1)] + KC + [I(3, 3, 0xa3)]
        second = [R(0, 0, 0xa0), R(1, 1, 0xa1), ("S", 2)]
        actor = [P(1, 0, 0, 0xa0), P(1, 1, 1, 0xa1), P(1, 2, 2, 0xa2), P(1, 3, 3, 0xa3)]
        report = chaos_check.check_records([first, second], [], actor_runs=[actor])
        self.assertEqual(report.actor_commits_lost, 0)
        self.assertEqual(report.actor_commits_unaccounted, 1)
        self.assertIn("passed over or torn by the start it was written to", report.failures[0])

    def test_a_torn_later_sequence_also_passes_over_an_actor_commit(self):
        first = [("S", 1), I(0, 0, 0xa0), ("T", 2, 2)]
        second = [("S", 2)]
        actor = [P(1, 0, 0, 0xa0), P(1, 1, 1, 0xa1), P(1, 2, 2, 0xa2)]
        report = chaos_check.check_records([first, second], [], actor_runs=[actor])
        self.assertEqual(report.actor_commits_unaccounted, 2)  # 1 passed over, 2 torn

    def test_an_actor_commit_ingested_with_other_contents_is_unaccounted(self):
        first = [("S", 1), I(0, 0, 0xa0)]
        second = [("S", 2)]
        report = chaos_check.check_records([first, second], [], actor_runs=[[P(1, 0, 0, 0xbb)]])
        self.assertEqual(report.actor_commits_unaccounted, 1)
        self.assertIn("ingested with other contents", report.failures[0])

    def test_an_actor_commit_to_an_unknown_epoch_is_unaccounted(self):
        first = [("S", 1)]
        second = [("S", 2)]
        report = chaos_check.check_records([first, second], [], actor_runs=[[P(9, 0, 0, 0xa0)]])
        self.assertEqual(report.actor_commits_unaccounted, 1)
        self.assertIn("no server start has that epoch", report.failures[0])

    def test_a_sequence_written_again_after_a_crash_breaks_the_no_reuse_invariant(self):
        first = [("S", 1), I(0, 0, 0xa0), I(1, 1, 0xa1)] + KC + [I(2, 2, 0xa2)]
        # The next start resumes at the checkpoint's cursor: sequence 2 names
        # two transitions across the crash.
        second = [R(0, 0, 0xa0), R(1, 1, 0xa1), ("S", 2), I(2, 2, 0xb2), I(3, 3, 0xa3)]
        report = chaos_check.check_records([first, second], [])
        self.assertEqual(report.sequences_reissued, 1)
        self.assertEqual(len(report.failures), 1)
        self.assertIn("no sequence is reused after a crash", report.failures[0])

    def test_a_duplicated_ingest_breaks_the_no_double_ingest_invariant(self):
        server = [I(0, 0, 0xa0), I(1, 1, 0xa1), I(0, 0, 0xa0)]
        report = chaos_check.check_records([server], [])
        self.assertEqual(report.duplicates, 1)
        self.assertEqual(len(report.failures), 1)
        self.assertIn("no transition ingested twice", report.failures[0])

    def test_an_ingest_at_a_restored_sequence_is_a_duplicate(self):
        first = [I(0, 4, 0xa4)] + KC
        second = [R(0, 4, 0xa4), I(0, 4, 0xb4)]
        report = chaos_check.check_records([first, second], [])
        self.assertEqual(report.duplicates, 1)
        self.assertIn("no transition ingested twice", report.failures[0])

    def test_a_checkpointed_transition_missing_after_the_restore_is_an_unexpected_loss(self):
        first = [I(0, 0, 0xa0), I(1, 1, 0xa1)] + KC
        second = [R(0, 0, 0xa0)]  # index 1 did not come back
        report = chaos_check.check_records([first, second], [])
        self.assertEqual(report.unexpected_losses, 1)
        self.assertIn("present after the restore", report.failures[0])

    def test_a_restored_slot_that_fails_its_check_is_an_unexpected_loss(self):
        first = [I(0, 0, 0xa0)] + KC
        second = [R(0, 0, 0xa0, valid=0)]
        report = chaos_check.check_records([first, second], [])
        self.assertEqual(report.unexpected_losses, 1)

    def test_an_entry_the_writer_saved_absent_is_eviction_not_loss(self):
        # The writer found index 0 overwritten by its actor (sequence 8)
        # while it streamed the ring: the file holds it absent.
        first = [I(0, 0, 0xa0), I(1, 1, 0xa1), K(1), D(1, 0, 0), C(1)]
        second = [B(), R(0, 8, 0xc8, valid=0), R(1, 1, 0xa1)]
        report = chaos_check.check_records([first, second], [])
        self.assertEqual(report.failures, [])
        self.assertEqual(report.evicted_at_checkpoint, 1)

    def test_a_slot_restored_with_a_later_sequence_and_not_saved_absent_is_a_loss(self):
        # A consistent cut keeps a slot only as the cut's entry: a later
        # sequence there, with no D record, is a real failure.
        first = [I(0, 0, 0xa0), K(1), C(1)]
        second = [B(), R(0, 8, 0xc8, valid=0)]
        report = chaos_check.check_records([first, second], [])
        self.assertEqual(report.unexpected_losses, 1)

    def test_a_slot_restored_torn_is_a_loss_even_when_rewritten_later(self):
        # The relaxation for slots saved torn while their actor rewrote them
        # is gone: the writer never saves a mixed slot.
        first = [I(0, 0, 0xa0), K(1), C(1), I(0, 8, 0xa8)]
        second = [B(), R(0, 0, 0xa0, valid=0)]
        report = chaos_check.check_records([first, second], [])
        self.assertEqual(report.unexpected_losses, 1)
        self.assertIn("present after the restore", report.failures[0])

    def test_an_ingest_between_the_cut_and_the_write_end_is_not_expected_back(self):
        # Index 1 was ingested after cut 1, while the writer streamed it:
        # the file does not hold it. Missing after the restore, it is lost
        # since the checkpoint, not an unexpected loss.
        first = [I(0, 0, 0xa0), K(1, 1, 1), I(1, 1, 0xa1), C(1), I(2, 2, 0xa2)]
        second = [B(1, 1), R(0, 0, 0xa0), ("S", 2)]
        report = chaos_check.check_records([first, second], [])
        self.assertEqual(report.failures, [])
        self.assertEqual(report.lost_since_checkpoint, 2)

    def test_a_cut_entry_missing_after_the_restore_and_not_saved_absent_is_a_loss(self):
        first = [I(0, 0, 0xa0), I(1, 1, 0xa1), K(1, 1, 2), D(1, 0, 0), I(2, 2, 0xa2), C(1)]
        second = [B(1, 2)]  # index 1 was in the cut, not recorded absent
        report = chaos_check.check_records([first, second], [])
        self.assertEqual(report.unexpected_losses, 1)
        self.assertEqual(report.evicted_at_checkpoint, 1)
        self.assertIn("index 1 sequence 1", report.examples["unexpected_loss"][0])

    def test_the_restore_is_judged_against_the_cut_it_names(self):
        # Cut 2's write was under way (no C) when the server died after
        # renaming its file: the restore names cut 2, whose entries must
        # come back; the older written cut 1 is not what was restored.
        first = [I(0, 0, 0xa0), K(1, 1, 1), C(1), I(1, 1, 0xa1), K(2, 1, 2)]
        second = [B(1, 2), R(0, 0, 0xa0)]
        report = chaos_check.check_records([first, second], [])
        self.assertEqual(report.unexpected_losses, 1)
        second = [B(1, 2), R(0, 0, 0xa0), R(1, 1, 0xa1)]
        report = chaos_check.check_records([first, second], [])
        self.assertEqual(report.failures, [])
        self.assertEqual(report.lost_since_checkpoint, 0)

    def test_a_failed_write_is_not_what_a_restore_without_a_name_expects(self):
        # Cut 2 never ended (no C): without a B record the checker expects
        # the newest written cut, 1.
        first = [I(0, 0, 0xa0), K(1), C(1), I(1, 1, 0xa1), K(2, 1, 1)]
        second = [R(0, 0, 0xa0)]
        report = chaos_check.check_records([first, second], [])
        self.assertEqual(report.failures, [])
        self.assertEqual(report.lost_since_checkpoint, 1)

    def test_a_restore_naming_no_cut_and_a_stray_absence_fail(self):
        first = [I(0, 0, 0xa0), K(1), D(1, 5, 3), C(1)]
        second = [B(7, 7), R(0, 0, 0xa0)]
        report = chaos_check.check_records([first, second], [])
        self.assertEqual(report.unknown_restores, 1)
        self.assertEqual(report.bad_absences, 1)
        self.assertEqual(len(report.failures), 2)

    def test_a_restart_before_any_checkpoint_expects_nothing_back(self):
        first = [I(0, 0, 0xa0)]
        # The next start resumes above the killed one's reservation mark.
        second = [I(0, 4, 0xb0)]
        report = chaos_check.check_records([first, second], [])
        self.assertEqual(report.failures, [])
        self.assertEqual(report.lost_since_checkpoint, 1)

    def test_a_transition_ingested_again_from_the_restored_ring_is_not_lost(self):
        first = [I(0, 0, 0xa0)] + KC + [I(1, 1, 0xa1)]
        second = [R(0, 0, 0xa0), I(1, 1, 0xa1)]
        report = chaos_check.check_records([first, second], [])
        self.assertEqual(report.failures, [])
        self.assertEqual(report.lost_since_checkpoint, 0)
        self.assertEqual(report.reingested_after_restore, 1)

    def test_torn_slots_are_counted_and_empty_their_index(self):
        first = [("T", 0, 0), I(1, 1, 0xa1)] + KC
        second = [R(1, 1, 0xa1)]
        report = chaos_check.check_records([first, second], [])
        self.assertEqual(report.failures, [])
        self.assertEqual(report.torn_rejected, 1)

    def test_a_learner_entry_that_fails_its_check_is_a_torn_accept(self):
        report = chaos_check.check_records([[I(0, 0, 0xa0)]], [[A(0, 0, 0xa0, ok=0)]])
        self.assertEqual(report.torn_accepted, 1)
        self.assertIn("never accepted a torn or mismatched entry", report.failures[0])

    def test_a_learner_entry_no_server_ingested_is_a_mismatch(self):
        report = chaos_check.check_records([[I(0, 0, 0xa0)]], [[A(0, 0, 0xbad)]])
        self.assertEqual(report.torn_accepted, 1)
        self.assertIn("never ingested", report.examples["torn_accepted"][0])

    def test_sites_are_checked_apart_and_the_learner_against_all_of_them(self):
        # Both sites use epoch 1 and index 0 with their own contents; an
        # actor that moved committed at both. Each site's restore and
        # commits are judged against that site's starts only.
        site0 = [[("S", 1), I(0, 0, 0xa0)] + KC, [R(0, 0, 0xa0), ("S", 2), I(1, 1, 0xa1)]]
        site1 = [[("S", 1), I(0, 0, 0xb0), I(1, 5, 0xb1)]]
        actors0 = [[P(1, 0, 0, 0xa0), P(2, 1, 1, 0xa1)]]
        actors1 = [[P(1, 0, 0, 0xb0), P(1, 1, 5, 0xb1)]]
        learner = [[A(0, 0, 0xa0), A(0, 0, 0xb0), A(1, 5, 0xb1)]]
        report = chaos_check.check_sites([(site0, actors0), (site1, actors1)], learner)
        self.assertEqual(report.failures, [])
        self.assertEqual(report.transitions_committed, 4)
        self.assertEqual(report.restores, 1)
        self.assertEqual(report.actor_commits_ingested, 4)
        self.assertEqual(report.accepted, 3)

    def test_a_commit_is_not_accounted_by_another_sites_ingest(self):
        # Site 1 ingested the same (index, sequence, checksum) as the
        # actor's commit at site 0, whose last start never ingested it.
        site0 = [[("S", 1), I(0, 0, 0xa0)]]
        site1 = [[("S", 1), I(1, 1, 0xa1)]]
        report = chaos_check.check_sites([(site0, [[P(1, 1, 1, 0xa1)]]), (site1, [])], [])
        self.assertEqual(report.actor_commits_unaccounted, 1)

    def test_a_learner_entry_of_no_site_is_a_mismatch(self):
        report = chaos_check.check_sites([([[I(0, 0, 0xa0)]], []), ([[I(0, 0, 0xb0)]], [])],
                                         [[A(0, 0, 0xc0)]])
        self.assertEqual(report.torn_accepted, 1)


class CheckRunTest(unittest.TestCase):

    def write(self, directory, name, text):
        with open(os.path.join(directory, name), "w") as f:
            f.write(text)

    def test_reads_the_logs_of_a_run_directory_in_start_order(self):
        d = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.write(d, "server.0.vlog", "S 1\nI 0 0 00000000000000a0\nK 1 1 1\nD 1 0 0\nC 1\n")
        self.write(d, "server.1.vlog", "B 1 1\nS 2\nI 1 1 00000000000000a1\n")
        self.write(d, "learner.0.vlog", "A 1 1 00000000000000a1 1\n")
        report = chaos_check.check_run(d)
        self.assertEqual(report.failures, [])
        self.assertEqual(report.transitions_committed, 2)
        self.assertEqual(report.accepted, 1)
        self.assertEqual(report.restores, 1)
        self.assertEqual(report.evicted_at_checkpoint, 1)

    def test_reads_the_actors_logs_of_a_run_directory(self):
        d = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.write(d, "server.0.vlog", "S 1\nI 0 0 00000000000000a0\n")
        self.write(d, "server.1.vlog", "S 2\nI 1 1 00000000000000a1\n")
        self.write(d, "actor.0.0.vlog", "P 1 0 0 00000000000000a0\nP 1 2 2 00000000000000a2\n")
        self.write(d, "actor.0.1.vlog", "P 2 1 1 00000000000000a1\n")
        report = chaos_check.check_run(d)
        self.assertEqual(report.failures, [])
        self.assertEqual(report.actor_commits_ingested, 2)
        self.assertEqual(report.actor_commits_lost, 1)

    def test_reads_each_sites_logs_from_its_own_directory(self):
        d = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        for k in range(2):
            os.makedirs(os.path.join(d, "site-%d" % k))
            self.write(os.path.join(d, "site-%d" % k), "server.0.vlog",
                       "S 1\nI 0 0 00000000000000%d0\n" % (k + 1))
            self.write(os.path.join(d, "site-%d" % k), "actor.%d.0.vlog" % k,
                       "P 1 0 0 00000000000000%d0\n" % (k + 1))
        self.write(d, "learner.0.vlog", "A 0 0 0000000000000010 1\nA 0 0 0000000000000020 1\n")
        report = chaos_check.check_run(d)
        self.assertEqual(report.failures, [])
        self.assertEqual(report.transitions_committed, 2)
        self.assertEqual(report.actor_commits_ingested, 2)
        self.assertEqual(report.accepted, 2)
        # Site 1's server never ingested site 0's contents at its index 0.
        self.write(os.path.join(d, "site-1"), "actor.0.1.vlog", "P 1 0 0 0000000000000010\n")
        self.assertEqual(chaos_check.check_run(d).actor_commits_unaccounted, 1)

    def test_a_duplicated_ingest_in_a_log_fails_the_run(self):
        d = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.write(d, "server.0.vlog",
                   "S 1\nI 0 0 00000000000000a0\nI 0 0 00000000000000a0\n")
        report = chaos_check.check_run(d)
        self.assertEqual(len(report.failures), 1)
        self.assertIn("no transition ingested twice", report.failures[0])

    def test_a_torn_last_line_is_skipped_and_a_malformed_one_counted(self):
        d = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.write(d, "server.0.vlog", "I 0 0 00000000000000a0\nI 1 1 000000")
        self.assertEqual(chaos_check.check_run(d).failures, [])
        self.write(d, "server.0.vlog", "I 0 0 zz\n")
        report = chaos_check.check_run(d)
        self.assertEqual(report.bad_records, 1)
        self.assertIn("malformed", report.failures[0])

    def test_the_command_line_exits_1_on_a_broken_invariant(self):
        d = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.write(d, "server.0.vlog", "I 0 0 00000000000000a0\n")
        self.write(d, "learner.0.vlog", "A 0 0 00000000000000a0 0\n")
        self.assertEqual(chaos_check.main([d, "--json"]), 1)
        self.write(d, "learner.0.vlog", "A 0 0 00000000000000a0 1\n")
        self.assertEqual(chaos_check.main([d, "--json"]), 0)


if __name__ == "__main__":
    unittest.main()
