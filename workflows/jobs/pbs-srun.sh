#!/bin/bash
# SSGD matrix factorisation on a PBS Pro / OpenPBS allocation without MPI (pbsdsh).
#
#   qsub workflows/jobs/pbs-srun.sh                        # bundled MovieLens ratings
#   qsub -v INPUT=ratings.tsv,PARTS=8 workflows/jobs/pbs-srun.sh
#
# pbsdsh starts one task per line of the node file (2 nodes x 5 = 10); each gets
# its rank from PBS_VNODENUM, handed to the launcher as PMI_RANK / PMI_SIZE. Task 0
# runs the Dask scheduler, 1 the workflow, the rest one worker each (8). They find
# each other through files in $PBS_O_WORKDIR (every node must see it).
# Exit status: 0 done, 1 the workflow failed, 2 bad options, 3 a task was lost
# (pbsdsh itself does not pass it on: the workflow's task writes it to a file).
#
#PBS -N daskhpc-srun
#PBS -l select=2:ncpus=5:mpiprocs=5:mem=20gb
#PBS -l walltime=00:30:00
#PBS -j oe
set -uo pipefail
cd "${PBS_O_WORKDIR:-$PWD}"

NODEFILE=${PBS_NODEFILE:?submit with qsub}
NP=$(wc -l < "$NODEFILE")
JOB=${PBS_JOBID:?submit with qsub}
JOB=${JOB%%.*}
INPUT=${INPUT:-ratings}
PARTS=${PARTS:-8}
rm -f "status-$JOB"

# Every task starts a fresh shell on its node: the environment is set up inside.
# shellcheck disable=SC2016
pbsdsh -- /bin/bash -c '
    cd "$PBS_O_WORKDIR"
    if [ -n "${DASKHPC_VENV:-}" ]; then source "$DASKHPC_VENV/bin/activate"; fi
    export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1
    export DASK_DASKHPC__PARTITIONER__SEED=${DASK_DASKHPC__PARTITIONER__SEED:-0}
    PMI_RANK=$PBS_VNODENUM PMI_SIZE='"$NP"' python -m daskhpc.slurm ${DASKHPC_ARGS:-} \
        --local-directory "${TMPDIR:-/tmp}" \
        ssgd '"$INPUT"' --parts '"$PARTS"' --json ssgd-'"$JOB"'.json
    status=$?
    if [ "$PBS_VNODENUM" = 1 ]; then echo $status > status-'"$JOB"'; fi
'
status=$(cat "status-$JOB" 2>/dev/null || echo 3)
rm -f "status-$JOB" "daskhpc-scheduler-$PBS_JOBID.json" "daskhpc-scheduler-$PBS_JOBID.json.tls.pem"
case $status in
  0) echo "daskhpc: report in ssgd-$JOB.json" ;;
  3) echo "daskhpc: a task was lost (see above); resubmit the job" >&2 ;;
  *) echo "daskhpc: failed with status $status" >&2 ;;
esac
exit "$status"
