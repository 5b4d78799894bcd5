"""Batches read from the replay server, as NumPy arrays and torch tensors.

Lifetime rule: every array of a Batch is its own memory. BatchReader.next()
copies the batch out of the reader's RDMA-registered buffers (which the next
read reuses) before it returns, so a Batch and its arrays stay valid for as
long as Python holds them, whatever is read afterwards. Batch.torch() wraps
them with torch.from_numpy(): the CPU tensors share the arrays' memory (no
copy) and keep them alive; writing to one writes to the other. With a
device other than the CPU, the tensors are copies on that device: for a
CUDA device, each array is first copied into page-locked host memory
(torch's caching host allocator), so the host-to-device copy is a DMA
that does not block the calling thread. BatchReader.prefetched(device=)
makes those copies on its own thread, ahead of the training loop.

Arrays (B = batch.size, m = observation size):
  weights [B] float32          importance-sampling weights
  sequences [B] uint64, indices [B] uint32   which slot each transition is
  insert_time_ns [B] uint64    when the actor sealed it
  arrived [B] bool             its bytes crossed the link with this batch
  policy_lag [B] int64         a batch over several nodes (dreplay.connect([...])):
                               versions published minus the actor's (-1: unknown)
  payloads [B, max_payload] uint8, lengths [B] uint32   the raw payloads
and, when the reader decodes (rl/transition.h's encoding):
  observations [B, m] float32, actions [B] int64, rewards [B] float32,
  discounts [B] float32 (gamma^steps), dones [B] float32 (1.0: terminated),
  next_observations [B, m] float32
and, from a server that stores frames once (replay_server --frame_stack D;
payloads are then frame records, decoded observations the stacks assembled
on the CPU, and a transition whose records the learner cache could not
serve is left out when decoding), for dreplay.FrameCache (F = m / D):
  frame_indices [R] uint32, frame_sequences [R] uint64, frames [R, F] uint8
      the frames that arrived with the batch, once each, by server slot
  observation_slots, next_observation_slots [B, D] uint32,
  observation_sequences, next_observation_sequences [B, D] uint64
      the frames of each transition's two stacks, oldest first
  actions, rewards, discounts, dones   as above, also without decoding
"""

TRANSITION_FIELDS = ("observations", "actions", "rewards", "discounts", "dones",
                     "next_observations")
ENTRY_FIELDS = ("weights", "sequences", "indices", "insert_time_ns", "arrived", "policy_lag")


class Batch:
    """One staged batch. Attributes: batch_number, epoch, incarnation, beta
    (None for a batch made over several buffer nodes, whose rows come from
    several staged batches), size, and the arrays named in the module's
    comment."""

    def __init__(self, fields):
        self._fields = fields
        self._on_device = {}  # str(device) -> tensors, made once
        self.batch_number = fields.get("batch_number")
        self.epoch = fields.get("epoch")
        self.incarnation = fields.get("incarnation")
        self.beta = fields.get("beta")
        self.size = len(fields["weights"])

    def __getattr__(self, name):
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def decoded(self):
        return "observations" in self._fields

    def payload(self, i):
        """The raw payload of entry i, as bytes."""
        return bytes(self._fields["payloads"][i, :self._fields["lengths"][i]])

    @property
    def has_frames(self):
        """True for a batch of a server that stores frames once."""
        return "frames" in self._fields

    def numpy(self):
        """The arrays, by name (the transitions' and the entries', and the
        frames' of a frame-stack server)."""
        names = tuple(n for n in ENTRY_FIELDS if n in self._fields) + (
            TRANSITION_FIELDS if self.decoded else ("payloads", "lengths"))
        if self.has_frames:
            from dreplay.frame_cache import FRAME_FIELDS
            names += FRAME_FIELDS
        return {name: self._fields[name] for name in names}

    def torch(self, device=None):
        """The transitions and weights as torch tensors (see the lifetime
        rule): observations, actions, rewards, discounts, dones,
        next_observations, weights."""
        import torch  # only this method needs torch
        if not self.decoded:
            raise ValueError("batch %d was read with decode=False" % self.batch_number)
        if device is not None:
            device = torch.device(device)
            if device.type == "cpu":
                device = None
        if device is not None and str(device) in self._on_device:
            return dict(self._on_device[str(device)])
        pinned = device is not None and device.type == "cuda"
        out = {}
        for name in TRANSITION_FIELDS + ("weights",):
            tensor = torch.from_numpy(self._fields[name])
            if pinned:
                tensor = tensor.pin_memory()  # the copy below then does not block
            out[name] = tensor if device is None else tensor.to(device, non_blocking=True)
        if device is not None:
            self._on_device[str(device)] = out
        return dict(out)

    def __len__(self):
        return self.size

    def __repr__(self):
        return "Batch(number=%s, epoch=%s, size=%d)" % (self.batch_number, self.epoch, self.size)
