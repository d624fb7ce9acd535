"""Comparing evals and reaching the verdict: is this change a regression?

`stats` has an eval's numbers (`TrialOutcome`, `Summary`, pass@k); `baseline` finds the eval
to compare with and `against` evaluates another commit to make one; `compare` compares two
stored evals case by case (`case_changes`) with a significance test (`significance`) into a
`comparison.Comparison`, and `compare_text` prints it; `gate` says what fails the build, `verdict`
turns everything into one verdict and exit code, and `own_verdict` judges a stored eval that kept
none.
"""
