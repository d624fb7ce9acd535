"""The shipped golden suites: agents modelled on the seed systems, and their reference policies."""
