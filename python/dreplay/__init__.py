"""dreplay from Python: the replay service's clients and environments.

    import dreplay
    learner = dreplay.connect("127.0.0.1:18515", role="learner", token_file="token.txt")
    reader = learner.batch_reader()
    priorities = learner.priority_writer()
    for batch in reader.batches(count=1000):
        t = batch.torch(device="cuda")          # observations, actions, ... as tensors
        td = train(t)                           # |TD error| per transition
        priorities.write(batch, td)

    actor = dreplay.connect("127.0.0.1:18515", role="actor", actor_id=0)
    writer = actor.experience_writer()
    writer.append(b"payload bytes", priority=1.0)
    writer.flush()

Every call that may wait (connecting, flushing, reading a batch, publishing
or fetching parameters, reading stats) releases the GIL. A failed call raises
dreplay.Error (a RuntimeError) whose str() is the C++ status, with .code and
.message; InvalidArgument also is a ValueError, DeadlineExceeded a
TimeoutError.

Batches own their arrays: see dreplay.batches for the lifetime rule.
Parameters in the project's params format (what the C++ actors load): see
dreplay.params.
"""

from dreplay import _dreplay
from dreplay._dreplay import (DeadlineExceededError, Environment, Error, FrameRecorder,
                              InvalidArgumentError, actor_credential, environment_names,
                              make_environment, parse_transition_spec)
from dreplay.batches import Batch
from dreplay.frame_cache import FrameCache
from dreplay.clients import (ActorStatsPublisher, BatchReader, ExperienceWriter, ForwardReader,
                             MultiNodeSession, ParamFetcher, ParamPublisher, PriorityWriter,
                             Session, StatsReader, connect)

__all__ = [
    "ActorStatsPublisher", "Batch", "BatchReader", "DeadlineExceededError", "Environment", "Error",
    "ExperienceWriter", "ForwardReader", "FrameCache", "FrameRecorder",
    "InvalidArgumentError", "MultiNodeSession", "ParamFetcher", "ParamPublisher", "PriorityWriter", "Session",
    "StatsReader", "actor_credential", "connect", "environment_names", "make_environment", "parse_transition_spec",
]
