#!/bin/bash
# SpGEMM C = A·Aᵀ on a SLURM allocation: daskhpc under mpiexec (dask-mpi).
#
#   sbatch workflows/jobs/slurm-spgemm.sh                  # bundled MovieLens ratings
#   INPUT=A.mtx LAYERS=2 MEMORY_PER_WORKER=8GB sbatch workflows/jobs/slurm-spgemm.sh
#
# Ranks: 0 runs the Dask scheduler, 1 the workflow (the client), the other
# SLURM_NTASKS - 2 one single-threaded worker each: 8 here, a 2x2x2 SUMMA grid.
# Exit status: 0 done, 1 the workflow failed, 2 bad options, 3 a rank was lost.
#
#SBATCH --job-name=daskhpc-spgemm
#SBATCH --ntasks=10
#SBATCH --cpus-per-task=1
#SBATCH --mem-per-cpu=4G
#SBATCH --time=00:30:00
#SBATCH --output=daskhpc-spgemm-%j.out
set -uo pipefail

# An environment with `pip install "daskhpc[mpi]"` (it brings the mpich wheel's mpiexec).
if [ -n "${DASKHPC_VENV:-}" ]; then source "$DASKHPC_VENV/bin/activate"; fi
NTASKS=${SLURM_NTASKS:?submit with sbatch, or set SLURM_NTASKS}
JOB=${SLURM_JOB_ID:-local}
INPUT=${INPUT:-$(python -c 'from daskhpc import datasets; print(datasets.path("ratings"))')}
LAYERS=${LAYERS:-2}                       # grid q x q x LAYERS, q*q*LAYERS = workers
MEMORY=${MEMORY_PER_WORKER:-2GB}          # Symbolic3D picks the batch count from this
# CHECKPOINT=DIR (on a file system every node sees): one checkpoint per batch, and a
# resubmitted job continues from the last complete batch (--resume starts afresh when
# DIR holds nothing, so the same script serves the first job and its resubmissions).
CKPT_ARGS=()
if [ -n "${CHECKPOINT:-}" ]; then CKPT_ARGS=(--checkpoint "$CHECKPOINT" --resume); fi

# daskhpc settings reach every rank through the environment (or ~/.config/dask/*.yaml).
export DASK_DASKHPC__PARTITIONER__SEED=${DASK_DASKHPC__PARTITIONER__SEED:-0}
# One thread per worker: keep numba/BLAS from starting threads that fight for the core.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1

# Hydra (the mpich wheel's mpiexec) starts the ranks on every node through srun.
# DASKHPC_MPI_ARGS: more launcher options, e.g. "--interface ib0" for InfiniBand.
# The cluster is private (TLS, credentials made for this job; scheduler-$JOB.json.tls.pem,
# mode 0600, lets a notebook of yours join); "--insecure" turns that off. The dashboard
# is on rank 0's node only; the job output prints the ssh tunnel that reaches it.
# shellcheck disable=SC2086
mpiexec -n "$NTASKS" python -m daskhpc.mpi ${DASKHPC_MPI_ARGS:-} \
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
