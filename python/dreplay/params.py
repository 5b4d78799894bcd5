"""Q-network parameters in the project's params format (rl/params_format.h).

The buffer is a 32-byte header (magic, format version, the architecture's
shape hash, a version, the value count) and then every tensor's float32
values, row-major, in the network's order. The C++ Q-network (rl/qnet.h) is
an MLP whose tensors are, per layer, weight [out, in] then bias [out]; a
torch.nn.Sequential of Linear and ReLU layers (make_qnetwork()) has the same
tensors in the same order in its state_dict, so encode_state_dict() of it is
the buffer a C++ actor loads, and load_state_dict() loads what the C++
learner publishes. The header and the hash are computed by the C++ code
itself (bound in dreplay._dreplay), not re-implemented here.
"""

import numpy as np

from dreplay import _dreplay


def make_qnetwork(observation_size, action_count, hidden=(64, 64)):
    """The C++ Q-network's architecture in torch: Linear, ReLU, ..., Linear."""
    import torch
    layers, width = [], observation_size
    for h in hidden:
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
        width = h
    layers.append(torch.nn.Linear(width, action_count))
    return torch.nn.Sequential(*layers)


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
