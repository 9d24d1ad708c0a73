#!/bin/bash
# SpGEMM C = A·Aᵀ on a PBS Pro / OpenPBS allocation: daskhpc under mpiexec (dask-mpi).
#
#   qsub workflows/jobs/pbs-spgemm.sh                      # bundled MovieLens ratings
#   qsub -v INPUT=A.mtx,LAYERS=2 workflows/jobs/pbs-spgemm.sh
#
# Ranks: 0 runs the Dask scheduler, 1 the workflow (the client), the rest one
# single-threaded worker each: 2 nodes x 5 ranks = 10 ranks, 8 workers, grid 2x2x2.
# Exit status: 0 done, 1 the workflow failed, 2 bad options, 3 a rank was lost.
#
#PBS -N daskhpc-spgemm
#PBS -l select=2:ncpus=5:mpiprocs=5:mem=20gb
#PBS -l walltime=00:30:00
#PBS -j oe
set -uo pipefail
cd "${PBS_O_WORKDIR:-$PWD}"

# An environment with `pip install "daskhpc[mpi]"` (it brings the mpich wheel's mpiexec).
if [ -n "${DASKHPC_VENV:-}" ]; then source "$DASKHPC_VENV/bin/activate"; fi
NODEFILE=${PBS_NODEFILE:?submit with qsub, or set PBS_NODEFILE}
NP=$(wc -l < "$NODEFILE")                 # one line per MPI rank (mpiprocs)
JOB=${PBS_JOBID:-local}
JOB=${JOB%%.*}
INPUT=${INPUT:-$(python -c 'from daskhpc import datasets; print(datasets.path("ratings"))')}
LAYERS=${LAYERS:-2}
MEMORY=${MEMORY_PER_WORKER:-2GB}
# CHECKPOINT=DIR (on a file system every node sees): one checkpoint per batch, and a
# resubmitted job continues from the last complete batch (--resume starts afresh when
# DIR holds nothing, so the same script serves the first job and its resubmissions).
CKPT_ARGS=()
if [ -n "${CHECKPOINT:-}" ]; then CKPT_ARGS=(--checkpoint "$CHECKPOINT" --resume); fi

export DASK_DASKHPC__PARTITIONER__SEED=${DASK_DASKHPC__PARTITIONER__SEED:-0}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1

# Hydra reads the node list from the PBS node file (-f); DASKHPC_MPI_ARGS adds
# launcher options such as "--interface ib0". The cluster is private (TLS, credentials
# made for this job; "--insecure" turns that off); the dashboard is on rank 0's node
# only, and the job output prints the ssh tunnel that reaches it.
# shellcheck disable=SC2086
mpiexec -f "$NODEFILE" -n "$NP" python -m daskhpc.mpi ${DASKHPC_MPI_ARGS:-} \
    --scheduler-file "scheduler-$JOB.json" --local-directory "${TMPDIR:-/tmp}" \
    spgemm "$INPUT" --aat --layers "$LAYERS" --memory-per-worker "$MEMORY" \
    --consume count --json "spgemm-$JOB.json" "${CKPT_ARGS[@]}" ${EXTRA_ARGS:-}
status=$?
# left behind only if rank 0 aborted the job (lost rank) or a signal killed it
rm -f "scheduler-$JOB.json" "scheduler-$JOB.json.tls.pem"
case $status in
  0) echo "daskhpc: report in spgemm-$JOB.json" ;;
  3) echo "daskhpc: a rank was lost (see above); resubmit the job${CHECKPOINT:+ (it resumes from $CHECKPOINT)}" >&2 ;;
  *) echo "daskhpc: failed with status $status" >&2 ;;
esac
exit $status
