"""A suite across commits: its history and the search for the commit that changed a case.

`history` reads a suite's evals along the git history (numbers per eval, regressions, flaky
cases); `bisect` finds the first commit where one case's behaviour changed
(`agentbench bisect`); `git_commits` asks git about many commits at once.
"""
