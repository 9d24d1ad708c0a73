#!/bin/bash
# SSGD matrix factorisation on a SLURM allocation with srun alone (no MPI).
#
#   sbatch workflows/jobs/slurm-srun.sh                    # bundled MovieLens ratings
#   INPUT=ratings.tsv PARTS=8 sbatch workflows/jobs/slurm-srun.sh
#
# Tasks: 0 runs the Dask scheduler, 1 the workflow (the client), the other
# SLURM_NTASKS - 2 one single-threaded worker each: 8 here. They find each other
# through files in the submit directory (every node must see it; --shared-dir DIR
# picks another): the scheduler file and the job's TLS credentials (mode 0600).
# Exit status: 0 done, 1 the workflow failed, 2 bad options, 3 a task was lost.
#
#SBATCH --job-name=daskhpc-srun
#SBATCH --ntasks=10
#SBATCH --cpus-per-task=1
#SBATCH --mem-per-cpu=4G
#SBATCH --time=00:30:00
#SBATCH --output=daskhpc-srun-%j.out
set -uo pipefail

# An environment with `pip install "daskhpc[slurm]"` (dask-jobqueue; no MPI needed).
if [ -n "${DASKHPC_VENV:-}" ]; then source "$DASKHPC_VENV/bin/activate"; fi
JOB=${SLURM_JOB_ID:?submit with sbatch}
INPUT=${INPUT:-ratings}                   # a file, or a bundled data set's name
PARTS=${PARTS:-8}

export DASK_DASKHPC__PARTITIONER__SEED=${DASK_DASKHPC__PARTITIONER__SEED:-0}
# One thread per worker: keep numba/BLAS from starting threads that fight for the core.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1

# --kill-on-bad-exit: a task that dies (the scheduler's node, say) ends every task,
# as mpiexec would; a lost worker the launcher reports itself (status 3).
# DASKHPC_ARGS: more launcher options, e.g. "--interface ib0", "--worker-class
# distributed.Nanny", '--worker-options {"memory_limit":"3GB"}', "--insecure".
# shellcheck disable=SC2086
srun --kill-on-bad-exit=1 python -m daskhpc.slurm ${DASKHPC_ARGS:-} \
    --local-directory "${TMPDIR:-/tmp}" \
    ssgd "$INPUT" --parts "$PARTS" --json "ssgd-$JOB.json" ${EXTRA_ARGS:-}
status=$?
# left behind only if a signal killed the tasks
rm -f "daskhpc-scheduler-$JOB".*json "daskhpc-scheduler-$JOB".*json.tls.pem \
      "daskhpc-scheduler-$JOB.json" "daskhpc-scheduler-$JOB.json.tls.pem"
case $status in
  0) echo "daskhpc: report in ssgd-$JOB.json" ;;
  3) echo "daskhpc: a task was lost (see above); resubmit the job" >&2 ;;
  *) echo "daskhpc: failed with status $status" >&2 ;;
esac
exit $status
