"""Notebook helpers (smdebug's ``smdebug.profiler.analysis.notebook_utils``)."""
