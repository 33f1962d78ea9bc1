"""Frames and merges of profiler output (smdebug's ``smdebug.profiler.analysis.utils``)."""
