"""Record and replay at the model boundary, and say where behaviour diverged."""
