#!/usr/bin/env bash
# The README's first command: the end-to-end demo (buffer node, 4 actors and a
# learner training CartPole-v1 over an emulated 10 km / 25 GbE link).
set -euo pipefail
echo "run_demo: the demo is not built yet: the actor and learner binaries do not exist." >&2
echo "run_demo: see the README's status section for what works today." >&2
exit 1
