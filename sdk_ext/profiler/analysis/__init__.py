"""Analysis of profiler output (smdebug's ``smdebug.profiler.analysis``): helpers (``utils``) and the profiler
rules (``rules``)."""
