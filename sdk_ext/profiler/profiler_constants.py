"""Constants of profiler output, under the names of ``smdebug.profiler.profiler_constants``.

The layout itself is in :mod:`sdk_ext.format.profiler_paths`; these are the names code written for
smdebug imports.
"""

from __future__ import annotations

from sdk_ext.format.profiler_paths import (
    DATE_HOUR_FORMAT,
    HOROVOD_TIMELINE_SUFFIX,
    MODEL_TIMELINE_SUFFIX,
    PYTHON_TIMELINE_SUFFIX,
    SMDATAPARALLEL_TIMELINE_SUFFIX,
    SYSTEM_DIR,
    TENSORBOARD_TIMELINE_SUFFIX,
    TRACE_EVENTS_DIR,
)

DEFAULT_PREFIX = TRACE_EVENTS_DIR
DEFAULT_SYSTEM_PROFILER_PREFIX = SYSTEM_DIR
TRACE_DIRECTORY_FORMAT = DATE_HOUR_FORMAT
PYTHONTIMELINE_SUFFIX = PYTHON_TIMELINE_SUFFIX
MODELTIMELINE_SUFFIX = MODEL_TIMELINE_SUFFIX
TENSORBOARDTIMELINE_SUFFIX = TENSORBOARD_TIMELINE_SUFFIX
HOROVODTIMELINE_SUFFIX = HOROVOD_TIMELINE_SUFFIX
SMDATAPARALLELTIMELINE_SUFFIX = SMDATAPARALLEL_TIMELINE_SUFFIX
MERGEDTIMELINE_SUFFIX = "merged_timeline.json"
PT_DATALOADER_WORKER = "DataLoaderWorker"
PT_DATALOADER_ITER = "DataLoaderIter"
PT_DATALOADER_INITIALIZE = "DataLoaderIterInitialize"
TF_DATALOADER_ITER = "DataIterator"
TF_METRICS_PREFIX = "aws_marker-"

#: Environment variable: how far (microseconds) past a window's end the framework reader also looks,
#: for events that began in the window but ended (and were written) after it. smdebug's name.
ENV_TIME_BUFFER = "TIME_BUFFER_MICROSECONDS"
TIME_BUFFER_DEFAULT = 3 * 60 * 1000 * 1000
#: Environment variable: how far (microseconds) behind the newest file an S3 listing restarts, so that
#: files uploaded late are still found. smdebug's name (and spelling).
ENV_TRAIILING_DURATION = "TRAILING_DURATION_MICROSECONDS"
TRAILING_DURATION_DEFAULT = 5 * 60 * 1000 * 1000

CONVERT_TO_MICROSECS = 1000000
CONVERT_MICRO_TO_NS = 1000
CONFIG_PATH_DEFAULT = "/opt/ml/input/config/profilerconfig.json"
BASE_FOLDER_DEFAULT = "/opt/ml/output/profiler"
MAX_FILE_SIZE_DEFAULT = 10485760
CLOSE_FILE_INTERVAL_DEFAULT = 60
FILE_OPEN_FAIL_THRESHOLD_DEFAULT = 50
