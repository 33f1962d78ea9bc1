"""A CreateTrainingJob request for a local job: checked as SageMaker's API checks it before anything touches the disk
(``check``), or built from ``sdk-ext run`` options the way the v2 Estimator would build it (``from_options``).

May import: sdk_ext.exceptions, sdk_ext.debugger, sdk_ext.rules.builtin (rule names). Pure: no I/O.
"""
