"""A plan's `matrix:`: one plan, many variants, compared (docs/plans.md "Matrix").

    spec.py         the section's shape, checked where the plan is loaded (part of the plan)
    objective.py    `p99 TTFT <= 2s at C >= 64`: what "best" means
    expand.py       the variants: the plan with each combination `--set`, compiled, ordered
    preview.py      `orch plan` of a matrix: what each variant changes and takes
    run.py          `orch apply` of a matrix: each variant a normal apply, resumable
    resume.py       `--resume`: which matrix run, and only the matrix it ran
    matrix_file.py  matrix.json: the variants' run folders and values

The report's part (the matrix table and plots) is report/matrix.py. Nothing is imported here:
spec.py sits under the plan model, run.py above apply.
"""
