"""Analysis of profiler output (smdebug's ``smdebug.profiler.analysis``): the profiler rules."""
