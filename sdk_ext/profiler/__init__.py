"""Profiling: smdebug's ``smdebug.profiler`` module paths (readers of profiler-output/, the profiler rules)."""
