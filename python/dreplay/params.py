"""Q-network parameters in the project's params format (rl/params_format.h).

The buffer is a 32-byte header (magic, format version, the architecture's
shape hash, a version, the value count) and then every tensor's float32
values, row-major, in the network's order. The C++ Q-network (rl/qnet.h) is
a torso (none, MinAtar's convolution, or the Nature DQN CNN) and an MLP head;
its tensors are, per layer, weight then bias, the torso's convolutions first.
make_qnetwork() builds the same layers in torch, whose state_dict holds the
same tensors in the same order, so encode_state_dict() of it is the buffer a
C++ actor loads, and load_state_dict() loads what the C++ learner publishes.
The header and the hash are computed by the C++ code itself (bound in
dreplay._dreplay), not re-implemented here.

    env = dreplay.make_environment("MinAtar/Breakout")       # or observation="pixels84"
    net = params.network_for(env)                             # MinAtar's DQN network
"""

import numpy as np

from dreplay import _dreplay

# rl/qnet.h's torsos: (output channels, kernel, stride) per convolution, and
# the side of the square input.
_TORSOS = {
    "mlp": ((), 0),
    "minatar": (((16, 3, 1),), 10),
    "nature_cnn": (((32, 8, 4), (64, 4, 2), (64, 3, 1)), 84),
}
# An environment's observation_layout -> (torso, default hidden sizes).
_LAYOUTS = {
    "vector": ("mlp", (64, 64)),
    "grid10x10": ("minatar", (128,)),
    "pixels84": ("nature_cnn", (512,)),
}


def default_hidden(env):
    """The hidden sizes the C++ binaries give `env`'s network by default
    (rl::DefaultHiddenSizes): 64,64; MinAtar 128; pixels84 512."""
    return list(_LAYOUTS[env.observation_layout][1])


def network_for(env, hidden=None):
    """The C++ binaries' Q-network for a dreplay Environment (the torso its
    observation layout needs; `hidden` or the default head)."""
    torso = _LAYOUTS[env.observation_layout][0]
    return make_qnetwork(env.observation_size, env.action_count,
                         default_hidden(env) if hidden is None else hidden, torso=torso,
                         channels=env.observation_channels)


def make_qnetwork(observation_size, action_count, hidden=(64, 64), torso="mlp", channels=0):
    """The C++ Q-network's architecture in torch: a torso ("mlp": none;
    "minatar": 10x10xC grids, channel last; "nature_cnn": C 84x84 frames of
    0..255, scaled by 1/255), then Linear, ReLU, ..., Linear. Rows of
    observations are flat, as the C++ network takes them."""
    import torch

    class QNetwork(torch.nn.Module):
        def __init__(self):
            super().__init__()
            convs, side = _TORSOS[torso]
            if convs and observation_size != channels * side * side:
                raise ValueError("torso %s with %d channels takes %d values, not %d" % (
                    torso, channels, channels * side * side, observation_size))
            layers, width = [], channels
            for out, kernel, stride in convs:
                layers += [torch.nn.Conv2d(width, out, kernel, stride), torch.nn.ReLU()]
                width, side = out, (side - kernel) // stride + 1
            self.torso = torch.nn.Sequential(*layers)
            layers, width = [], width * side * side if convs else observation_size
            for h in hidden:
                layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
                width = h
            layers.append(torch.nn.Linear(width, action_count))
            self.head = torch.nn.Sequential(*layers)

        def forward(self, x):
            b = x.shape[0]
            if torso == "minatar":
                x = x.reshape(b, 10, 10, channels).permute(0, 3, 1, 2)
            elif torso == "nature_cnn":
                x = x.reshape(b, channels, 84, 84) * (1.0 / 255.0)
            if torso != "mlp":
                x = self.torso(x).flatten(1)
            return self.head(x)

    return QNetwork()


def shape_hash(shapes):
    """The params format's hash of a list of tensor shapes."""
    return _dreplay.params_shape_hash([list(s) for s in shapes])


def encode_state_dict(state_dict, version=0):
    """The params buffer (bytes) of a state_dict's tensors, in its order."""
    tensors = [t.detach().to("cpu", dtype=_float32()) for t in state_dict.values()]
    values = np.concatenate([t.reshape(-1).numpy() for t in tensors]) if tensors else \
        np.zeros(0, np.float32)
    return _dreplay.encode_params(shape_hash([t.shape for t in tensors]), version, values)


def load_state_dict(module, data):
    """Loads a params buffer into `module` (same architecture, checked by
    the shape hash); returns the buffer's version. Raises dreplay.Error
    (FAILED_PRECONDITION) for another architecture."""
    import torch
    state = module.state_dict()
    version, values = _dreplay.decode_params(bytes(data), shape_hash([t.shape for t in
                                                                       state.values()]))
    new_state, offset = {}, 0
    for name, tensor in state.items():
        n = tensor.numel()
        new_state[name] = torch.from_numpy(values[offset:offset + n].reshape(tuple(tensor.shape)))
        offset += n
    module.load_state_dict(new_state)
    return version


def header(data):
    """The header of a params buffer as a dict (format_version, shape_hash,
    version, count)."""
    return _dreplay.decode_params_header(bytes(data))


def _float32():
    import torch
    return torch.float32
