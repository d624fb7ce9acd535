"""Redaction: masking secrets in every value, text and stream before anything is written, and
masking a run's rows again with the secrets learned while it ran."""
