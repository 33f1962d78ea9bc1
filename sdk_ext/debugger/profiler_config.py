"""``sagemaker.debugger.profiler_config``'s names: ProfilerConfig (defined in :mod:`sdk_ext.debugger.profiler`)."""

from __future__ import annotations

import logging

from sdk_ext.debugger.framework_profile import FrameworkProfile
from sdk_ext.debugger.profiler import Profiler, ProfilerConfig

logger = logging.getLogger(__name__)

__all__ = ["FrameworkProfile", "Profiler", "ProfilerConfig", "logger"]
