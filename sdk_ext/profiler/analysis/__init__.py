"""Analysis helpers over profiler output (smdebug's ``smdebug.profiler.analysis``)."""
