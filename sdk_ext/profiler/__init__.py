"""Profiling, under smdebug's ``smdebug.profiler`` module paths.

Readers of ``profiler-output/`` (SageMaker's and sdk_ext's): :mod:`.system_metrics_reader`,
:mod:`.algorithm_metrics_reader`, :mod:`.system_profiler_file_parser`, :mod:`.trace_event_file_parser`,
:mod:`.tf_profiler_parser`, :mod:`.utils`; pandas frames in :mod:`.analysis.utils.profiler_data_to_pandas`;
a job's readers in :mod:`.analysis.notebook_utils.training_job`. Nothing is imported here, so that
``import sdk_ext.profiler`` costs nothing.
"""
