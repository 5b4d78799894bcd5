#!/usr/bin/env bash
# Reproduces the placement experiment (the replay memory at the buffer node, at
# the learner, or both) on this machine. See tools/experiment/experiment.py --help.
#   tools/experiment/experiment.sh          # the default set (210 runs, about 2.5 h on 2 cores)
#   tools/experiment/experiment.sh --quick  # the seven arms once in one cell (about 2 min)
#   tools/experiment/experiment.sh --full   # 40k updates, 10 seeds in every cell (300 runs, about 8 h)
set -euo pipefail
cd "$(dirname "$0")/../.."
tools/install_deps.sh
bazel build --jobs=2 //replay_server:replay_server //actor_client:actor //learner_client:learner \
    //tools/experiment:evaluate_snapshots
# Debian's python3 has matplotlib (python3-matplotlib) for the plots.
exec /usr/bin/python3 tools/experiment/experiment.py "$@"
