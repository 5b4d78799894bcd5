#!/usr/bin/env bash
# Reproduces the long-haul experiment (replay memory at the buffer node versus
# at the learner) on this machine. See tools/experiment.py --help.
#   tools/experiment.sh            # default set: 3 seeds, 2 links, sweep (~30 min)
#   tools/experiment.sh --quick    # smoke run
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
bazel build --jobs=2 //replay_server:replay_server //actor_client:actor //learner_client:learner
# Debian's python3 has matplotlib (python3-matplotlib) for the plots.
exec /usr/bin/python3 tools/experiment.py "$@"
