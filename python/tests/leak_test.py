"""No memory grows with the batches read: 10,000 batches through the
reader, their arrays, tensors and priority updates, against a real server."""

import gc
import os
import sys

import numpy as np
import pytest

import dreplay
from replay_service import ReplayService

BATCHES = 10000
WARMUP = 1000
# Resident memory may grow this much between batch WARMUP and BATCHES (the
# allocator's noise). A batch's own arrays are about 1 KiB here, so keeping
# one per batch would grow by about 9 MiB.
MAX_GROWTH_BYTES = 2 << 20
WAIT_S = 20.0


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_ten_thousand_batches_leave_memory_flat():
    torch = pytest.importorskip("torch")
    with ReplayService(batch_size=8, staging_depth=4, min_size_to_sample=8) as service:
        actor = dreplay.connect(service.address, role="actor", token_file=service.credential_file(0),
                                provider="soft")
        writer = actor.experience_writer()
        rng = np.random.default_rng(0)
        obs = rng.standard_normal((256, 4)).astype(np.float32)
        writer.append_transitions(obs, rng.integers(0, 2, 256), np.ones(256), obs,
                                  np.zeros(256, bool))
        writer.flush()
        learner = dreplay.connect(service.address, role="learner",
                                  token_file=service.token_file, provider="soft")
        reader = learner.batch_reader()
        priorities = learner.priority_writer()
        for i in range(BATCHES):
            batch = reader.next(timeout_s=WAIT_S)
            tensors = batch.torch()
            priorities.write(batch, tensors["rewards"].abs() + 0.5)
            if i + 1 == WARMUP:
                gc.collect()
                start = rss_bytes()
        gc.collect()
        growth = rss_bytes() - start
        assert reader.stats()["batches"] == BATCHES
        assert growth < MAX_GROWTH_BYTES, "RSS grew by %d bytes" % growth
        print("RSS growth over %d batches: %d bytes" % (BATCHES - WARMUP, growth))


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-s", "-p", "no:cacheprovider"]))
