#!/bin/bash
# Queue the fleet calibration: a job array of NODES elements (one node each), then the check once all ended.
#   FLEET_DIR=/shared/bringup-42 REFERENCE=/path/to/nvidia-h100-80gb-hbm3.h5 fleet/slurm/submit.sh 16 --partition=gpu
# Extra arguments go to both sbatch calls (partition, account, ...).  CALIBRATE_ARGS="--quick" passes options
# to calibrate; PYTHON picks the interpreter (default python3).
set -euo pipefail
nodes="${1:?usage: FLEET_DIR=... [REFERENCE=...] submit.sh NODES [sbatch options]}"
shift
: "${FLEET_DIR:?set FLEET_DIR to a folder every node can write}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$FLEET_DIR"
array=$(sbatch --parsable --array="0-$((nodes - 1))" --export=ALL "$@" "$here/calibrate.sbatch")
array="${array%%;*}"
check=$(sbatch --parsable --dependency="afterany:$array" --export="ALL,EXPECTED_NODES=$nodes" "$@" \
  "$here/check.sbatch")
echo "calibration array $array ($nodes node(s)), check $check: results in $FLEET_DIR/fleet.html"
