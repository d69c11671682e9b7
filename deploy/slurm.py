"""Grade the class on SLURM: Dask workers as SLURM jobs (dask-jobqueue), the course's grading code unchanged.

    pip install dask-jobqueue                       # on the submit host, in the course's .venv
    export NBGRADER_DB_URL=postgresql+psycopg://grader@db.example.edu/gradebook
    .venv/bin/python deploy/slurm.py --jobs 8       # 8 jobs of 16 one-thread workers: 128 submissions at once

Not tested here (docs/INSTRUCTOR.md section 7 says what is). Every node must see this course
directory at the same path and reach the PostgreSQL server; adapt the queue, account and sizes.
"""
import argparse
import os
from pathlib import Path

from dask_jobqueue import SLURMCluster
from distributed import Client

from grader import cluster

COURSE = Path(__file__).resolve().parents[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--cores", type=int, default=16, help="workers per job (one submission each)")
    args = parser.parse_args()
    slurm = SLURMCluster(
        queue="normal", account=os.environ.get("SLURM_ACCOUNT"),
        cores=args.cores, processes=args.cores, memory=f"{5 * args.cores}GB",  # 4 GiB cap a kernel + the worker
        walltime="02:00:00", local_directory="$TMPDIR",
        python=str(COURSE / ".venv" / "bin" / "python"),
        job_script_prologue=[f"cd {COURSE}", "export OMP_NUM_THREADS=1"],
    )
    slurm.scale(jobs=args.jobs)
    with Client(slurm) as client:
        cluster.grade(client, COURSE, os.environ["NBGRADER_DB_URL"])


if __name__ == "__main__":
    main()
