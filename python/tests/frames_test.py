"""Frames stored once, from Python: a Python actor writes frame records
(dreplay.FrameRecorder) into a real replay_server started with
--frame_stack, and a Python learner gathers every transition's stacks in a
dreplay.FrameCache (on the CPU device here; the same index operations run
on a GPU). Every stack is checked byte for byte against the stacks the
test assembles itself from the records it wrote, and against the C++
assembly the reader decodes. Each frame crosses into the cache about once,
not 2 * depth times a sample."""

import struct

import numpy as np
import pytest

import dreplay
from replay_service import ReplayService

torch = pytest.importorskip("torch")

DEPTH = 4
FRAME_BYTES = 48
ACTIONS = 4
ENVS = 3
N = 3
RECORDS = 2400
CAPACITY = 512


def slot_size():
    refs_end = 24 + 2 * 2 * DEPTH
    record = (refs_end + 7) // 8 * 8 + FRAME_BYTES
    return (40 + record + 7) // 8 * 8


def frames_service(extra_flags=()):
    spec = "env=Frames obs=%du8 act=%d nstep=%d gamma=0.9" % (DEPTH * FRAME_BYTES, ACTIONS, N)
    return ReplayService(capacity=CAPACITY, batch_size=16, min_size_to_sample=16, leases=1,
                         extra_flags=list(extra_flags) + [
                                      "--frame_stack=%d" % DEPTH, "--slot_size=%d" % slot_size(),
                                      "--transition_spec=" + spec,
                                      "--observation_size=%d" % (DEPTH * FRAME_BYTES),
                                      "--num_actions=%d" % ACTIONS,
                                      "--actor_window=%d" % (CAPACITY // 2)])


def parse(record):
    """(observation refs, next refs, frame or None) of a record's bytes."""
    flags, depth = record[19], record[20]
    refs = struct.unpack_from("<%dH" % (2 * depth), record, 24)
    frame_at = (24 + 4 * depth + 7) // 8 * 8
    frame = bytes(record[frame_at:frame_at + FRAME_BYTES]) if flags & 1 else None
    return refs[:depth], refs[depth:], frame


class Writer:
    """Three environments with random frames and episode lengths, recorded."""

    def __init__(self, writer, seed):
        self.writer = writer
        self.rng = np.random.default_rng(seed)
        self.recorder = dreplay.FrameRecorder(depth=DEPTH, frame_bytes=FRAME_BYTES,
                                              environments=ENVS, n=N, gamma=0.9)
        self.records = {}  # sequence -> bytes, as written
        self.steps_left = [0] * ENVS
        for e in range(ENVS):
            self.begin(e)

    def frame(self):
        return self.rng.integers(0, 256, FRAME_BYTES, dtype=np.uint8)

    def append(self, records):
        for sequence, data in records:
            assert sequence == len(self.records)
            self.records[sequence] = data
            self.writer.append(data, priority=1.0 + sequence % 7)

    def begin(self, e):
        self.steps_left[e] = 1 + int(self.rng.integers(0, 12))
        self.append(self.recorder.begin_episode(e, self.frame()))

    def step(self):
        e = int(self.rng.integers(0, ENVS))
        self.steps_left[e] -= 1
        end = self.steps_left[e] == 0
        terminated = end and bool(self.rng.integers(0, 2))
        self.append(self.recorder.add_step(e, int(self.rng.integers(0, ACTIONS)),
                                           float(self.rng.integers(-2, 3)), self.frame(),
                                           terminated, end and not terminated))
        if end:
            self.begin(e)

    def stacks(self, q):
        obs, nxt, _ = parse(self.records[q])
        frame = lambda s: parse(self.records[s])[2]
        return (b"".join(frame(q - d) for d in obs), b"".join(frame(q - d) for d in nxt))


@pytest.mark.parametrize("decode", [True, False])
def test_the_frame_cache_gathers_the_stacks_the_actor_built(decode):
    with frames_service() as service:
        actor = dreplay.connect(service.address, role="actor", provider="soft",
                                token_file=service.credential_file(0))
        learner = dreplay.connect(service.address, role="learner", provider="soft",
                                  token_file=service.token_file)
        assert learner.config["frame_stack"] == DEPTH
        writer = Writer(actor.experience_writer(max_batch=16), seed=3 if decode else 4)
        reader = learner.batch_reader(decode=decode)
        priorities = learner.priority_writer()
        cache = dreplay.FrameCache(learner.config, device="cpu")
        checked = rows = 0
        while len(writer.records) < RECORDS:
            for _ in range(16):
                writer.step()
            writer.writer.flush()
            try:
                batch = reader.next(timeout_s=0.05)
            except dreplay.DeadlineExceededError:
                continue
            assert batch.has_frames
            cache.add(batch)
            t = cache.stacks(batch)
            assert t["observations"].dtype == torch.uint8
            assert t["actions"].shape == (batch.size,) and t["dones"].shape == (batch.size,)
            # Every row the reader kept: the cache holds what the C++ side does.
            assert bool(t["valid"].all()), batch.batch_number
            for k in range(batch.size):
                q = int(batch.sequences[k])
                assert batch.payload(k) == writer.records[q]
                obs, nxt = writer.stacks(q)
                assert t["observations"][k].numpy().tobytes() == obs, q
                assert t["next_observations"][k].numpy().tobytes() == nxt, q
                header = struct.unpack_from("<iffB", writer.records[q], 4)
                assert int(t["actions"][k]) == header[0]
                assert float(t["rewards"][k]) == pytest.approx(header[1])
                assert float(t["discounts"][k]) == pytest.approx(header[2])
                assert float(t["dones"][k]) == float(header[3])
                if decode:
                    assert batch.observations[k].astype(np.uint8).tobytes() == obs, q
                    assert batch.next_observations[k].astype(np.uint8).tobytes() == nxt, q
                checked += 1
            rows += batch.size
            priorities.write(batch, np.full(batch.size, 0.5, np.float32))
        print("checked %d rows, %d frames into the cache for %d records" % (checked, cache.frames_added, len(writer.records)))
        assert checked >= 300, checked
        # Transfer-once for frames: far fewer frames into the cache than the
        # 2 * depth a row would need if each stack crossed.
        assert cache.frames_added < 0.5 * 2 * DEPTH * rows, (cache.frames_added, rows)
        assert cache.frames_added <= 2 * len(writer.records)


def test_the_forward_reader_refuses_frame_records_and_says_what_takes_them():
    with frames_service(["--forward=priority"]) as service:
        learner = dreplay.connect(service.address, role="learner", provider="soft",
                                  token_file=service.token_file, placement="hybrid")
        with pytest.raises(dreplay.Error, match="frames once.*hybrid"):
            learner.forward_reader()


def test_frame_cache_refuses_a_server_without_frames():
    with pytest.raises(ValueError, match="frame_stack"):
        dreplay.FrameCache({"frame_stack": 0, "observation_size": 4, "capacity": 16})


def test_frame_recorder_refuses_a_frame_of_another_size():
    recorder = dreplay.FrameRecorder(depth=DEPTH, frame_bytes=FRAME_BYTES)
    with pytest.raises(ValueError):
        recorder.begin_episode(0, np.zeros(FRAME_BYTES + 1, np.uint8))
    with pytest.raises(ValueError):
        dreplay.FrameRecorder(depth=0, frame_bytes=FRAME_BYTES)


if __name__ == "__main__":
    import sys
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
