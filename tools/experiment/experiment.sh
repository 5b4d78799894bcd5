#!/usr/bin/env bash
# Reproduces the long-haul experiment (replay memory at the buffer node versus
# at the learner) on this machine. See tools/experiment/experiment.py --help.
#   tools/experiment/experiment.sh          # the default set (81 runs, about 66 min on 2 cores)
#   tools/experiment/experiment.sh --quick  # a smoke run (about 2 min)
#   tools/experiment/experiment.sh --full   # 10 seeds everywhere, 90 s runs (170 runs, about 4.5 h)
set -euo pipefail
cd "$(dirname "$0")/../.."
tools/install_deps.sh
bazel build --jobs=2 //replay_server:replay_server //actor_client:actor //learner_client:learner \
    //tools/experiment:evaluate_snapshots
# Debian's python3 has matplotlib (python3-matplotlib) for the plots.
exec /usr/bin/python3 tools/experiment/experiment.py "$@"
