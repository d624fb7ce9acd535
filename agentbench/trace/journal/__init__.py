"""The spool beside a store: each process's append-only journal of its runs, reading a
journal's lines back into rows, and the quarantine for journals that cannot be stored whole."""
