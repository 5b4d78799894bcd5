"""A learner's frames on its own device, and stacks gathered there.

For a server that stores frames once (replay_server --frame_stack), a
batch carries each frame it needs once, and a frame the learner already
holds (transfer-once, learner_cache=True) not at all. FrameCache keeps the
frames it was given in one tensor on `device`, one row per server slot, and
builds each transition's stacks with index operations there, so that host
memory and the host-to-device bus carry about one frame per new record
instead of 2 * depth frames per sample:

    cache = dreplay.FrameCache(session.config, device="cuda")
    for batch in reader.batches():
        cache.add(batch)                   # the frames that arrived
        t = cache.stacks(batch)            # uint8 stacks on the device
        ...train on t["observations"][t["valid"]]...

A row whose frames the cache does not hold as the sequences the batch names
(it was given the batch that carried them after a reset, say) is marked
invalid rather than assembled from other frames.
"""

import numpy as np

FRAME_FIELDS = ("frame_indices", "frame_sequences", "frames", "observation_slots",
                "observation_sequences", "next_observation_slots", "next_observation_sequences")


class FrameCache:
    """Frames by server slot on a torch device (see the module's comment)."""

    def __init__(self, config, device="cpu"):
        """`config`: the session's (Session.config: capacity, frame_stack
        and observation_size are read)."""
        import torch  # only this class needs torch
        depth = int(config["frame_stack"])
        if depth <= 0:
            raise ValueError("the server does not store frames once (frame_stack is 0)")
        self.depth = depth
        self.frame_bytes = int(config["observation_size"]) // depth
        self.capacity = int(config["capacity"])
        self.device = torch.device(device)
        pin = self.device.type == "cuda"
        self.frames = torch.zeros((self.capacity, self.frame_bytes), dtype=torch.uint8,
                                  device=self.device)
        # -1: no frame; otherwise the sequence of the frame the row holds.
        self.sequences = torch.full((self.capacity,), -1, dtype=torch.int64, device=self.device)
        self._pin = pin
        self.frames_added = 0

    def _to_device(self, array):
        import torch
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        if self._pin:
            tensor = tensor.pin_memory()  # copied to the device without blocking
        return tensor.to(self.device, non_blocking=True)

    def add(self, batch):
        """Stores the frames `batch` carried (each once)."""
        if not batch.has_frames:
            raise ValueError("batch %d carries no frames: the server does not store frames once"
                             % batch.batch_number)
        count = len(batch.frame_indices)
        if count == 0:
            return
        rows = self._to_device(batch.frame_indices.astype(np.int64))
        self.frames[rows] = self._to_device(batch.frames)
        self.sequences[rows] = self._to_device(batch.frame_sequences.astype(np.int64))
        self.frames_added += count

    def stacks(self, batch):
        """The batch's transitions with their stacks gathered on the device:
        observations and next_observations [B, depth * frame_bytes] uint8;
        actions, rewards, discounts, dones and weights as Batch.torch()
        gives them (on the device); and valid [B] bool, False for a row
        whose frames the cache does not hold."""
        import torch
        out = {}
        valid = None
        for name in ("observation", "next_observation"):
            slots = self._to_device(getattr(batch, name + "_slots").astype(np.int64))
            wanted = self._to_device(getattr(batch, name + "_sequences").astype(np.int64))
            held = (self.sequences[slots] == wanted).all(dim=1)
            valid = held if valid is None else valid & held
            out[name + "s"] = self.frames[slots].reshape(slots.shape[0], -1)
        out["valid"] = valid
        for name in ("actions", "rewards", "discounts", "dones", "weights"):
            out[name] = self._to_device(getattr(batch, name))
        return out
