"""Profiling: smdebug's ``smdebug.profiler`` paths.

Collecting (docs/PROFILING.md, "Collecting"): the system monitor (:mod:`sdk_ext.profiler.monitor`), which
samples one host's CPU, memory, disk, network and GPUs into ``profiler-output/system/``, and the step
timeline (:mod:`sdk_ext.profiler.timeline`) that the hooks write into ``profiler-output/framework/``.
Importing this package runs nothing else.
"""
