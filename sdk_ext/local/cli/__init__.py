"""The ``sdk-ext`` commands over local jobs and saved trials (``run``, ``trial``, ``rules``, ``report``) and their
terminal output. ``sdk_ext/cli.py`` parses arguments and dispatches here.

May import anything below it: sdk_ext.local.jobs, .request, .report, sdk_ext.trials, sdk_ext.rules.
"""
