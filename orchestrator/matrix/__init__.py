"""A plan's `matrix:`: one plan, many variants, compared (docs/plans.md "Matrix").

    expand.py       the variants: the plan with each combination `--set`, compiled, ordered
    preview.py      `orch plan` of a matrix: what each variant changes and takes
    run.py          `orch apply` of a matrix: each variant a normal apply, resumable
    resume.py       `--resume`: which matrix run, and only the matrix it ran

The section's shape and its objective are part of the plan (plan/models/matrix.py,
plan/models/objective.py); matrix.json, the variants' run folders and values, a run-folder
record (runs/matrix_file.py); the report's part (the matrix table and plots) is
report/matrix.py. Nothing is imported here: run.py sits above apply.
"""
